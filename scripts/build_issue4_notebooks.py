"""Write notebooks 04 and 05 (issue 4) from their cell sources; execute them afterwards with nbconvert.

``--markdown-only`` updates the text cells of the executed notebooks and keeps their outputs.
"""

from pathlib import Path

import nbformat as nbf

HERE = Path(__file__).resolve().parent.parent / "notebooks"

SETUP = """import matplotlib

matplotlib.use("Agg")  # figures are shown with plots_pruning.show: PNG only, no "<Figure ...>" text
import numpy as np

from mhattn.heads.gates import train_gates
from mhattn.heads.importance import ablation_deltas, head_importance, masked_eval, spearman
from mhattn.heads.prune import pruning_curve, random_removals
from mhattn.heads.roles import attention_maps, detect_roles, planted_match
from mhattn.plot import attention_heatmaps
from mhattn.plots_pruning import importance_bars, pruning_curves, random_removal_hist, show
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.loop import evaluate
from mhattn.training.tasks import task_from_meta"""

NB04 = [
    (
        "md",
        """# 04 · Training a 12-head model and finding out what its heads do

**After this notebook you can**
- describe the planted-roles task and why it makes head roles visible;
- read a head's attention map and call it positional, rare-token or neither;
- measure how much the loss needs each head, with Michel's importance and with ablation;
- explain, with numbers from these two models, why taking away half the heads can hurt less than one expects.

Nothing is trained here for long: both models ship inside `mhattn` (`mhattn/data/`). `mhattn train --task roles`
re-creates the plain one and `mhattn train --task roles --head-dropout 0.3` the other (a few minutes on a laptop).
Every gradient in them was written by hand in `mhattn.functional`.""",
    ),
    (
        "md",
        """## The task: three jobs, and we know which heads could do them

Sequences of 16 tokens are drawn from a vocabulary of 64 with Zipf frequencies (token 0 is the commonest,
token 63 the rarest). The shared one-layer encoder feeds three classifiers, one per job, at every position:

| job | target at position *t* | a head that solves it |
|---|---|---|
| `prev` | the token at *t − 1* (a boundary class at *t = 0*) | attends one step back |
| `next` | the token at *t + 1* (a boundary class at the end) | attends one step ahead |
| `rare` | the rarest token of the sequence | attends to that token |

These are the kinds of heads Voita et al. (2019) found in translation models: positional heads and heads that
track rare words. Here we planted them, so we can check whether training finds them.""",
    ),
    (
        "code",
        SETUP
        + """

models = {}
for name in ["roles-plain", "roles-headdropout"]:
    model, meta = load_checkpoint(name)
    models[name] = (model, task_from_meta(meta["task"]), meta["training"])
    t = meta["training"]
    print(f"{name:18s} {t['steps']} steps of batch {t['batch_size']}, head dropout p = {t['head_dropout']}, "
          f"{model.num_parameters():,} parameters")""",
    ),
    (
        "md",
        """## How well were they trained?

Both reach the accuracy target on a fixed evaluation set of 1,024 fresh sequences. The head-dropout model saw
each head switched off with probability 0.3 at every step (survivors scaled by 1/0.7), so it had to learn to
cope without any single head.""",
    ),
    (
        "code",
        """for name, (model, task, training) in models.items():
    r = evaluate(model, *task.eval_set(1024), names=task.output_names)
    accs = ", ".join(f"{k} {r['acc/' + k]:.4f}" for k in task.output_names)
    print(f"{name:18s} loss {r['loss']:.4f} nats; accuracy per job: {accs}")""",
    ),
    (
        "md",
        """## Per-head attention maps

One evaluation sequence, all twelve heads of each model. Rows are queries, columns keys. A bright line just
below the diagonal is a head looking one step back; just above, one step ahead; a bright column is a head that
every query sends to one token.""",
    ),
    (
        "code",
        """ids, _ = models["roles-plain"][1].eval_set(1024)
seq = ids[:1]
for name, (model, task, _) in models.items():
    w = attention_maps(model, seq)[0, 0]  # (h, T, T)
    show(attention_heatmaps(w, [str(t) for t in seq[0]], title=f"{name}: attention per head", ncols=6))""",
    ),
    (
        "md",
        """## Naming the heads

For every head, over 512 sequences: the relative offset at which its largest weight most often falls and how
often (Voita calls a head positional when that happens for at least 90% of positions), how often its largest
weight lands on the sequence's rarest token, and its confidence (the mean of its largest weight).""",
    ),
    (
        "code",
        """sample = ids[:512]
roles = {}
for name, (model, task, _) in models.items():
    roles[name] = detect_roles(attention_maps(model, sample), sample, task.rarity())
    print(name)
    for r in roles[name]:
        print(f"  head {r['head']:2d}: {r['role']:9s} top offset {r['offset']:+d} ({r['offset_fraction']:.2f}), "
              f"on rarest token {r['rare_fraction']:.2f}, confidence {r['confidence']:.2f}")
    print("  planted roles found:", planted_match(roles[name]))""",
    ),
    (
        "md",
        """## How much does the loss need each head?

Two measures, for each head *h*:

- **Importance** (Michel et al. 2019): give each head a gate ξ_h = 1 on its output and average
  |∂L/∂ξ_h| over sequences. `head_mask` in `MultiHeadAttention` is exactly that gate, and its gradient comes out
  of our hand-written backward. Scores are divided by their ℓ2 norm within the layer.
- **Ablation**: set ξ_h = 0 and measure the change in loss on the evaluation set.

If these agree, the cheap gradient (one backward pass) predicts the expensive ablation (one evaluation per head).""",
    ),
    (
        "code",
        """data = {name: task.eval_set(512) for name, (_, task, _) in models.items()}
reports = {}
for name, (model, task, _) in models.items():
    imp, _ = head_importance(model, *data[name])
    dloss, _ = ablation_deltas(model, *data[name])
    reports[name] = {"importance": imp.tolist(), "ablation_zero_dloss": dloss.tolist(),
                     "settings": {"n_remove": 6}, "baseline": masked_eval(model, *data[name])}
    print(f"{name}: single-head ablation costs {dloss.min():+.3f} to {dloss.max():+.3f} nats "
          f"(median {np.median(dloss):+.3f}); Spearman(importance, ablation) = {spearman(imp, dloss):.2f}")
show(importance_bars(reports))""",
    ),
    (
        "md",
        """## Remove six of twelve heads at random

200 random subsets of six heads, each removed at once (ξ = 0), on the same evaluation set (512 sequences).""",
    ),
    (
        "code",
        """for name, (model, task, _) in models.items():
    reports[name]["random"] = random_removals(model, data[name], reports[name]["baseline"], 6, 200,
                                              np.random.default_rng(0))
    d = np.asarray(reports[name]["random"]["dloss"])
    a = np.asarray(reports[name]["random"]["dacc"])
    print(f"{name}: median loss change {np.median(d):+.3f} nats (10th-90th percentile {np.percentile(d, 10):+.3f} "
          f"to {np.percentile(d, 90):+.3f}); median accuracy {reports[name]['baseline']['acc'] + np.median(a):.3f}; "
          f"{int((d < 0).sum())} of 200 lowered the loss")
show(random_removal_hist(reports))""",
    ),
    (
        "md",
        """## Pruning curves

Remove 10% of the heads at a time, either the least important ones (re-scoring importance after each round,
as Michel et al. do) or in a random order (averaged over 3 orders).""",
    ),
    (
        "code",
        """for name, (model, task, _) in models.items():
    reports[name]["curve"] = pruning_curve(model, data[name], reports[name]["baseline"], 3, np.random.default_rng(1))
    c = reports[name]["curve"]
    half = c["fraction_removed"].index(0.5)
    print(f"{name}: half the heads gone -> loss {c['importance_loss'][half]:.3f} by importance, "
          f"{c['random_loss'][half]:.3f} at random")
show(pruning_curves(reports))""",
    ),
    (
        "md",
        """## Pruning by training: hard-concrete gates

Voita et al. put a stochastic gate on each head and add an L0 penalty, the expected number of open gates, to the
loss. Gates that are not worth their penalty close. 150 fine-tuning steps of 64 sequences from each converged model
(`mhattn prune` runs 300):""",
    ),
    (
        "code",
        """for name, (model, task, _) in models.items():
    from mhattn.nn.transformer import TransformerModel

    copy = TransformerModel(model.cfg, params=dict(model.params))
    g = train_gates(copy, task, l0_lambda=0.05, steps=150, batch_size=64, seed=0)
    open_heads = [int(h) for h in np.flatnonzero(g["gates"][0] > 0)]
    print(f"{name}: {g['open']} of 12 gates stay open: heads {open_heads}")""",
    ),
    ("md", "## The answer, from these two models"),
    (
        "code",
        """for name in models:
    r = reports[name]
    d_single = np.ravel(r["ablation_zero_dloss"])
    d_rand = np.asarray(r["random"]["dloss"])
    top2 = np.sort(np.clip(d_single, 0, None))[::-1][:2].sum() / np.clip(d_single, 0, None).sum()
    print(f"{name}:")
    print(f"  the two costliest heads carry {100 * top2:.0f}% of the summed single-head losses;")
    print(f"  six random heads removed: median {np.median(d_rand):+.3f} nats, "
          f"{int((d_rand < 0).sum())} of 200 subsets improved the loss.")""",
    ),
    (
        "md",
        """**Why can removing half the heads hurt less than expected?** (numbers from the cells above)

*Heads do not contribute equally.* In the plain model, the two costliest heads carry about three quarters of the
summed single-head losses, and only a few heads took on the positional jobs (one head looks one step back, two
look one step ahead). So it matters *which* six go: removing half the heads in order of importance leaves the loss
near 0.5 nats, a random half costs a median of about 2.2 nats, and the random halves spread from about 0.6 to 4
nats depending on whether they hit the few heads that matter.

*Heads can stand in for each other.* The head-dropout model spread every job over several heads (two one-back
heads, two one-ahead heads, seven rare-token heads). No single head costs more than a few thousandths of a nat,
and a random six costs a median of about 0.03 nats with 99.5% accuracy left: the survivors already do the removed
heads' work. That redundancy is not a given of multi-head attention. Here it came from how the model was
trained. Notebook 05 tests the claim further: do single-head scores add up, and does brief fine-tuning win the
loss back?

**Try it yourself.** Retrain with a weaker head dropout (`mhattn train --task roles --head-dropout 0.1 --out
hd01.npz`) and load it here with `load_checkpoint("hd01.npz")`: how many heads share each job now? Or raise
`l0_lambda` in the gate cell and watch which heads the L0 penalty keeps last.""",
    ),
]

NB05 = [
    (
        "md",
        """# 05 · Test yourself: remove 6 of 12 heads

The course text ends with a question: a layer has twelve heads, six are removed at random, and the loss grows
less than one would expect. Why? This notebook runs the whole experiment behind `mhattn prune` on the two
shipped planted-roles models and asks you to predict each result before you see it.

The same numbers come from the command line: `mhattn prune --out prune_report` writes `report.json` and the
plots; the keys are described in the README.""",
    ),
    (
        "code",
        SETUP
        + """
from mhattn.commands.prune import run, table
from mhattn.plots_pruning import similarity_heatmaps

settings = {"n_remove": 6, "n_random": 200, "curve_orders": 3, "finetune_steps": 100, "gate_steps": 0, "seed": 0}""",
    ),
    (
        "md",
        """**Predict first.** For each model (plain; trained with head dropout p = 0.3), write down:
1. how many heads you think matter a lot;
2. the median loss increase when six random heads go;
3. whether removing the six *individually* weakest heads costs about the sum of their single costs;
4. whether any removal could lower the loss.

Then run the next cell (about a minute).""",
    ),
    (
        "code",
        """models = run(["roles-plain", "roles-headdropout"], settings)
print(table(models))""",
    ),
    ("md", "## The heads themselves: attention per head (one sequence)"),
    (
        "code",
        """for name in models:
    model, meta = load_checkpoint(name)
    task = task_from_meta(meta["task"])
    seq = task.eval_set(1024)[0][:1]
    show(attention_heatmaps(attention_maps(model, seq)[0, 0], [str(t) for t in seq[0]], title=name, ncols=6))
    found = models[name]["details"]["planted_roles"]
    print(name, "planted roles found:", found)""",
    ),
    (
        "md",
        """## Check 1: how unequally do heads contribute?

Look at the importance bars and the single-ablation bars. Are the same heads tall in both?""",
    ),
    (
        "code",
        """details = {n: m["details"] for n, m in models.items()}
show(importance_bars(details))
for n, m in models.items():
    q = m["q1_unequal_contribution"]
    print(f"{n}: top-2 share {q['top2_share_of_single_ablation_loss']:.2f}, Gini {q['gini_single_ablation']:.2f}, "
          f"Spearman(importance, ablation) {q['spearman_importance_vs_zero_ablation']:.2f}")""",
    ),
    ("md", "## Check 2: six random heads, 200 times"),
    (
        "code",
        """show(random_removal_hist(details))
for n, m in models.items():
    q = m["q2_compensation"]
    print(f"{n}: median loss change {q['random_dloss_median']:+.3f} nats, "
          f"median accuracy change {q['random_dacc_median']:+.3f}")""",
    ),
    (
        "md",
        """## Check 3: do single-head scores add up?

Remove the six heads whose single ablations cost least, all at once, and compare with the sum of their single
costs; then with Michel's iterative procedure, which re-scores importance after each removal.""",
    ),
    (
        "code",
        """for n, m in models.items():
    q = m["q2_compensation"]
    print(f"{n}: sum of the six single costs {q['lowest_single_sum_of_single_dloss']:+.3f}, removed together "
          f"{q['lowest_single_joint_dloss']:+.3f}, Michel iterative {q['michel_iterative_joint_dloss']:+.3f} nats")""",
    ),
    (
        "md",
        """## Check 4: pruning curves, redundancy and recovery

Loss as 10% of the heads go at a time, by importance and at random; how alike the heads' outputs are; and how
much of a median random removal's loss 100 fine-tuning steps win back.""",
    ),
    (
        "code",
        """show(pruning_curves(details))
show(similarity_heatmaps(details))
for n, m in models.items():
    q = m["q2_compensation"]
    f = m["details"]["finetune"]
    print(f"{n}: pruned loss {f['loss_pruned']:.3f} -> {f['loss_after_finetune']:.3f} after fine-tuning "
          f"(baseline {m['details']['baseline']['loss']:.3f}); max output similarity between two heads "
          f"{q['max_output_similarity']:.2f}")""",
    ),
    ("md", "## Check 5: did any removal make the model better?"),
    (
        "code",
        """for n, m in models.items():
    q = m["q3_removal_improved_loss"]
    print(f"{n}: {q['n_random_subsets_improved']} of {q['n_random']} random subsets and "
          f"{q['n_single_ablations_improved']} of 12 single ablations lowered the loss "
          f"(best single {q['best_single_dloss']:+.4f} nats)")""",
    ),
    ("md", "## The answer in plain words, with this run's numbers"),
    (
        "code",
        """for n, m in models.items():
    print(f"[{n}]")
    print(m["summary"])
    print()""",
    ),
    (
        "md",
        """**Compare with your predictions.** The loss grows less than expected when (a) the contribution is
concentrated in a few heads, so most of a random half is cheap to lose, or (b) several heads do the same job,
so the survivors cover for the removed ones; brief fine-tuning then wins back most of what was lost
(check 4). Check 3 holds a trap: single-head scores do not add up. A head that shares its job looks dispensable
while its twins are there, so the six individually weakest heads cost more together than the sum of their
single costs, and re-scoring after every removal (Michel's procedure) picks a cheaper six.

The course text adds a third, less certain reason: some heads may only add noise, so removing them could even
help. Check 5 measured it: no random six lowered the loss in either model, and the three single removals that
did lower it (head-dropout model) changed it by less than 0.0001 nats, measurable but negligible.

**Try it yourself.** `mhattn prune --task text --out prune_text` runs the same experiment on the character-level
model trained on CPython's documentation: do its heads share the work more evenly than the planted-roles
models'? `mhattn prune --remove 3` or `--remove 9` shows how the answer changes with the number removed.""",
    ),
]


def build(cells, path):
    nb = nbf.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.cells = [nbf.v4.new_markdown_cell(src) if kind == "md" else nbf.v4.new_code_cell(src) for kind, src in cells]
    nbf.write(nb, path)


def patch_markdown(cells, path):
    """Replace only the markdown of an executed notebook (its code cells must be unchanged), keeping outputs."""
    nb = nbf.read(path, as_version=4)
    assert len(nb.cells) == len(cells), f"{path}: cell count changed; rebuild and re-execute"
    for cell, (kind, src) in zip(nb.cells, cells, strict=True):
        if kind == "code":
            assert cell.source == src, f"{path}: a code cell changed; rebuild and re-execute"
        else:
            cell.source = src
    nbf.write(nb, path)


if __name__ == "__main__":
    import sys

    step = patch_markdown if "--markdown-only" in sys.argv else build
    step(NB04, HERE / "04_training_and_head_roles.ipynb")
    step(NB05, HERE / "05_test_yourself_pruning.ipynb")
