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
# # 07 · Test yourself: remove 6 of 12 heads
#
# **After this notebook you can**
# - define what "expected" means for a random removal in two ways, the *additive* baseline and the *naive*
#   "half the heads, half the ability" reading, and compute both from a model's own numbers;
# - show why unequal head contributions widen the spread of random-removal outcomes without lowering their mean;
# - tell compensation without retraining (redundant heads) from recovery by fine-tuning (re-learning);
# - read the tail of a distribution of outcomes (90th percentile, worst case), not only its median;
# - say, for each of the usual reasons, whether this model's numbers support it, and compare with the papers' settings.
#
# Notebook 06 introduced the two shipped planted-roles models (plain, and trained with head dropout p = 0.3) and the
# measures used here: the loss in **nats** (cross-entropy with the natural logarithm, averaged over the three jobs;
# 0 is perfect, ln 66 ≈ 4.19 is a uniform guess over 66 classes), **ablation** (setting a head's gate ξ = 0 in
# `head_mask`, so its output is zero) and Michel et al.'s importance.

# %%
import matplotlib

matplotlib.use("Agg")  # figures are shown with mhattn.course.display.show: PNG only, no "<Figure ...>" text
import math

import numpy as np

from mhattn.commands.prune import run, table
from mhattn.course.display import show
from mhattn.heads.conclusion import QUESTION
from mhattn.heads.expectation import additive_expectation, p_miss_costliest, subset_sums
from mhattn.heads.prune import PruneSettings
from mhattn.heads.scratch import as_rows, compare_scratch_vs_pruned
from mhattn.plots.pruning import importance_bars, pruning_curves, random_removal_hist, similarity_heatmaps
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

print(QUESTION)

# %% [markdown]
# That is the question (the usual "test yourself" on multi-head attention). The usual answer gives three reasons:
# (1) heads contribute unequally, so a random six mostly removes heads that did little; (2) the remaining heads
# compensate, because they already encode overlapping information; (3) some heads only add noise, so removing them
# can even help. Before testing any reason, the question needs a number for "expected".
#
# **Predict first.** For each model, write down: the median loss increase when six random heads go; whether it is
# more or less than half the loss of removing *all* heads; whether six heads removed together cost more or less than
# the sum of their single-removal costs; and whether any removal lowers the loss. Then run the next cell, which runs
# the experiment behind `mhattn prune` with its defaults, without the gates of lesson 06 (`settings` below: random
# subsets of six heads on 512 evaluation sequences; under a minute on a 2-core CPU).

# %%
settings = {"n_remove": 6, "n_random": 100, "curve_orders": 3, "finetune_steps": 100, "gate_steps": 0, "seed": 0}
assert all(getattr(PruneSettings(), k) == v for k, v in settings.items() if k != "gate_steps")  # the command's defaults
models = run(["roles-plain", "roles-headdropout"], settings)
details = {name: m.details for name, m in models.items()}
plain, hd = models["roles-plain"], models["roles-headdropout"]
print(table(models))

# %% [markdown]
# ## What "expected" means
#
# Write Δ(S) for the loss change (nats, positive = worse) when the heads in S are removed together, and
# c_j = Δ({j}) for head j's **single cost** (its ablation alone). Two readings of "expected" for a random six out
# of h = 12:
#
# - **additive**: if single costs simply added up, Δ(S) = Σ_{j∈S} c_j. Each head belongs to the fraction k/h of all
#   C(h, k) subsets, so the average over random subsets is **(k/h)·Σ_j c_j**, whatever the individual c_j are.
# - **naive**, "half the heads, half the ability": the loss moves k/h of the way from all heads to none,
#   **(k/h)·(L(no heads) − L(all heads))**; accuracy likewise.
#
# Both come from `mhattn.heads.expectation` and are in the report (`report.json`, key `expectation`).

# %%
for name, m in models.items():
    e = m.expectation
    print(
        f"{name}: sum of the 12 single costs {e.sum_single_dloss:.3f} nats -> additive expectation "
        f"{e.additive_expected_dloss:+.4f}; no heads at all {e.no_heads_dloss:+.3f} -> naive {e.naive_expected_dloss:+.3f}"
    )
    print(
        f"    observed over {len(m.details['random']['dloss'])} random sixes: median {e.observed_dloss_median:+.3f}, mean {e.observed_dloss_mean:+.3f}; "
        f"accuracy {e.baseline_acc:.3f} -> {e.observed_acc_median:.3f} (median; naive {e.naive_expected_acc:.3f})"
    )
    assert e.additive_expected_dloss == additive_expectation(m.details["ablation_zero_dloss"], 6)
    assert e.observed_dloss_median < e.naive_expected_dloss  # less than the naive reading ...
    assert e.observed_dloss_mean > 1.5 * e.additive_expected_dloss  # ... but well above the additive one
    assert e.observed_acc_median > e.naive_expected_acc

# %% [markdown]
# In both models a random six costs **less than the naive reading** and **more than the additive one**. So "the
# loss grows less than expected" is true only of the naive expectation; measured against the heads' own single
# costs, the loss grows *more*. Whatever explains the question must explain both facts.
#
# ## Reason 1: unequal heads change the spread, not the mean
#
# The single costs are very unequal (below, and the **Gini coefficient**: 0 when all heads cost the same,
# (n − 1)/n when one head carries everything). If costs added up, how would random sixes be distributed? We can
# enumerate all C(12, 6) subsets exactly with the plain model's own single costs, and compare with twelve equal
# costs of the same total.

# %%
show(importance_bars(details))
c = np.ravel(plain.details["ablation_zero_dloss"])
sums, equal = subset_sums(c, 6), subset_sums(np.full(12, c.mean()), 6)
print(f"Gini of the single costs: plain {plain.q1_unequal_contribution.gini_single_ablation:.2f}, "
      f"head-dropout {hd.q1_unequal_contribution.gini_single_ablation:.2f}")  # fmt: skip
print(f"{math.comb(12, 6)} subsets, additive sums with the plain model's costs: mean {sums.mean():.3f}, "
      f"median {np.median(sums):.3f}, sd {sums.std():.3f}, range {sums.min():.3f} to {sums.max():.3f}")  # fmt: skip
print(f"the same total spread equally over 12 heads: mean {equal.mean():.3f}, sd {equal.std():.3f}")
assert abs(sums.mean() - equal.mean()) < 1e-9 and equal.std() < 1e-9 < 0.1 < sums.std()
assert plain.verdicts.unequal_costs and hd.verdicts.unequal_costs  # "very unequal": Gini >= 0.5 in both
assert abs(np.median(sums) - sums.mean()) < 1e-9  # k = h/2: each half's complement is another half (sum Σ - s)
e = plain.expectation
print(f"the two costliest heads carry {100 * e.top2_share:.0f}% of the summed single costs; a random six misses "
      f"both with probability C(10,6)/C(12,6) = {e.p_random_misses_top2:.3f}")  # fmt: skip
assert abs(e.p_random_misses_top2 - p_miss_costliest(12, 6, 2)) < 1e-12

# %% [markdown]
# Inequality widens the spread: some random sixes would cost little and some a lot, but the mean stays at
# (k/h)·Σ c_j, because every head is removed in the same fraction of subsets (a permutation argument: relabelling
# heads does not change which fraction of subsets contains each one). For k = h/2 even the median stays there: every
# half has a complement half whose sum is Σ − s, so the distribution is symmetric about its mean. And a random six
# avoids both costliest heads only in the fraction printed above. So reason 1, taken as "most of a random half is
# cheap to lose", cannot make the *average* loss smaller than the additive expectation, and with six of twelve it
# does not even make the typical one smaller. Its premise (unequal heads) is true here; as an explanation it fails.
#
# ## The whole distribution, its tail, and both expectations
#
# The histogram shows each model's observed random removals, with the additive (dashed) and naive (dotted)
# expectations. Values beyond the axis would be piled into a hatched last bin and counted in the legend.

# %%
show(random_removal_hist(details))
for name, m in models.items():
    e = m.expectation
    print(
        f"{name}: median {e.observed_dloss_median:+.3f}, 90th percentile {e.observed_dloss_p90:+.3f}, "
        f"worst {e.observed_dloss_worst:+.3f}; the 6 most important heads removed {e.most_important_removed_dloss:+.3f}"
    )
e = hd.expectation
assert e.observed_dloss_p90 > 10 * e.observed_dloss_median  # head dropout: a cheap median, a heavy tail
assert e.most_important_removed_dloss > 10 * e.observed_dloss_median

# %% [markdown]
# The head-dropout model's median is small, but its tail is not: one random six in ten costs at least its 90th
# percentile, more than ten times the median, and removing the six most important heads also costs more than ten
# times the median (both asserted above; the printed values show how close the two are). "The survivors do the removed heads'
# work" is true of a typical six, not of every six.
#
# ## Reason 2: compensation without retraining
#
# If the survivors can stand in for removed heads *without any retraining*, two things should show: heads whose
# outputs overlap (cosine similarity between heads' centred output contributions, `head_h @ W_o[rows of h]`), and a
# removal that costs far less than the naive reading. The sign of Δ(S) − Σ_{j∈S} c_j tells how heads interact: when
# it is positive, a head costs more once others are gone, so while present the others partly covered for it.

# %%
show(similarity_heatmaps(details))
for name, m in models.items():
    e, q = m.expectation, m.q2_compensation
    print(
        f"{name}: largest output similarity between two heads {q.max_output_similarity:.2f}; "
        f"joint cost above the sum of single costs in {100 * e.fraction_superadditive:.0f}% of random sixes "
        f"(median excess {e.interaction_median:+.3f}); the six weakest: {q.lowest_single_sum_of_single_dloss:+.4f} "
        f"alone -> {q.lowest_single_joint_dloss:+.4f} together; median / naive = {e.observed_median_over_naive:.3f}"
    )
assert plain.q2_compensation.max_output_similarity < 0.5 <= hd.q2_compensation.max_output_similarity
assert plain.verdicts.reason2_compensation_holds is False and hd.verdicts.reason2_compensation_holds is True
assert plain.expectation.observed_median_over_naive > 0.3 > 0.1 > hd.expectation.observed_median_over_naive
assert min(plain.expectation.fraction_superadditive, hd.expectation.fraction_superadditive) > 0.9
for m in models.values():  # the six weakest cost more together than alone
    assert m.q2_compensation.lowest_single_joint_dloss > m.q2_compensation.lowest_single_sum_of_single_dloss

# %% [markdown]
# In the head-dropout model some pairs of heads produce clearly similar outputs (largest cosine similarity at least
# 0.5, asserted above), each job has several heads (notebook 06), and a
# typical random six costs a small fraction of the naive reading: the survivors do the work *without* retraining.
# That is reason 2, and it holds there. In the plain model no two heads' outputs are alike and a random six costs a
# large part of the naive reading: reason 2 fails. In both, almost every random six costs more together than its
# heads' single costs added up, so single-head scores understate what a group of heads does, and the "six weakest"
# cost more together than alone. Re-scoring the survivors after each removal, as the importance curve of
# `mhattn prune` does, is one way to take such interactions into account.
#
# ## Recovery by fine-tuning is re-learning
#
# After removing the median random six, the survivors and every other parameter are trained on (Adam, lr 1e-3,
# the removed heads held at ξ = 0). That wins back most of the loss, but it is new learning by all parameters, not
# the survivors already covering for the removed heads.

# %%
show(pruning_curves(details))
for name, m in models.items():
    f = m.details["finetune"]
    print(
        f"{name}: {f['steps']} fine-tuning steps: loss {f['loss_pruned']:.3f} -> {f['loss_after_finetune']:.3f} "
        f"(accuracy {f['acc_pruned']:.3f} -> {f['acc_after_finetune']:.3f}), "
        f"{100 * m.q2_compensation.finetune_recovered_fraction:.0f}% of the removal's loss won back"
    )
assert min(m.q2_compensation.finetune_recovered_fraction for m in models.values()) > 0.5

# %%
for name, m in models.items():
    cv = m.details["curve"]
    half = cv["fraction_removed"].index(0.5)
    line = cv["random_loss"][0] + 0.5 * (cv["random_loss"][-1] - cv["random_loss"][0])
    print(f"{name}: half the heads gone -> loss {cv['random_loss'][half]:.3f} at random "
          f"(mean of 3 orders), {cv['importance_loss'][half]:.3f} by importance; naive straight line {line:.3f}")  # fmt: skip
    assert cv["random_loss"][half] < line

# %% [markdown]
# The pruning curves show the same thing from another side: at half the heads the random curve (dashed) lies below
# the straight naive line (dotted) from all heads to none, because the cost of removing heads grows faster as
# fewer remain.
#
# ## Does training need heads the final model does not?
#
# A claim often made about multi-head attention (Michel et al. 2019 give "precursory evidence that training dynamics
# play a role", abstract): more heads help *training*, even if the trained model can lose many. Test: a 6-head model
# of the same d_model = 96 (d_k = 16), trained from scratch with the same 3,500 steps (`roles-6heads`, made by
# `python -m mhattn.training.recipes roles-6heads`), against the 12-head plain model with its median random six
# removed, before and after the same fine-tuning. Both have the same parameter count: with d_model fixed, W_q, W_k,
# W_v and W_o are d_model × d_model whatever h is.

# %%
full, full_meta = load_checkpoint("roles-plain")
six, six_meta = load_checkpoint("roles-6heads")
task = task_from_meta(full_meta["task"])
cmp = compare_scratch_vs_pruned(full, full_meta, six, six_meta, task, plain.details["finetune"]["removed"],
                                finetune_steps=100)  # fmt: skip
print(f"parameters: 12 heads {full.num_parameters():,}, 6 heads {six.num_parameters():,}")
print(
    f"d_model {six.cfg.d_model} for both; d_k {six.cfg.d_model // six.cfg.num_heads} (6 heads) against "
    f"{full.cfg.d_model // full.cfg.num_heads} (12 heads); training steps {six_meta['training']['steps']} and "
    f"{full_meta['training']['steps']}"
)
for label, loss, acc in as_rows(cmp):
    print(f"{label:42s} loss {loss:.4f} nats, accuracy {acc:.4f}")
print(f"first probe with every job >= 99%: 12 heads at step {cmp.full_first_step_at_99}, "
      f"6 heads at step {cmp.scratch_first_step_at_99}")  # fmt: skip
assert full.num_parameters() == six.num_parameters()
assert six.cfg.d_model == full.cfg.d_model == 96 and six.cfg.num_heads == 6
assert six_meta["training"]["steps"] == full_meta["training"]["steps"] == 3500
assert cmp.scratch_loss < cmp.finetuned_loss  # six heads from scratch beat twelve pruned to six and fine-tuned
assert cmp.scratch_min_acc >= 0.99 and cmp.scratch_first_step_at_99 <= cmp.full_first_step_at_99

# %% [markdown]
# Six heads trained from scratch do the task better than twelve pruned to six and briefly fine-tuned, and they
# reached 99% on every job no later than twelve heads did (the training probe is evaluated every 250 steps, so
# this is a coarse clock): they needed no extra heads to learn it. On this task, then, the claim is not supported: training did not need the
# six extra heads. (One seed and one small task; Michel et al.'s evidence concerns translation models, where it is
# the *importance* of heads early in training that they followed, §6.)
#
# ## Reason 3: some heads add noise

# %%
for name, m in models.items():
    q = m.q3_removal_improved_loss
    print(
        f"{name}: {q.n_random_subsets_improved} of {q.n_random} random sixes and {q.n_single_ablations_improved} of 12 "
        f"single ablations lowered the loss (best single {q.best_single_dloss:+.5f} nats)"
    )
    assert q.n_random_subsets_improved == 0 and q.best_single_dloss > -1e-3

# %% [markdown]
# No random six lowered the loss in either model; the single removals that did (if any) changed it by less than a
# thousandth of a nat. Reason 3 is not seen here.
#
# ## The answer, from the numbers, and the papers' settings beside ours
#
# `mhattn prune` prints the same conclusion; every clause is generated from a comparison in the report.

# %%
for name, m in models.items():
    print(f"[{name}] {m.conclusion}\n")
v_plain, v_hd = plain.verdicts, hd.verdicts
assert v_plain.less_than_naive and v_hd.less_than_naive and v_plain.more_than_additive and v_hd.more_than_additive
assert not (v_plain.reason1_unequal_explains or v_hd.reason1_unequal_explains)

# %% [markdown]
# | | heads | task, data | finding |
# |---|---|---|---|
# | Voita et al. 2019 (abstract; §6) | Transformer-base encoder, 6 layers × 8 heads = 48 | WMT English–Russian translation | hard-concrete gates with an L0 penalty prune 38 of 48 encoder heads for a drop of 0.15 BLEU |
# | Michel et al. 2019 (abstract; §3; importance: §4.1) | Transformer-large (WMT 2014 English–French) and BERT | translation; natural-language inference | many heads can be removed at test time without a significant loss, some layers down to one head; importance from head-mask gradients |
# | this notebook | 1 layer × 12 heads, d_model 96 | planted roles: previous token, next token, rarest token | the printed numbers above |
#
# What the two papers report is a *trained* pruning (Voita) or a *chosen* removal by importance (Michel), in large
# models trained on much data. The question asks about six heads chosen at random. Our numbers say:
#
# - "less than expected" is true against the naive reading, in both models; against the additive baseline the loss
#   grows *more*, so unequal head contributions (reason 1) cannot be the explanation: they widen the spread of
#   outcomes and leave the mean where it was.
# - Where heads are redundant (the head-dropout model), reason 2 holds: the survivors cover a typical random six
#   without retraining; its tail (90th percentile, the six most important) still costs far more.
# - Where they are not (the plain model), reason 2 fails: a random half costs a large part of what the naive reading
#   predicts, and it is fine-tuning, i.e. re-learning, that wins the loss back.
# - Redundancy is not a given of multi-head attention: here it came from how the model was trained (head dropout).
#
# **Exercises.** Exercise 10 (`exercises/ex10_random_removal.py`) computes the exact expected loss change over all
# C(h, k) subsets and the curve for k = 0 … h: compare its result for an additive loss with the straight naive line.
# Exercise 9 (`exercises/ex09_head_importance.py`) computes Michel's importance from head-mask gradients.
# **Try it yourself.** `mhattn prune --task text --out prune_text` runs the same experiment on the character-level
# model; `mhattn prune --remove 3` shows how the spread of additive outcomes changes when k ≠ h/2.
