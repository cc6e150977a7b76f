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
# # 07 · Test yourself: remove half the heads
#
# **The question** (printed by the first cell): a layer has twelve heads; six are removed at random and the loss grows
# less than expected. Why might that be?
#
# **The answer, in plain words** (the box below gives it in numbers; the cells under it assert each line):
#
# - *Less than what?* Against the **naive** reading ("half the heads, half the ability") a random six costs less loss,
#   in both one-layer models and in every layer of the deep one, and less accuracy too, except where the accuracy's
#   interval only reaches the naive value (listed under the box; never beyond it). Against the **additive** reading
#   (the six heads' single costs added up) it costs *more*: heads cost more together than alone.
# - *"removing six at random is likely to remove several that contributed little"*: unequal heads widen the spread of
#   outcomes, not their mean; a typical six is cheap only with head dropout, and there because its jobs are
#   duplicated (next line), not because its heads are unequal.
# - *"the heads that remain may already encode overlapping information"*: yes, as duplicated roles, clearest in the
#   head-dropout model, where a six that leaves a head for every job costs almost nothing.
# - *"the remaining heads may partially compensate"*: in the deep model's middle layers the surviving heads do, a
#   little; in its first layer they add to the cost. The layers *after* the removed heads repair a six only in the
#   head-dropout model; everywhere else they enlarge it.
# - *"some of the removed heads may have been adding noise"*: not seen in any model.
# - *A second question*, half of all 48 heads of the deep model taken from any layers: there the loss grows less than
#   the naive reading but the accuracy falls *more* than it, so "less than expected" depends on the measure too.
#
# **After this notebook you can**
# - give the answer above from numbers, in loss and in accuracy, against two readings of "expected";
# - tell a removed head's direct effect from how the rest of the network answers its removal;
# - quote a random removal with its 95% interval, and say where a verdict depends on the measure.
#
# Notebook 06 introduced the two one-layer models (plain, and trained with head dropout) and the loss in **nats**;
# notebook 10 (later) studies a 4 × 8 deep model. Here the deep model is `text-deep12`: 4 layers × **12 heads**,
# predicting the next character of Python's documentation, so that the question can be asked as it is put: six of the
# twelve heads of *one* layer, for each layer, three training seeds.

# %%
import itertools
import json

import matplotlib

matplotlib.use("Agg")  # figures are shown with mhattn.course.display.show: PNG only, no "<Figure ...>" text
import math

import numpy as np

from mhattn.course.display import show
from mhattn.heads.answer_box import COURSE_BOX_WORDS, course_box, word_count
from mhattn.heads.conclusion import QUESTION, UNEQUAL_GINI
from mhattn.heads.expectation import bootstrap_interval, subset_sums
from mhattn.heads.jobs import run
from mhattn.heads.prune import PruneSettings
from mhattn.heads.report import model_report
from mhattn.heads.roles import planted_match
from mhattn.plots.pruning import random_removal_hist
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint
from mhattn.training.tasks import task_from_meta

settings = {"n_remove": 6, "n_random": 100, "curve_orders": 3, "finetune_steps": 100, "gate_steps": 0, "seed": 0}
assert all(getattr(PruneSettings(), k) == v for k, v in settings.items() if k != "gate_steps")  # the command's defaults
planted = run(["roles-plain", "roles-headdropout"], settings)
plain, hd = planted["roles-plain"], planted["roles-headdropout"]
deep_file = json.loads((DATA_DIR / "text-deep12-pruning.json").read_text())
deep = {s["seed"]: [model_report(d) for d in s["layers"]] for s in deep_file["seeds"]}  # seed -> one report per layer
half = {s["seed"]: model_report(s["half"]) for s in deep_file["seeds"]}  # half of all 48 heads, from any layer
shown = {**planted, **{f"text-deep12 L{i}": r for i, r in enumerate(deep[0])}, "text-deep12 24/48": half[0]}  # seed 0
every_deep = [r for reports in deep.values() for r in reports]  # 4 layers x 3 seeds
box = course_box(shown)
print(QUESTION, "\n")
print(box)
print(f"\n({word_count(box)} words; the deep model: training seed 0 of {len(deep)}, the shipped checkpoint; L0-L3: six of "
      f"that layer's twelve heads, the other layers whole; 24/48: half of all its heads, from any layers)")  # fmt: skip

# %%
every = [*planted.values(), *every_deep]  # six of twelve: both one-layer models, every layer of every seed
assert word_count(box) <= COURSE_BOX_WORDS
assert all(r.verdicts.less_than_naive for r in every)  # less loss than naive, everywhere
reach = [(s, i) for s, reports in deep.items() for i, r in enumerate(reports) if not r.verdicts.less_than_naive_acc]
print(
    "(seed, layer) where the accuracy's interval reaches the naive value:",
    [(s, i, [round(100 * x, 2) for x in deep[s][i].expectation.observed_dacc_median_ci]) for s, i in reach],
)
assert all(r.verdicts.less_than_naive_acc for r in planted.values()) and len(reach) < len(every_deep) / 4
assert not any(r.verdicts.worse_than_naive_acc for r in every)  # never beyond it
assert all(r.verdicts.more_than_additive for r in [*every, *half.values()])  # more than additive in loss
assert all(h.verdicts.less_than_naive and h.verdicts.worse_than_naive_acc for h in half.values())  # the measures split
assert hd.verdicts.typical_cheap and not any(r.verdicts.typical_cheap for r in [plain, *every_deep])
assert hd.verdicts.duplicated_roles and len(hd.q2_compensation.duplicated_roles) == 3  # every job held twice or more
assert hd.verdicts.downstream_compensates and not plain.verdicts.downstream_compensates
assert not any(r.verdicts.reason2_compensation_holds for reports in deep.values() for r in reports[:3])
assert not any(r.verdicts.reason3_noise_holds for r in every)  # noise: not seen

# %% [markdown]
# ## What "expected" means (the box's numbers)
#
# Write Δ(S) for the change in loss (nats, positive = worse) when the heads in S are removed together, and
# c_j = Δ({j}) for head j's **single cost**. Two readings of "expected" for k of h heads removed at random:
#
# - **additive**: if single costs added up, Δ(S) = Σ_{j∈S} c_j. Every head lies in a fraction k/h of the C(h, k)
#   subsets, so the mean over random subsets is **(k/h)·Σ_j c_j**, however unequal the c_j are.
# - **naive**: the loss moves the fraction k/h of the way from all heads to none, **(k/h)·(L(none) − L(all))**.
#
# Both are defined for accuracy in the same way. "None" is the pool the six come from: no heads in that layer for
# the rows L0-L3 (the other layers whole), no heads at all for 24/48. The box's intervals are 95% bootstrap intervals of the median over the random draws (`bootstrap_interval`). The
# naive reading in *loss* has a flaw for the plain one-layer model: with no heads at all it is confidently wrong,
# worse than a uniform guess over the 66 classes, so "half of that" is a poor yardstick. Accuracy cannot fall below
# zero, which makes it the clearer test; for both one-layer models the verdict is the same in both measures.

# %%
uniform = math.log(task_from_meta(load_checkpoint("roles-plain")[1]["task"]).output_sizes[0])  # nats, each job's classes
for name, m in planted.items():
    e = m.expectation
    none = m.baseline_loss + e.no_heads_dloss
    print(f"{name}: loss with no heads {none:.2f} nats against a uniform guess {uniform:.2f}; accuracy with no heads "
          f"{100 * e.no_heads_acc:.1f}%; additive mean by enumeration of all C(12, 6) subsets "
          f"{subset_sums(np.ravel(m.details['ablation_zero_dloss']), 6).mean():+.4f}")  # fmt: skip
    assert none > uniform or name != "roles-plain"  # the plain model without heads: worse than guessing
    assert math.isclose(subset_sums(np.ravel(m.details["ablation_zero_dloss"]), 6).mean(), e.additive_expected_dloss,
                        rel_tol=1e-9)  # a code check: the formula and all 924 subsets agree  # fmt: skip

# %% [markdown]
# ## "Likely to remove several that contributed little": spread, not mean
#
# The box's first reason. Inequality moves the *spread* of additive outcomes, not their mean; and with k = h/2 every
# half has a complement half whose additive sum is Σ − s, so the additive outcomes are symmetric: their median is
# their mean too. So inequality alone cannot make a *typical* six cheap. What can is skew in the *real* costs: the
# median removal below the mean. The single costs' inequality is summarised by the Gini coefficient (0: equal;
# (n − 1)/n: one head carries all); the course calls a Gini from `UNEQUAL_GINI` up "very unequal", a threshold it
# chose, not a fact about a model. The head-dropout model's single costs are all tiny and some are negative (clipped
# to 0 by the Gini), so its "inequality" is one of almost nothing (printed below).

# %%
for name, m in shown.items():
    e, g = m.expectation, m.q1_unequal_contribution.gini_single_ablation
    print(f"{name}: Gini {g:.2f} (threshold {UNEQUAL_GINI}); median / mean removal {e.observed_median_over_mean:.2f}; "
          f"{100 * e.fraction_cheap:.0f}% of sixes cost under half the mean")  # fmt: skip
c_hd = np.ravel(hd.details["ablation_zero_dloss"])
print(f"head dropout: largest single cost {c_hd.max():+.4f} nats, {int((c_hd < 0).sum())} negative")
assert c_hd.max() < 0.01 and (c_hd < 0).sum() >= 1
assert hd.expectation.observed_median_over_mean < 0.5 < min(r.expectation.observed_median_over_mean for r in every_deep)
sums = subset_sums(np.ravel(plain.details["ablation_zero_dloss"]), 6)
equal = subset_sums(np.full(12, sums.mean() / 6), 6)  # the same total over twelve equal heads
print(f"plain, additive sixes: mean {sums.mean():.3f}, sd {sums.std():.3f}; equal heads: mean {equal.mean():.3f}, "
      f"sd {equal.std():.3f}")  # fmt: skip
assert abs(sums.mean() - equal.mean()) < 1e-9 and sums.std() > 0.1 > equal.std()  # spread, not mean
assert plain.verdicts.unequal_costs and not plain.verdicts.typical_cheap  # very unequal, yet a typical six is not cheap
show(random_removal_hist({n: r.figure_data() for n, r in planted.items()}))

# %% [markdown]
# ## "May already encode overlapping information": duplicated roles
#
# The box's second reason, in its plainest form: two heads doing the same job, so either one is enough. In the
# head-dropout model every planted job (previous token, next token, rarest token) is held by two heads or more. A six
# that leaves at least one head for every job costs little; a six that takes every head of some job costs much more.
# Which sixes do that is counting, not the model: the sampled share is compared with the exact share over all C(12, 6).
# The deep model's heads match no role the test knows (all "other"), so there its verdict says nothing about overlap.

# %%
jobs = {job: [int(n.split("H")[1]) for n in heads] for job, heads in planted_match(hd.details["roles"]).items()}
d = np.asarray(hd.details["random"]["dloss"])
empties = np.array([any(set(j) <= set(s) for j in jobs.values()) for s in hd.details["random"]["subsets"]])
exact = np.mean([any(set(j) <= set(s) for j in jobs.values()) for s in itertools.combinations(range(12), 6)])
keep = bootstrap_interval(d[~empties], np.median)
print(f"head-dropout heads per job: {jobs}; roles held twice in the plain model: {plain.q2_compensation.duplicated_roles}")
for job, heads in jobs.items():  # the sixes that take every head of one job, job by job
    hit = np.array([set(heads) <= set(s) for s in hd.details["random"]["subsets"]])
    print(f"  sixes that empty {job}: {hit.sum()}" + (f", median cost {np.median(d[hit]):+.3f}" if hit.any() else ""))
print(f"{empties.sum()} of {empties.size} sixes take every head of some job (exact share {exact:.3f}); median cost "
      f"{np.median(d[empties]):+.3f} against {np.median(d[~empties]):+.3f} [{keep[0]:+.3f}, {keep[1]:+.3f}] for the rest")  # fmt: skip
assert all(len(j) >= 2 for j in jobs.values()) and "offset+1" in plain.q2_compensation.duplicated_roles
assert all(r["role"] == "other" for rep in every_deep for r in rep.details["roles"])  # the deep model: no roles found
assert np.median(d[empties]) > 10 * keep[1]
assert abs(empties.mean() - exact) < 3 * math.sqrt(exact * (1 - exact) / empties.size)  # a sample of 100

# %% [markdown]
# ## "May partially compensate": direct, heads-only and total effect
#
# The box's third reason. McGrath et al. 2023 ("The Hydra Effect", "Direct, indirect, and total effects") separate
# what an ablated layer did itself from how the rest of the network answers; there later *attention* layers make up
# for it (the Hydra effect) and late MLP layers counterbalance, in models trained without dropout. Three levels here:
#
# - **direct effect**: everything after the removed heads frozen at its full-model value; the final residual stream
#   loses exactly the removed heads' contributions, read through the final LayerNorm at its full-model scale;
# - **heads-only**: only the surviving heads frozen; feed-forward layers and LayerNorms answer the removal;
# - **total effect**: nothing frozen, the ordinary masked model.
#
# Heads-only minus direct is what the **feed-forward layers and LayerNorms** after the removal add (negative: they
# repair it); total minus heads-only is what the **surviving heads'** changes add, the Hydra effect's place (zero by
# construction in one layer and in the deep model's last layer, where no head reads the removed ones). The printed
# numbers are medians of each level, which need not add up.

# %%
for name, m in shown.items():
    e = m.expectation
    print(f"{name}: direct {e.direct_dloss_median:+.3f} (excess over direct singles {e.direct_excess_median:+.3f}); "
          f"layers after it {e.downstream_median:+.3f}, lower in {100 * e.fraction_downstream_lowers:.0f}%; surviving "
          f"heads {e.adaptation_median:+.3f}; total {e.observed_dloss_median:+.3f}")  # fmt: skip
assert hd.expectation.downstream_median < 0 < plain.expectation.downstream_median
assert all(r.expectation.downstream_median > 0 for r in every_deep)  # in the deep model they add to the cost
assert all(abs(r.expectation.adaptation_median) < abs(r.expectation.downstream_median) for r in every_deep)
mid = [r for reports in deep.values() for r in reports[1:3]]  # layers 1 and 2: the surviving heads repair a little
assert all(r.expectation.adaptation_median < 0 and r.expectation.fraction_adaptation_lowers > 0.9 for r in mid)
assert not any(r.verdicts.reason2_compensation_holds for r in mid)  # ... by under the course's 10% threshold
assert all(reports[0].expectation.adaptation_median > 0 for reports in deep.values())  # layer 0: they add to it
assert all(r.verdicts.direct_superadditive for r in planted.values())

# %% [markdown]
# ## "May have been adding noise"  (the box's last reason: a removal that *lowers* the loss)

# %%
for name, m in shown.items():
    q = m.q3_removal_improved_loss
    print(f"{name}: {q.n_random_subsets_improved} of {q.n_random} random removals and {q.n_single_ablations_improved} "
          f"of {np.size(m.details['ablation_zero_dloss'])} single ablations lowered the loss (best single "
          f"{q.best_single_dloss:+.5f})")  # fmt: skip
assert all(r.q3_removal_improved_loss.n_random_subsets_improved == 0 for r in every)
assert all(r.q3_removal_improved_loss.best_single_dloss > -1e-3 for r in every)

# %% [markdown]
# No random removal lowered the loss anywhere; single removals that did changed it by under a thousandth of a nat.
#
# ## The deep model, layer by layer and seed by seed (beyond the box: its other seeds)
#
# Every layer of every training seed, six of its twelve heads removed at random (the other layers whole), in loss
# and in accuracy; then the second question: half of all 48 heads, taken from any layers.

# %%
for seed, reports in deep.items():
    for i, r in enumerate(reports):
        e = r.expectation
        print(f"seed {seed} layer {i}: loss {e.observed_dloss_median:+.3f} [{e.observed_dloss_median_ci[0]:+.3f}, "
              f"{e.observed_dloss_median_ci[1]:+.3f}] naive {e.naive_expected_dloss:+.3f}; accuracy "
              f"{100 * e.observed_dacc_median:+.1f} naive {100 * e.naive_expected_dacc:+.1f}")  # fmt: skip
for seed, r in half.items():
    e = r.expectation
    print(f"seed {seed}, 24 of 48 from any layer: loss {e.observed_dloss_median:+.3f} naive {e.naive_expected_dloss:+.3f}"
          f"; accuracy {100 * e.observed_dacc_median:+.1f} naive {100 * e.naive_expected_dacc:+.1f}")  # fmt: skip
assert len(deep) == 3 and all(len(reports) == 4 for reports in deep.values())
meta = load_checkpoint("text-deep12")[1]["training"]
print(f"shipped checkpoint: trained {meta['steps']} steps in {meta['seconds']} s (its training time, from the checkpoint)")
for reports in deep.values():  # the earlier the layer, the more a six costs, and the more the layers after it add
    costs = [r.expectation.observed_dloss_median for r in reports]
    added = [r.expectation.downstream_median for r in reports]
    assert costs == sorted(costs, reverse=True) and added == sorted(added, reverse=True)
    direct = [r.expectation.direct_dloss_median for r in reports]
    assert max(direct) < 2 * min(direct) and max(direct) < min(costs)  # about the same, and below every total

# %% [markdown]
# In every seed the cost of a random six falls from the first layer to the last, and so does what the layers after the
# removal add to its direct effect: a head early in the model reaches the output through every later layer, and those
# layers enlarge the damage rather than repair it. The direct effect itself is about the same in every layer.

# %% [markdown]
# ## Recovery by fine-tuning is re-learning (beyond the box)
#
# After the median random removal, every parameter is trained on briefly with the removed heads held at zero. That
# wins most of the loss back, but it is new learning, not the survivors already covering. In some of the deep model's
# layers the pruned model ends *below* the unpruned one's loss; this probe does not say whether the unpruned model
# would gain as much from the same steps.

# %%
for name, m in shown.items():
    f = m.details["finetune"]
    print(f"{name}: {f['steps']} steps: loss {f['loss_pruned']:.3f} -> {f['loss_after_finetune']:.3f}, "
          f"{100 * m.q2_compensation.finetune_recovered_fraction:.0f}% won back")  # fmt: skip
assert all(m.q2_compensation.finetune_recovered_fraction > 0.5 for m in shown.values())
assert any(r.q2_compensation.finetune_recovered_fraction > 1 for r in deep[0])  # beyond the unpruned model's loss

# %% [markdown]
# ## The papers' settings beside ours
#
# | | heads | task, data | finding |
# |---|---|---|---|
# | Voita et al. 2019 (abstract; §6) | Transformer-base encoder, 6 layers × 8 heads = 48 | WMT English–Russian | hard-concrete gates with an L0 penalty prune 38 of 48 encoder heads for 0.15 BLEU |
# | Michel et al. 2019 (abstract; §3, §4) | Transformer-large, BERT | translation; natural-language inference (MNLI) | many heads removable at test time, some layers down to one head; importance from head-mask gradients |
# | McGrath et al. 2023 (direct, indirect and total effects) | Chinchilla 7B | factual-recall prompts (Counterfact) | ablating a layer, later layers make up part of its direct effect (self-repair) |
# | this notebook | 1 layer × 12; 4 layers × 12 | planted roles; Python's documentation | the box above |
#
# The papers prune by training (Voita) or by importance (Michel), in large models; the question removes heads at
# random.
#
# **Exercises.** Exercise 10 (`exercises/ex10_random_removal.py`) computes the exact expected loss change over all
# C(h, k) subsets; exercise 9 (`exercises/ex09_head_importance.py`) Michel's importance. **Try it.** `mhattn prune`
# runs the two one-layer models; `mhattn prune --task text-deep12` runs the deep model's seed 0 layer by layer (it
# prints its wall time).
