# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
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
# re-creates the plain one and `mhattn train --task roles --head-dropout 0.3` the other (each checkpoint records how
# long its training took; the cell below prints it).
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
import json
from inspect import signature
from itertools import combinations

import matplotlib

matplotlib.use("Agg")  # figures are shown with mhattn.course.display.show: PNG only, no "<Figure ...>" text
import numpy as np

from mhattn.course.display import show
from mhattn.heads.answers import gini
from mhattn.heads.conclusion import UNEQUAL_GINI
from mhattn.heads.expectation import additive_expectation, bootstrap_interval, naive_expectation
from mhattn.heads.gates import train_gates
from mhattn.heads.importance import ablation_deltas, head_importance, masked_eval, spearman
from mhattn.heads.prune import PruneSettings, random_removals
from mhattn.heads.roles import attention_maps, detect_roles, planted_match
from mhattn.plots.attention import attention_heatmaps
from mhattn.plots.pruning import importance_bars, pruning_curves, random_removal_hist
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint
from mhattn.training.loop import evaluate
from mhattn.training.tasks import task_from_meta

models = {}
for name in ["roles-plain", "roles-headdropout"]:
    model, meta = load_checkpoint(name)
    models[name] = (model, task_from_meta(meta["task"]), meta["training"])
    t = meta["training"]
    print(
        f"{name:18s} seed {t['seed']}, {t['steps']} steps of batch {t['batch_size']}, head dropout p = {t['head_dropout']}, "
        f"{model.num_parameters():,} parameters, trained in {t['seconds']:.0f} s"
    )
sizes = models["roles-plain"][1].output_sizes
print(f"classes per job: {sizes}; a uniform guess costs ln {sizes[0]} = {np.log(sizes[0]):.2f} nats")
assert sizes == (66, 66, 66)

# %% [markdown]
# ## How well were they trained?
#
# Both reach at least 99% accuracy on every job (the target of the recipes) on a fixed evaluation set of 1,024 fresh
# sequences, checked by the cell below. The head-dropout model saw each head switched off with probability 0.3,
# drawn anew for every training sequence at every step (survivors scaled by 1/0.7), so it had to learn to cope
# without any single head.

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
# sequence's rarest token, and its confidence (the mean of its largest weight). The sample is the one `run_prune`
# (`mhattn.heads.prune`) uses: the first 256 of the 512 evaluation sequences (`task.eval_set(512)`), so the counts of
# rare-token heads agree between the notebooks. With a different set, heads whose rare-token hit rate sits near the
# 90% threshold can fall on either side of it, so another sample can count one head more or fewer. How often that
# happens is measured, not guessed: the cell also re-draws the 256 sequences with replacement (200 bootstrap
# resamples) and counts the heads of each role in every resample.

# %%
data = {name: task.eval_set(512) for name, (_, task, _) in models.items()}
# the slow parts (curves, gates), measured in the repository by benchmarks/roles_data.py with the calls shown below
shipped_analysis = json.loads((DATA_DIR / "roles-analysis.json").read_text())
roles, role_spread = {}, {}
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
    rng, w = np.random.default_rng(0), attention_maps(model, sample)  # w: (1, 256, 12, T, T)
    counts = []  # heads per role in each resample of the sequences
    for _ in range(200):
        i = rng.integers(0, len(sample), size=len(sample))
        counts.append(tuple(len(v) for v in planted_match(detect_roles(w[:, i], sample[i], task.rarity())).values()))
    role_spread[name] = counts
    rare_counts = {k: int(n) for k, n in enumerate(np.bincount([c[2] for c in counts])) if n}  # heads: resamples
    print(f"  over 200 resamples: heads per positional job (-1 / +1) {sorted({c[:2] for c in counts})}; "
          f"rare-token heads {rare_counts} (number of heads: resamples)")  # fmt: skip
assert all(len({c[:2] for c in role_spread[name]}) == 1 for name in models)  # positional heads: the same in every resample
no_rare = np.mean([c[2] == 0 for c in role_spread["roles-plain"]])
assert 0.5 < no_rare < 1.0  # the plain model: no rare-token head in most resamples, but not in all
assert all(min(c) >= 2 for c in role_spread["roles-headdropout"])  # head dropout: every job has two heads or more in all

# %% [markdown]
# The number of positional heads per job is the same in every resample; the rare-token count is not. On this sample
# the plain model has **no** rare-token head by this test, and so do most resamples, but not all: in the others
# some heads cross the threshold (the counts printed above). The head-dropout model has at least two heads for
# every job in every resample.
#
# Yet the plain model's `rare` job is at least 99% accurate (the evaluation cell above). No head passes the 90% bar
# on this sample, but several land on the rarest token most of the time (a rate of at least 0.5). The job is shared
# among them: the cell below removes each of those heads alone, then all of them at once, and reads the `rare`
# accuracy.

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
# (the Spearman correlations printed above, between 0.4 and 0.75), but with twelve heads a rank correlation is itself
# uncertain: resampling the heads with replacement (a 95% bootstrap interval, the cell below) gives an interval that
# reaches from below 0.2 to above 0.7 in both models. So the data say the ranks agree somewhat, not how well. Nor do
# they agree at the top of the plain model: the head
# that importance ranks first costs little when ablated, and the head whose ablation costs most is not ranked first
# by importance (the cell below prints both). Importance is the slope of the loss at ξ = 1, a first-order Taylor
# estimate (Michel et al. 2019, §4.1); ablation is the whole step to ξ = 0, and nothing forces the two to agree.
# In the head-dropout model every single ablation costs almost nothing (at most a hundredth of a nat), so its
# correlation ranks differences that are tiny.

# %%
# NBVAL_IGNORE_OUTPUT
# (the interval's last digit depends on how near-ties in the ranks break, which NumPy's SIMD code can change)
for name in models:
    imp, cost = np.ravel(reports[name]["importance"]), np.ravel(reports[name]["ablation_zero_dloss"])
    top, costliest = int(np.argmax(imp)), int(np.argmax(cost))
    rank = int((imp > imp[costliest]).sum()) + 1  # 1 = most important
    heads = np.arange(imp.size)  # resampled with replacement: the statistic gets the drawn heads' indices
    lo, hi = bootstrap_interval(heads, statistic=lambda h, a=imp, b=cost: spearman(a[h.astype(int)], b[h.astype(int)]))
    print(f"{name}: Spearman {spearman(imp, cost):.2f} (95% interval over resampled heads {lo:.2f} to {hi:.2f}); "
          f"most important head {top} costs {cost[top]:+.3f} nats when ablated; the costliest head ({costliest}, "
          f"{cost[costliest]:+.3f}) ranks {rank} by importance")  # fmt: skip
    assert 0.4 < spearman(imp, cost) < 0.75 and lo < 0.2 and hi > 0.7
plain_imp, plain_cost = np.ravel(reports["roles-plain"]["importance"]), np.ravel(reports["roles-plain"]["ablation_zero_dloss"])
assert plain_cost[np.argmax(plain_imp)] < 0.1 * plain_cost.max()  # the top head by importance is cheap to ablate
assert np.argmax(plain_cost) != np.argmax(plain_imp)
assert np.max(reports["roles-headdropout"]["ablation_zero_dloss"]) < 0.01

# %% [markdown]
# ## Remove six of twelve heads at random
#
# As many random subsets of six heads as `run_prune` draws (`PruneSettings().n_random`, printed below), each
# removed at once (ξ = 0), on the same evaluation set (512 sequences). Beside
# them, two readings of what to "expect" (`mhattn.heads.expectation`; notebook 07 works through both):
# the **additive** one, (k/h)·Σ single-ablation costs, what the average would be if single costs simply added up;
# and the **naive** one, "half the heads, half the ability", k/h of the loss increase with no heads at all.
#
# The median of these sixes is itself a sample: another draw of subsets gives another median. Its spread is
# printed as a 95% bootstrap interval (`bootstrap_interval`: re-draw the outcomes with replacement 2,000 times and
# take the middle 95% of the medians), beside the 10th–90th percentile of the outcomes themselves.

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
    r["median_interval"] = bootstrap_interval(d, statistic=np.median)
    print(
        f"{name}: median loss change {np.median(d):+.3f} nats (95% interval {r['median_interval'][0]:+.3f} to "
        f"{r['median_interval'][1]:+.3f}; 10th-90th percentile of the sixes {np.percentile(d, 10):+.3f} to "
        f"{np.percentile(d, 90):+.3f}); median accuracy {r['baseline']['acc'] + np.median(a):.3f}; "
        f"{int((d < 0).sum())} of {n_random} lowered the loss"
    )
    print(f"    expected: additive {r['additive']:+.4f}, naive {r['naive']:+.3f}")
    assert r["additive"] < r["median_interval"][0] and r["median_interval"][1] < r["naive"]
show(random_removal_hist(reports))

# %% [markdown]
# In both models the median random six lands between the two expectations: above the additive one, below the naive
# one, and its whole 95% interval does too (the cell asserts it). Notebook 07 asks what that means for the usual
# answer.
#
# ## Why the random sixes spread so widely
#
# The outcomes are far from one number: the 10th and 90th percentiles above are far apart. One fact about a six
# sorts most of them: whether it removes **every** head of one job (both previous-token heads, say), so that no head
# of that job's kind is left. Which heads those are comes from the role
# table on this sample (in the plain model only the two positional jobs have heads of their own), and how many of
# all possible sixes (C(12, 6) of them) remove a whole job is a count, not a measurement. The cell compares that
# count with the 100 draws and splits the outcomes by it.
#
# It also checks one more thing about these one-layer models: every head reads only the embeddings, so removing
# some heads cannot change what the others attend to. The surviving heads' attention maps are compared with and
# without the six removed. For the plain model, whose sixes all cost something (below), it splits the loss of the
# sixes that keep both positional jobs by job.

# %%
job_heads = lambda found: [[int(n.split("H")[1]) for n in heads] for heads in found.values() if heads]  # noqa: E731
removes_a_job = lambda six, jobs: any(set(j) <= set(six) for j in jobs)  # noqa: E731
for name, (model, _task, _) in models.items():
    r, jobs = reports[name], job_heads(planted_match(roles[name]))
    d = np.asarray(r["random"]["dloss"])
    whole = np.array([removes_a_job(six, jobs) for six in r["random"]["subsets"]])
    exact = np.mean([removes_a_job(six, jobs) for six in combinations(range(12), 6)])
    lo, hi = bootstrap_interval(whole, statistic=np.mean)
    kept, gone = d[~whole], d[whole]
    r.update(whole=whole, whole_exact=exact, kept=kept, gone=gone, kept_median_interval=bootstrap_interval(kept, statistic=np.median),
             gone_median_interval=bootstrap_interval(gone, statistic=np.median))  # fmt: skip
    print(f"{name}: jobs' heads {jobs}; a whole job removed by {100 * exact:.1f}% of all sixes, by {whole.sum()} of "
          f"{whole.size} drawn (95% interval {100 * lo:.0f}% to {100 * hi:.0f}%)")  # fmt: skip
    print(f"    every job kept: median {np.median(kept):+.3f} nats (95% interval {r['kept_median_interval'][0]:+.3f} "
          f"to {r['kept_median_interval'][1]:+.3f}), 90th percentile {np.percentile(kept, 90):+.3f}; "
          f"a whole job removed: lowest {gone.min():+.3f}, median {np.median(gone):+.3f}; "
          f"{int((d < 0.1).sum())} of {d.size} sixes cost under 0.1 nats")  # fmt: skip
    assert lo <= exact <= hi  # the draws match the count
    assert np.percentile(kept, 90) < gone.min()  # removing a whole job costs more than 90% of the sixes that keep every job
    for six in r["random"]["subsets"][:10]:
        survivors = np.setdiff1d(np.arange(12), six)
        mask = np.ones((1, 12))
        mask[0, six] = 0.0
        w_all, w_cut = attention_maps(model, data[name][0][:64]), attention_maps(model, data[name][0][:64], mask)
        assert np.array_equal(w_all[:, :, survivors], w_cut[:, :, survivors])  # the survivors attend exactly as before
plain, hd = reports["roles-plain"], reports["roles-headdropout"]
assert hd["kept_median_interval"][1] < 0.1 < np.min(plain["random"]["dloss"])
assert 0.35 < hd["whole_exact"] < 0.5  # head dropout: almost half of all sixes empty a job, about half keep every job
assert hd["median_interval"][0] < np.percentile(hd["kept"], 90) and hd["median_interval"][1] > hd["gone"].min()
assert len(leaning) > 12 - 6  # the plain model's rare-leaning heads: every six removes at least one of them
for r in reports.values():  # the 10th and 90th percentiles of the sixes: far apart
    assert np.percentile(r["random"]["dloss"], 90) > 5 * np.percentile(r["random"]["dloss"], 10)
kept_sixes = [six for six, w in zip(plain["random"]["subsets"], plain["whole"], strict=True) if not w]
job_cost = np.array([[e[f"loss/{k}"] - plain["baseline"][f"loss/{k}"] for k in range(3)] for e in (  # (sixes, jobs) nats
    masked_eval(plain_model, *data["roles-plain"], np.isin(np.arange(12), six, invert=True)[None].astype(float)) for six in kept_sixes)])  # fmt: skip
rare_k = plain_task.output_names.index("rare")
print(f"roles-plain, the {len(kept_sixes)} drawn sixes that keep both positional jobs: median loss change per job "
      f"{ {j: round(float(v), 3) for j, v in zip(plain_task.output_names, np.median(job_cost, axis=0), strict=True)} }; "
      f"the rare job's smallest {job_cost[:, rare_k].min():+.3f} (the printed loss is the mean over the three jobs)")  # fmt: skip
assert job_cost[:, rare_k].min() / 3 > 0.1  # the rare job alone costs each of them more than a tenth of a nat

# %% [markdown]
# So the cost of a random six depends mostly on whether it empties a job, and that happens in a fixed share of all
# sixes (the count printed above); the 100 draws agree with that share. In the head-dropout model the sixes that
# keep a head for every job cost little (their median's whole interval stays under 0.1 nats), and the rest cost
# more than nine in ten of them. Almost half the sixes fall in the costly group, so the overall median sits where
# the two groups meet, and its 95% interval reaches from the cheap group into the costly one: the median of another
# 100 draws depends on how many of them happen to empty a job. In the plain model no drawn six is cheap: even the
# sixes that keep both positional jobs cost more than a tenth of a nat. Its rare job has no head of its own (above);
# it is shared by more heads than a six leaves in place, so every six removes some of them, and in each of those
# sixes the rare job's loss alone is enough to cost more than a tenth of a nat (the split by job above).
#
# Removing heads did not change what the other heads attend to: their maps are the same bit for bit. Notebook 07's
# heads-only evaluation (every surviving head's output held at its value with all heads present) has nothing
# to add in these models: each head's output is its attention map applied to values computed from the embeddings,
# which no removal changes, so it is the same with or without the others, and `HeadMaskEvaluator.evaluate` runs a
# one-layer model's frozen evaluation as the ordinary one. A cheap removal is therefore not the survivors doing the
# removed heads' work. The survivors, unchanged, already carry enough evidence for each job:
# heads that duplicate a job make more of it than the classifier needs.
#
# ## Pruning curves
#
# Remove 10% of the heads at a time, either the least important ones or in a random order. The first is Michel et
# al.'s iterative pruning (2019, §4.2): after each step the importance of the heads left is re-scored with the
# removed ones masked (the re-scoring of the public implementation, HuggingFace's `run_bertology.py`; the glossary
# tells it apart from one-at-a-time pruning, which `run_prune` also reports). The dashed random curve is the mean of only 3 orders, so at each point
# it is one noisy draw; at half the heads (6 of 12) the cell compares it with the 100 random sixes above (their
# median with its 95% interval, and the 10th–90th percentile of the outcomes, drawn as a bar on the figure), and
# counts how many random sixes cost more than the six chosen by importance. The curves take a minute to compute, so
# they are read from the shipped run (`benchmarks/roles_data.py` in the repository, with the call in the cell's comment).

# %%
for name in models:
    r = reports[name]
    r["curve"] = shipped_analysis["models"][name]["curve"]  # pruning_curve(model, data[name], r["baseline"], 3, rng 1)
    c, half = r["curve"], r["curve"]["fraction_removed"].index(0.5)
    rand = r["baseline"]["loss"] + np.asarray(r["random"]["dloss"])  # loss after each random six
    r["half"] = {"median": np.median(rand), "p10": np.percentile(rand, 10), "p90": np.percentile(rand, 90)}
    med_lo, med_hi = bootstrap_interval(rand, statistic=np.median)
    by_importance, beaten = c["importance_loss"][half], np.mean(rand > c["importance_loss"][half])
    kept_lo, kept_hi = r["baseline"]["loss"] + np.asarray(r["kept_median_interval"])
    print(f"{name}: half the heads gone -> loss {c['importance_loss'][half]:.3f} by importance; "
          f"{n_random} random sixes: median {r['half']['median']:.3f} (95% interval {med_lo:.3f} to {med_hi:.3f}; "
          f"10th-90th percentile {r['half']['p10']:.3f} to {r['half']['p90']:.3f}); "
          f"the curve's mean of 3 orders {c['random_loss'][half]:.3f}")  # fmt: skip
    print(f"    random sixes costlier than importance's six: {100 * beaten:.0f}%; median loss of the random sixes that "
          f"keep every job {r['baseline']['loss'] + np.median(np.asarray(r['random']['dloss'])[~r['whole']]):.3f} "
          f"(95% interval {kept_lo:.3f} to {kept_hi:.3f})")  # fmt: skip
    assert 0.9 <= beaten < 1 and by_importance < r["half"]["p10"]  # better than nearly every random six drawn, not all
    assert not r["whole"][rand <= by_importance].any()  # the random sixes as cheap as importance's keep every job
    gap_kept, gap_job = kept_lo - by_importance, r["gone_median_interval"][0] - r["kept_median_interval"][1]
    assert 0 < gap_kept < gap_job  # importance beats the job-keeping sixes by less than emptying a job costs
    assert r["half"]["p10"] < c["random_loss"][half] < r["half"]["p90"]  # the 3-order mean: inside the spread
fig = pruning_curves(reports)
ax = fig.axes[0]
for i, (line, (name, r)) in enumerate(zip(ax.get_lines()[::3], reports.items(), strict=True)):
    h = r["half"]  # the bars sit just left and right of 0.5 so they do not overlap
    ax.errorbar([0.49 + 0.02 * i], [h["median"]], yerr=[[h["median"] - h["p10"]], [h["p90"] - h["median"]]], fmt="s",
                color=line.get_color(), capsize=4, label=f"{name}: {n_random} random sixes (median, 10th-90th pct)")  # fmt: skip
ax.legend(fontsize=7)
show(fig)

# %% [markdown]
# Choosing by importance beats nearly every random six in both models (at least nine in ten; the cell prints the
# share), and its loss lies below the 10th percentile of the random outcomes. It does not beat all hundred: the few
# random sixes drawn that cost as little all keep a head for every job. Against those job-keeping sixes importance still
# wins (its loss is below the whole interval of their median), but by less than what separates keeping a job from
# emptying one (the medians of the two groups, compared with room for their intervals). The curve's random point
# at half the heads lies inside the 10th–90th percentile band but is not its median: another three orders would
# give another value.
#
# ## Pruning by training: hard-concrete gates
#
# Voita et al. (2019, §6) put a stochastic gate z_h ∈ [0, 1] on each head and add to the loss λ times the
# **L0 penalty**: the L0 "norm" counts non-zero entries, here the expected number of open gates. Counting is not
# differentiable, so the gates are drawn from a **hard-concrete** distribution (Louizos et al. 2018): a logistic
# sample squashed by a sigmoid with temperature β, stretched to (−0.1, 1.1) and clipped to [0, 1], so a gate can be
# exactly 0 or 1 while the probability of being open stays differentiable. We use β = 0.33, the default of Voita
# et al.'s released code (github.com/lena-voita/the-story-of-heads); Louizos et al. used 2/3. Gates not worth their
# penalty close. Here a short run, 150 fine-tuning steps of 64 sequences from each trained model (the gates and all
# of the model's weights are trained); `run_prune` trains longer on bigger batches (the cell prints its setting),
# and its report lists the gates that run leaves open.
#
# The gates' noise and the training batches are random, so which gates close depends on the seed: three seeds per
# model, trained with the call in the cell's comment by `benchmarks/roles_data.py` (in the repository; about a
# minute per model on 2 cores), read here from `mhattn/data/roles-analysis.json`.

# %%
cli_batch = signature(train_gates).parameters["batch_size"].default
print(f"run_prune: {PruneSettings().gate_steps} gate steps of {cli_batch} sequences; here: 150 steps of 64")
gate_runs = {}
for name in models:  # three seeds of train_gates(copy, task, l0_lambda=0.05, steps=150,
    # batch_size=64, seed=seed), read from the shipped run (a minute of training per model)
    gate_runs[name] = [set(heads) for heads in shipped_analysis["models"][name]["gates_open"]]
    print(f"{name}: gates open per seed {[len(o) for o in gate_runs[name]]}; heads open in every seed "
          f"{sorted(set.intersection(*gate_runs[name]))}; in some seeds only {sorted(set.union(*gate_runs[name]) - set.intersection(*gate_runs[name]))}")  # fmt: skip
assert shipped_analysis["gates"] == {"l0_lambda": 0.05, "steps": 150, "batch_size": 64, "seeds": [0, 1, 2]}
jobs_hd = job_heads(planted_match(roles["roles-headdropout"]))
assert max(map(len, gate_runs["roles-headdropout"])) < min(map(len, gate_runs["roles-plain"]))
assert all(all(o & set(j) for j in jobs_hd) for o in gate_runs["roles-headdropout"])  # every job keeps an open head
assert any(len({frozenset(o & set(j)) for o in gate_runs["roles-headdropout"]}) > 1 for j in jobs_hd)  # seeds differ

# %% [markdown]
# In every seed the head-dropout model keeps fewer gates open than the plain one, and every seed leaves at least one
# open head for each of its jobs; which of a job's duplicate heads stays open changes with the seed.
#
# ## What these two models show
#
# The numbers the next cell prints: how much of the summed single-head cost the two costliest heads carry, how
# unequal the single costs are by the Gini coefficient that `run_prune`'s report gives (negative costs clipped to 0, and
# how many were), how the heads split the planted jobs, and where a random half lands (with the 95% interval of its
# median).

# %%
for name in models:
    r = reports[name]
    d_single, d_rand = np.ravel(r["ablation_zero_dloss"]), np.asarray(r["random"]["dloss"])
    top2 = np.sort(np.clip(d_single, 0, None))[::-1][:2].sum() / np.clip(d_single, 0, None).sum()
    found = planted_match(roles[name])
    print(f"{name}: the two costliest heads carry {100 * top2:.0f}% of the summed single-head costs; Gini "
          f"{gini(d_single):.2f} ({int((d_single < 0).sum())} negative costs clipped to 0; 'unequal' from "
          f"{UNEQUAL_GINI}); heads per job (-1 / +1 / rare): {len(found['offset-1'])} / {len(found['offset+1'])} / "
          f"{len(found['rare'])}; max single cost {d_single.max():+.4f}; random six median {np.median(d_rand):+.3f} "
          f"nats (95% interval {r['median_interval'][0]:+.3f} to {r['median_interval'][1]:+.3f})")  # fmt: skip
found_plain, found_hd = planted_match(roles["roles-plain"]), planted_match(roles["roles-headdropout"])
assert all(len(found_hd[j]) >= 2 for j in found_hd) and len(found_plain["offset-1"]) == 1
top2_plain = np.sort(np.ravel(plain["ablation_zero_dloss"]))[::-1][:2].sum() / np.ravel(plain["ablation_zero_dloss"]).sum()
assert top2_plain > 0.5  # a few heads carry most of the summed single-head cost
assert np.max(hd["ablation_zero_dloss"]) < 0.01 < 0.5 < np.max(plain["ablation_zero_dloss"])
hd_single = np.ravel(hd["ablation_zero_dloss"])
hd_top2 = np.sort(np.clip(hd_single, 0, None))[::-1][:2].sum() / np.clip(hd_single, 0, None).sum()
assert gini(hd_single) >= UNEQUAL_GINI and hd_top2 > 0.4  # "unequal" by the threshold: two heads carry a large part
assert (hd_single < 0).any()  # and some single costs are negative (clipped to 0 by the Gini)
assert hd["median_interval"][1] < plain["median_interval"][0]  # the two models' medians: intervals far apart
assert plain["median_interval"][0] > 1.0  # a random half of the plain model costs over a nat, whichever draw
recipe = {name: models[name][2] for name in models}  # the training records of the two checkpoints
assert models["roles-plain"][0].cfg == models["roles-headdropout"][0].cfg
assert all(recipe["roles-plain"][k] == recipe["roles-headdropout"][k] for k in ("seed", "steps", "batch_size", "lr"))
print("the two recipes differ in:", [k for k in ("seed", "steps", "batch_size", "lr", "head_dropout")
                                     if recipe["roles-plain"][k] != recipe["roles-headdropout"][k]])  # fmt: skip

# %% [markdown]
# *Heads do not contribute equally.* In the plain model a few heads carry most of the summed single-head cost, and
# only one head does the "previous token" job: which six go matters. Removing half the heads by importance costs
# less than nearly every random half (the pruning curves), and a random half costs more than a nat over the whole
# interval of its median.
#
# *Heads can duplicate each other.* The head-dropout model has at least two heads for every job, in every resample of
# the role table. No single head costs more than a hundredth of a nat, and a random six costs little when it keeps
# a head for every job, which a little more than half of all sixes do (the count above); the rest empty a job and
# cost more. Its single costs look unequal by their shares: the two costliest heads carry a large part of the sum
# and the Gini coefficient passes the 0.5 from which `run_prune`'s report calls costs unequal (a threshold this course
# chose, `UNEQUAL_GINI`). But those are shares of almost nothing: every cost is below a hundredth of a nat (the
# largest is printed), and some are negative, removing the head lowered the loss a little, which the Gini clips to 0
# (the count is printed). Unequal shares of costs this small say nothing about which heads matter.
# Since no head here can change what it does, the cheap sixes are not the survivors taking over: the survivors,
# unchanged, already make enough evidence for each job. Notebook 07 tests these claims against both expectations
# and separates what the removed heads did directly from how the layers after them answer the removal, and both from
# recovery by fine-tuning.
#
# *What made the difference.* The two recipes differ only in head dropout (same architecture, seed, steps, batch and
# learning rate: the cell above checks), so head dropout is the likely cause of the
# duplicated heads, but that rests on **one training seed per recipe**: a plain model trained from another seed
# might happen to learn two previous-token heads, or a head-dropout model only one. Retraining several seeds of
# each recipe would measure that spread; each training takes the time printed at the top, too long for this
# notebook (try it below).
#
# **Exercises.** Exercise 9 (`exercises/ex09_head_importance.py`) asks you to compute Michel's importance from the
# head-mask gradient, as in the importance cell above; exercise 10 (`exercises/ex10_random_removal.py`) the exact
# expected loss change of removing k random heads.
#
# **Try it yourself.** Retrain with a weaker head dropout (`mhattn train --task roles --head-dropout 0.1 --out
# hd01.npz`) and load it here with `load_checkpoint("hd01.npz")`: how many heads share each job now? Retrain both
# recipes with another seed (`--seed 1`) to see whether the plain model again has one previous-token head. Or raise
# `l0_lambda` in the gate cell and watch which heads the L0 penalty keeps last.
