# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Training a 12-head model and finding out what its heads do
#
# **After this notebook you can**
# - describe the planted-roles task and why it makes head roles visible;
# - read a head's attention map and call it positional, rare-token or neither;
# - measure how much the loss needs each head, with Michel's importance and with ablation;
# - explain, with numbers from these two models, why taking away half the heads can hurt less than one expects.
#
# Nothing is trained here for long: both models ship inside `mhattn` (`mhattn/data/`). `mhattn train --task roles`
# re-creates the plain one and `mhattn train --task roles --head-dropout 0.3` the other (a few minutes on a laptop).
# Every gradient in them was written by hand in `mhattn.functional`.

# %% [markdown]
# ## The task: three jobs, and we know which heads could do them
#
# Sequences of 16 tokens are drawn from a vocabulary of 64 with Zipf frequencies (token 0 is the commonest,
# token 63 the rarest). The shared one-layer encoder feeds three classifiers, one per job, at every position:
#
# | job | target at position *t* | a head that solves it |
# |---|---|---|
# | `prev` | the token at *t − 1* (a boundary class at *t = 0*) | attends one step back |
# | `next` | the token at *t + 1* (a boundary class at the end) | attends one step ahead |
# | `rare` | the rarest token of the sequence | attends to that token |
#
# These are the kinds of heads Voita et al. (2019) found in translation models: positional heads and heads that
# track rare words. Here we planted them, so we can check whether training finds them.

# %%
import matplotlib

matplotlib.use("Agg")  # figures are shown with plots_pruning.show: PNG only, no "<Figure ...>" text
import numpy as np

from mhattn.course.display import show
from mhattn.heads.gates import train_gates
from mhattn.heads.importance import ablation_deltas, head_importance, masked_eval, spearman
from mhattn.heads.prune import pruning_curve, random_removals
from mhattn.heads.roles import attention_maps, detect_roles, planted_match
from mhattn.plots.attention import attention_heatmaps
from mhattn.plots.pruning import importance_bars, pruning_curves, random_removal_hist
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.loop import evaluate
from mhattn.training.tasks import task_from_meta

models = {}
for name in ["roles-plain", "roles-headdropout"]:
    model, meta = load_checkpoint(name)
    models[name] = (model, task_from_meta(meta["task"]), meta["training"])
    t = meta["training"]
    print(
        f"{name:18s} {t['steps']} steps of batch {t['batch_size']}, head dropout p = {t['head_dropout']}, "
        f"{model.num_parameters():,} parameters"
    )

# %% [markdown]
# ## How well were they trained?
#
# Both reach the accuracy target on a fixed evaluation set of 1,024 fresh sequences. The head-dropout model saw
# each head switched off with probability 0.3 at every step (survivors scaled by 1/0.7), so it had to learn to
# cope without any single head.

# %%
for name, (model, task, _training) in models.items():
    r = evaluate(model, *task.eval_set(1024), names=task.output_names)
    accs = ", ".join(f"{k} {r['acc/' + k]:.4f}" for k in task.output_names)
    print(f"{name:18s} loss {r['loss']:.4f} nats; accuracy per job: {accs}")

# %% [markdown]
# ## Per-head attention maps
#
# One evaluation sequence, all twelve heads of each model. Rows are queries, columns keys. A bright line just
# below the diagonal is a head looking one step back; just above, one step ahead; a bright column is a head that
# every query sends to one token.

# %%
ids, _ = models["roles-plain"][1].eval_set(1024)
seq = ids[:1]
for name, (model, _task, _) in models.items():
    w = attention_maps(model, seq)[0, 0]  # (h, T, T)
    show(attention_heatmaps(w, [str(t) for t in seq[0]], title=f"{name}: attention per head", ncols=6))

# %% [markdown]
# ## Naming the heads
#
# For every head, over 512 sequences: the relative offset at which its largest weight most often falls and how
# often (Voita calls a head positional when that happens for at least 90% of positions), how often its largest
# weight lands on the sequence's rarest token, and its confidence (the mean of its largest weight).

# %%
sample = ids[:512]
roles = {}
for name, (model, _task, _) in models.items():
    roles[name] = detect_roles(attention_maps(model, sample), sample, task.rarity())
    print(name)
    for r in roles[name]:
        print(
            f"  head {r['head']:2d}: {r['role']:9s} top offset {r['offset']:+d} ({r['offset_fraction']:.2f}), "
            f"on rarest token {r['rare_fraction']:.2f}, confidence {r['confidence']:.2f}"
        )
    print("  planted roles found:", planted_match(roles[name]))

# %% [markdown]
# ## How much does the loss need each head?
#
# Two measures, for each head *h*:
#
# - **Importance** (Michel et al. 2019): give each head a gate ξ_h = 1 on its output and average
#   |∂L/∂ξ_h| over sequences. `head_mask` in `MultiHeadAttention` is exactly that gate, and its gradient comes out
#   of our hand-written backward. Scores are divided by their ℓ2 norm within the layer.
# - **Ablation**: set ξ_h = 0 and measure the change in loss on the evaluation set.
#
# If these agree, the cheap gradient (one backward pass) predicts the expensive ablation (one evaluation per head).

# %%
data = {name: task.eval_set(512) for name, (_, task, _) in models.items()}
reports = {}
for name, (model, _task, _) in models.items():
    imp, _ = head_importance(model, *data[name])
    dloss, _ = ablation_deltas(model, *data[name])
    reports[name] = {
        "importance": imp.tolist(),
        "ablation_zero_dloss": dloss.tolist(),
        "settings": {"n_remove": 6},
        "baseline": masked_eval(model, *data[name]),
    }
    print(
        f"{name}: single-head ablation costs {dloss.min():+.3f} to {dloss.max():+.3f} nats "
        f"(median {np.median(dloss):+.3f}); Spearman(importance, ablation) = {spearman(imp, dloss):.2f}"
    )
show(importance_bars(reports))

# %% [markdown]
# ## Remove six of twelve heads at random
#
# 200 random subsets of six heads, each removed at once (ξ = 0), on the same evaluation set (512 sequences).

# %%
for name, (model, _task, _) in models.items():
    reports[name]["random"] = random_removals(model, data[name], reports[name]["baseline"], 6, 200, np.random.default_rng(0))
    d = np.asarray(reports[name]["random"]["dloss"])
    a = np.asarray(reports[name]["random"]["dacc"])
    print(
        f"{name}: median loss change {np.median(d):+.3f} nats (10th-90th percentile {np.percentile(d, 10):+.3f} "
        f"to {np.percentile(d, 90):+.3f}); median accuracy {reports[name]['baseline']['acc'] + np.median(a):.3f}; "
        f"{int((d < 0).sum())} of 200 lowered the loss"
    )
show(random_removal_hist(reports))

# %% [markdown]
# ## Pruning curves
#
# Remove 10% of the heads at a time, either the least important ones (re-scoring importance after each round,
# as Michel et al. do) or in a random order (averaged over 3 orders).

# %%
for name, (model, _task, _) in models.items():
    reports[name]["curve"] = pruning_curve(model, data[name], reports[name]["baseline"], 3, np.random.default_rng(1))
    c = reports[name]["curve"]
    half = c["fraction_removed"].index(0.5)
    print(
        f"{name}: half the heads gone -> loss {c['importance_loss'][half]:.3f} by importance, "
        f"{c['random_loss'][half]:.3f} at random"
    )
show(pruning_curves(reports))

# %% [markdown]
# ## Pruning by training: hard-concrete gates
#
# Voita et al. put a stochastic gate on each head and add an L0 penalty, the expected number of open gates, to the
# loss. Gates that are not worth their penalty close. 150 fine-tuning steps of 64 sequences from each converged model
# (`mhattn prune` runs 300):

# %%
for name, (model, _task, _) in models.items():
    from mhattn.nn.transformer import TransformerModel

    copy = TransformerModel(model.cfg, params=dict(model.params))
    g = train_gates(copy, task, l0_lambda=0.05, steps=150, batch_size=64, seed=0)
    open_heads = [int(h) for h in np.flatnonzero(g["gates"][0] > 0)]
    print(f"{name}: {g['open']} of 12 gates stay open: heads {open_heads}")

# %% [markdown]
# ## The answer, from these two models

# %%
for name in models:
    r = reports[name]
    d_single = np.ravel(r["ablation_zero_dloss"])
    d_rand = np.asarray(r["random"]["dloss"])
    top2 = np.sort(np.clip(d_single, 0, None))[::-1][:2].sum() / np.clip(d_single, 0, None).sum()
    print(f"{name}:")
    print(f"  the two costliest heads carry {100 * top2:.0f}% of the summed single-head losses;")
    print(
        f"  six random heads removed: median {np.median(d_rand):+.3f} nats, "
        f"{int((d_rand < 0).sum())} of 200 subsets improved the loss."
    )

# %% [markdown]
# **Why can removing half the heads hurt less than expected?** (numbers from the cells above)
#
# *Heads do not contribute equally.* In the plain model, the two costliest heads carry about three quarters of the
# summed single-head losses, and only a few heads took on the positional jobs (one head looks one step back, two
# look one step ahead). So it matters *which* six go: removing half the heads in order of importance leaves the loss
# near 0.5 nats, a random half costs a median of about 2.2 nats, and the random halves spread from about 0.6 to 4
# nats depending on whether they hit the few heads that matter.
#
# *Heads can stand in for each other.* The head-dropout model spread every job over several heads (two one-back
# heads, two one-ahead heads, seven rare-token heads). No single head costs more than a few thousandths of a nat,
# and a random six costs a median of about 0.03 nats with 99.5% accuracy left: the survivors already do the removed
# heads' work. That redundancy is not a given of multi-head attention. Here it came from how the model was
# trained. Notebook 05 tests the claim further: do single-head scores add up, and does brief fine-tuning win the
# loss back?
#
# **Try it yourself.** Retrain with a weaker head dropout (`mhattn train --task roles --head-dropout 0.1 --out
# hd01.npz`) and load it here with `load_checkpoint("hd01.npz")`: how many heads share each job now? Or raise
# `l0_lambda` in the gate cell and watch which heads the L0 penalty keeps last.
