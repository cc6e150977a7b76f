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
# # 06 · Training a 12-head model and finding out what its heads do
#
# **After this notebook you can**
# - describe the planted-roles task and why it makes head roles visible;
# - read a head's attention map and call it positional, rare-token or neither;
# - measure how much the loss needs each head, with Michel's importance and with ablation;
# - compare a random removal of half the heads with two expectations (additive, naive), ready for notebook 07.
#
# Terms used below: the loss is in **nats**, cross-entropy with the natural logarithm, averaged over the three jobs
# (0 = perfect; a uniform guess over a job's classes costs the log of their number, printed below). To **ablate** a head is to remove it at test
# time by setting its gate ξ = 0 in `head_mask`, so its output is zero.
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
# These are the kinds of heads Voita et al. (2019, §5) found in translation models: positional heads and heads that
# track rare words. Here we planted them, so we can check whether training finds them.

# %%
from inspect import signature

import matplotlib

matplotlib.use("Agg")  # figures are shown with mhattn.course.display.show: PNG only, no "<Figure ...>" text
import numpy as np

from mhattn.course.display import show
from mhattn.heads.expectation import additive_expectation, naive_expectation
from mhattn.heads.gates import train_gates
from mhattn.heads.importance import ablation_deltas, head_importance, masked_eval, spearman
from mhattn.heads.prune import PruneSettings, pruning_curve, random_removals
from mhattn.heads.roles import attention_maps, detect_roles, planted_match
from mhattn.nn.transformer import TransformerModel
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
sizes = models["roles-plain"][1].output_sizes
print(f"classes per job: {sizes}; a uniform guess costs ln {sizes[0]} = {np.log(sizes[0]):.2f} nats")
assert sizes == (66, 66, 66)

# %% [markdown]
# ## How well were they trained?
#
# Both reach at least 99% accuracy on every job (the target of the recipes) on a fixed evaluation set of 1,024 fresh
# sequences, checked by the cell below. The head-dropout model saw
# each head switched off with probability 0.3 at every step (survivors scaled by 1/0.7), so it had to learn to
# cope without any single head.

# %%
for name, (model, task, _training) in models.items():
    r = evaluate(model, *task.eval_set(1024), names=task.output_names)
    accs = ", ".join(f"{k} {r['acc/' + k]:.4f}" for k in task.output_names)
    print(f"{name:18s} loss {r['loss']:.4f} nats; accuracy per job: {accs}")
    assert r["min_acc"] >= 0.99

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
# For every head: the relative offset at which its largest weight most often falls and how often (Voita et al. 2019,
# §5.1, call a head positional when that happens for at least 90% of positions), how often its largest weight lands on the
# sequence's rarest token, and its confidence (the mean of its largest weight). The sample is the one `mhattn prune`
# and notebook 07 use: the first 256 of the 512 evaluation sequences (`task.eval_set(512)`), so the counts of
# rare-token heads agree between the notebooks. With a different set, heads whose rare-token hit rate sits near the
# 90% threshold can fall on either side of it, so another sample can count one head more or fewer.

# %%
data = {name: task.eval_set(512) for name, (_, task, _) in models.items()}
roles = {}
for name, (model, task, _) in models.items():
    sample = data[name][0][:256]
    roles[name] = detect_roles(attention_maps(model, sample), sample, task.rarity())
    print(name)
    for r in roles[name]:
        print(
            f"  head {r['head']:2d}: {r['role']:9s} top offset {r['offset']:+d} ({r['offset_fraction']:.2f}), "
            f"on rarest token {r['rare_fraction']:.2f}, confidence {r['confidence']:.2f}"
        )
    print("  planted roles found:", planted_match(roles[name]))
    near = [r["head"] for r in roles[name] if 0.85 <= r["rare_fraction"] < 0.95]
    print(f"  heads whose rare-token rate is within 0.05 of the 90% threshold: {near}")

# %% [markdown]
# The plain model has **no** rare-token head by this test, yet its `rare` job is at least 99% accurate (the
# evaluation cell above). No head passes the 90% bar, but several land on the rarest token most of the time
# (a rate of at least 0.5). The job is shared among them: the cell below removes each of those heads alone, then
# all of them at once, and reads the `rare` accuracy.

# %%
plain_model, plain_task, _ = models["roles-plain"]
leaning = [r["head"] for r in roles["roles-plain"] if r["rare_fraction"] >= 0.5]
rare_acc = lambda heads: evaluate(plain_model, *data["roles-plain"], names=plain_task.output_names,  # noqa: E731
                                  head_mask=np.isin(np.arange(12), heads, invert=True)[None].astype(float))["acc/rare"]  # fmt: skip
alone = {h: rare_acc([h]) for h in leaning}
together = rare_acc(leaning)
print(f"roles-plain: rare-token heads by the 90% test: {planted_match(roles['roles-plain'])['rare']}; "
      f"heads on the rarest token at least half the time: {leaning}")  # fmt: skip
print("  rare accuracy with one of them removed:", {h: round(a, 3) for h, a in alone.items()})
print(f"  rare accuracy with all {len(leaning)} removed: {together:.3f}")
assert planted_match(roles["roles-plain"])["rare"] == [] and len(leaning) >= 3
assert min(alone.values()) > 0.85 and together < 0.2  # each alone is spared; together they are the job

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
# Agreement is measured with **Spearman's rank correlation**: the correlation of the two lists' ranks (1 when both
# order the heads the same way, 0 when the orders are unrelated, −1 when reversed).

# %%
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
# **Does the cheap gradient predict the expensive ablation?** Partly. The ranks agree moderately in both models
# (the Spearman correlations printed above, between 0.4 and 0.75), but not at the top of the plain model: the head
# that importance ranks first costs little when ablated, and the head whose ablation costs most is not ranked first
# by importance (the cell below prints both). Importance is the slope of the loss at ξ = 1, a first-order Taylor
# estimate (Michel et al. 2019, §4.1); ablation is the whole step to ξ = 0, and nothing forces the two to agree.
# In the head-dropout model every single ablation costs almost nothing (at most a hundredth of a nat), so its
# correlation ranks differences that are tiny.

# %%
for name in models:
    imp, cost = np.ravel(reports[name]["importance"]), np.ravel(reports[name]["ablation_zero_dloss"])
    top, costliest = int(np.argmax(imp)), int(np.argmax(cost))
    rank = int((imp > imp[costliest]).sum()) + 1  # 1 = most important
    print(f"{name}: Spearman {spearman(imp, cost):.2f}; most important head {top} costs {cost[top]:+.3f} nats when "
          f"ablated; the costliest head ({costliest}, {cost[costliest]:+.3f}) ranks {rank} by importance")  # fmt: skip
    assert 0.4 < spearman(imp, cost) < 0.75
plain_imp, plain_cost = np.ravel(reports["roles-plain"]["importance"]), np.ravel(reports["roles-plain"]["ablation_zero_dloss"])
assert plain_cost[np.argmax(plain_imp)] < 0.1 * plain_cost.max()  # the top head by importance is cheap to ablate
assert np.argmax(plain_cost) != np.argmax(plain_imp)
assert np.max(reports["roles-headdropout"]["ablation_zero_dloss"]) < 0.01

# %% [markdown]
# ## Remove six of twelve heads at random
#
# As many random subsets of six heads as `mhattn prune` draws (`PruneSettings().n_random`, printed below), each
# removed at once (ξ = 0), on the same evaluation set (512 sequences). Beside
# them, two readings of what to "expect" (`mhattn.heads.expectation`; notebook 07 works through both):
# the **additive** one, (k/h)·Σ single-ablation costs, what the average would be if single costs simply added up;
# and the **naive** one, "half the heads, half the ability", k/h of the loss increase with no heads at all.

# %%
n_random = PruneSettings().n_random
print(f"{n_random} random subsets of six heads per model")
for name, (model, _task, _) in models.items():
    r = reports[name]
    r["random"] = random_removals(model, data[name], r["baseline"], 6, n_random, np.random.default_rng(0))
    d, a = np.asarray(r["random"]["dloss"]), np.asarray(r["random"]["dacc"])
    none = masked_eval(model, *data[name], np.zeros((1, 12)))["loss"] - r["baseline"]["loss"]
    r["additive"] = additive_expectation(r["ablation_zero_dloss"], 6)
    r["naive"] = naive_expectation(0.0, none, 6, 12)
    print(
        f"{name}: median loss change {np.median(d):+.3f} nats (10th-90th percentile {np.percentile(d, 10):+.3f} "
        f"to {np.percentile(d, 90):+.3f}); median accuracy {r['baseline']['acc'] + np.median(a):.3f}; "
        f"{int((d < 0).sum())} of {n_random} lowered the loss"
    )
    print(f"    expected: additive {r['additive']:+.4f}, naive {r['naive']:+.3f}")
    assert r["additive"] < np.median(d) < r["naive"]
show(random_removal_hist(reports))

# %% [markdown]
# In both models the median random six lands between the two expectations: above the additive one, below the naive
# one. Notebook 07 asks what that means for the usual answer.
#
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
    assert 2 * c["importance_loss"][half] < c["random_loss"][half]
show(pruning_curves(reports))

# %% [markdown]
# ## Pruning by training: hard-concrete gates
#
# Voita et al. (2019, §6) put a stochastic gate z_h ∈ [0, 1] on each head and add to the loss λ times the
# **L0 penalty**: the L0 "norm" counts non-zero entries, here the expected number of open gates. Counting is not
# differentiable, so the gates are drawn from a **hard-concrete** distribution (Louizos et al. 2018): a logistic
# sample squashed by a sigmoid with temperature β, stretched to (−0.1, 1.1) and clipped to [0, 1], so a gate can be
# exactly 0 or 1 while the probability of being open stays differentiable. We use β = 0.33, the default of Voita
# et al.'s released code; Louizos et al. used 2/3. Gates not worth their penalty close. Here a short run, 150
# fine-tuning steps of 64 sequences from each converged model; `mhattn prune` trains longer on bigger batches (the
# cell prints its setting), and its report lists the gates that run leaves open.

# %%
cli_batch = signature(train_gates).parameters["batch_size"].default
print(f"mhattn prune: {PruneSettings().gate_steps} gate steps of {cli_batch} sequences; here: 150 steps of 64")
for name, (model, task, _) in models.items():
    copy = TransformerModel(model.cfg, params=dict(model.params))
    g = train_gates(copy, task, l0_lambda=0.05, steps=150, batch_size=64, seed=0)
    open_heads = [int(h) for h in np.flatnonzero(g["gates"][0] > 0)]
    print(f"{name}: {g['open']} of 12 gates stay open: heads {open_heads}")

# %% [markdown]
# ## What these two models show
#
# The numbers the next cell prints: how much of the summed single-head cost the two costliest heads carry, how the
# heads split the planted jobs, and where a random half lands.

# %%
for name in models:
    r = reports[name]
    d_single, d_rand = np.ravel(r["ablation_zero_dloss"]), np.asarray(r["random"]["dloss"])
    top2 = np.sort(np.clip(d_single, 0, None))[::-1][:2].sum() / np.clip(d_single, 0, None).sum()
    found = planted_match(roles[name])
    print(f"{name}: the two costliest heads carry {100 * top2:.0f}% of the summed single-head costs; heads per job "
          f"(-1 / +1 / rare): {len(found['offset-1'])} / {len(found['offset+1'])} / {len(found['rare'])}; "
          f"max single cost {d_single.max():+.4f}; random six median {np.median(d_rand):+.3f} nats")  # fmt: skip
plain, hd = reports["roles-plain"], reports["roles-headdropout"]
found_plain, found_hd = planted_match(roles["roles-plain"]), planted_match(roles["roles-headdropout"])
assert all(len(found_hd[j]) >= 2 for j in found_hd) and len(found_plain["offset-1"]) == 1
top2_plain = np.sort(np.ravel(plain["ablation_zero_dloss"]))[::-1][:2].sum() / np.ravel(plain["ablation_zero_dloss"]).sum()
assert top2_plain > 0.5  # a few heads carry most of the summed single-head cost
assert np.max(hd["ablation_zero_dloss"]) < 0.01 < 0.5 < np.max(plain["ablation_zero_dloss"])
assert np.median(hd["random"]["dloss"]) < 0.1 < 1.0 < np.median(plain["random"]["dloss"])

# %% [markdown]
# *Heads do not contribute equally.* In the plain model a few heads carry most of the summed single-head cost, and
# only one head does the "previous token" job: which six go matters, and removing half the heads by importance
# costs far less than a random half (the pruning curves).
#
# *Heads can stand in for each other.* The head-dropout model spread every job over at least two heads. No single
# head costs more than a hundredth of a nat, and a typical random six costs little: the survivors do most of the
# removed heads' work. That redundancy is not a given of multi-head attention; here it came from how the model was
# trained. Notebook 07 tests these claims against both expectations, looks at the tail, and separates this
# compensation from recovery by fine-tuning.
#
# **Exercises.** Exercise 9 (`exercises/ex09_head_importance.py`) asks you to compute Michel's importance from the
# head-mask gradient, as in the importance cell above; exercise 10 (`exercises/ex10_random_removal.py`) the exact
# expected loss change of removing k random heads.
#
# **Try it yourself.** Retrain with a weaker head dropout (`mhattn train --task roles --head-dropout 0.1 --out
# hd01.npz`) and load it here with `load_checkpoint("hd01.npz")`: how many heads share each job now? Or raise
# `l0_lambda` in the gate cell and watch which heads the L0 penalty keeps last.
