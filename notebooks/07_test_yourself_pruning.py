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
# **The question.** A layer has twelve heads; six are removed at random. Why might the loss grow less than expected?
#
# **The answer, in plain words** (the box below gives it in numbers; the cell under it asserts each line):
#
# - *Less than what?* Against the **naive** reading ("half the heads, half the ability") a random six costs less loss,
#   in both one-layer models and in every layer of the deep one, and less accuracy too, except in a few layers where
#   the accuracy's interval only reaches the naive value (they are printed; none lies beyond it). Against the
#   **additive** reading (the six heads' single costs added up) it costs *more*: heads cost more together than alone.
# - *"A random six is likely to remove several heads that contributed little"*: unequal heads widen the spread of
#   outcomes but leave their mean where it was; a typical six is cheap only in the model trained with head dropout.
# - *"The remaining heads may already encode overlapping information"*: yes, as duplicated roles, clearest in the
#   head-dropout model, where a six that leaves a head for every job costs almost nothing.
# - *"The remaining heads may partially compensate"*: not the heads themselves (in one layer none can change, and in
#   the deep model freeing them changes little); the layers *after* them do, in the head-dropout model (self-repair),
#   while in the other models they add to the cost.
# - *"Some heads may have been adding noise"*: not seen in any model.
# - *A second question*, half of all 48 heads of the deep model taken from any layers: there the loss grows less than
#   the naive reading but the accuracy falls *more* than it, so "less than expected" depends on the measure too.
#
# **After this notebook you can**
# - give the answer above from numbers, in loss and in accuracy, against two readings of "expected";
# - tell a removed head's direct effect from how the rest of the network answers its removal;
# - quote a random removal with its 95% interval, and say where a verdict depends on the measure.
#
# Notebook 06 introduced the two one-layer models (plain, and trained with head dropout p = 0.3) and the loss in
# **nats**; notebook 10 a deep text model. Here the deep model is `text-deep12`: 4 layers × **12 heads** (d_model 96,
# d_k 8), predicting the next character of Python's documentation, so that the question can be asked as it is put:
# six of the twelve heads of *one* layer, for each layer, three training seeds.

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
from mhattn.heads.scratch import as_rows, compare_scratch_vs_pruned
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
print(f"(seed, layer) where the accuracy's interval reaches the naive value: {reach}")
assert all(r.verdicts.less_than_naive_acc for r in planted.values()) and len(reach) < len(every_deep) / 4
assert not any(r.verdicts.worse_than_naive_acc for r in every)  # never beyond it
assert all(r.verdicts.more_than_additive for r in [*every, *half.values()])  # more than additive in loss
assert all(h.verdicts.less_than_naive and h.verdicts.worse_than_naive_acc for h in half.values())  # the measures split
assert hd.verdicts.typical_cheap and not any(r.verdicts.typical_cheap for r in [plain, *every_deep])
assert hd.verdicts.duplicated_roles and len(hd.q2_compensation.duplicated_roles) == 3  # every job held twice or more
assert hd.verdicts.downstream_compensates and not plain.verdicts.downstream_compensates
assert not any(r.verdicts.reason2_compensation_holds for r in every)  # the surviving heads: never
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
# Both are defined for accuracy in the same way (single accuracy changes a_j; the accuracy with no heads). The
# box's intervals are 95% bootstrap intervals of the median over the random draws (`bootstrap_interval`). The
# naive reading in *loss* has a flaw for the plain one-layer model: with no heads at all it is confidently wrong,
# worse than a uniform guess over the 66 classes, so "half of that" is a poor yardstick. Accuracy cannot fall below
# zero, which makes it the clearer test; for both one-layer models the verdict is the same in both measures.

# %%
uniform = math.log(66)  # a uniform guess over the planted task's 66 classes, in nats
for name, m in planted.items():
    e = m.expectation
    none = m.baseline_loss + e.no_heads_dloss
    print(f"{name}: loss with no heads {none:.2f} nats against a uniform guess {uniform:.2f}; accuracy with no heads "
          f"{100 * e.no_heads_acc:.1f}%; additive mean by enumeration of all C(12, 6) subsets "
          f"{subset_sums(np.ravel(m.details['ablation_zero_dloss']), 6).mean():+.4f}")  # fmt: skip
    assert none > uniform or name != "roles-plain"  # the plain model without heads: worse than guessing
    assert math.isclose(subset_sums(np.ravel(m.details["ablation_zero_dloss"]), 6).mean(), e.additive_expected_dloss,
                        rel_tol=1e-9)  # the formula against all 924 subsets, two routes  # fmt: skip

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
show(random_removal_hist({n: r.figure_data() for n, r in planted.items()}))

# %% [markdown]
# ## "May already encode overlapping information": duplicated roles
#
# The box's second reason, in its plainest form: two heads doing the same job, so either one is enough. In the
# head-dropout model every planted job (previous token, next token, rarest token) is held by two heads or more. A six
# that leaves at least one head for every job costs little; a six that takes every head of some job costs much more.
# Which sixes do that is counting, not the model: the sampled share is compared with the exact share over all C(12, 6).

# %%
jobs = {job: [int(n.split("H")[1]) for n in heads] for job, heads in planted_match(hd.details["roles"]).items()}
d = np.asarray(hd.details["random"]["dloss"])
empties = np.array([any(set(j) <= set(s) for j in jobs.values()) for s in hd.details["random"]["subsets"]])
exact = np.mean([any(set(j) <= set(s) for j in jobs.values()) for s in itertools.combinations(range(12), 6)])
keep = bootstrap_interval(d[~empties], np.median)
print(f"head-dropout heads per job: {jobs}")
print(f"{empties.sum()} of {empties.size} sixes take every head of some job (exact share {exact:.3f}); median cost "
      f"{np.median(d[empties]):+.3f} against {np.median(d[~empties]):+.3f} [{keep[0]:+.3f}, {keep[1]:+.3f}] for the rest")  # fmt: skip
assert all(len(j) >= 2 for j in jobs.values())
assert np.median(d[empties]) > 10 * keep[1]
assert abs(empties.mean() - exact) < 3 * math.sqrt(exact * (1 - exact) / empties.size)  # a sample of 100

# %% [markdown]
# ## "May partially compensate": direct, heads-only and total effect
#
# The box's third reason. McGrath et al. 2023 ("The Hydra Effect", section "Direct, indirect, and total effects")
# separate what a removed component did itself from how the rest of the network answers its removal. Here, three
# levels of freezing after a removal (`HeadMaskEvaluator.evaluate(mask, effect=...)`; glossary):
#
# - **direct effect**: everything after the removed heads frozen at its full-model value; the final residual stream
#   loses exactly the removed heads' contributions, read through the final LayerNorm at its full-model scale;
# - **heads-only**: only the surviving heads frozen; feed-forward layers and LayerNorms answer the removal;
# - **total effect**: nothing frozen, the ordinary masked model.
#
# Heads-only minus direct is what the **layers after the removal** add (negative: they make up for it, the
# self-repair McGrath et al. report); total minus heads-only is what the **surviving heads'** changes add (in one
# layer no head reads another's output, so there it is zero by construction, not by measurement).

# %%
for name, m in shown.items():
    e = m.expectation
    print(f"{name}: direct {e.direct_dloss_median:+.3f} (excess over direct singles {e.direct_excess_median:+.3f}); "
          f"layers after it {e.downstream_median:+.3f}, lower in {100 * e.fraction_downstream_lowers:.0f}%; surviving "
          f"heads {e.adaptation_median:+.3f}; total {e.observed_dloss_median:+.3f}")  # fmt: skip
assert hd.expectation.downstream_median < 0 < plain.expectation.downstream_median
assert all(r.expectation.downstream_median > 0 for r in every_deep)  # in the deep model they add to the cost
assert all(abs(r.expectation.adaptation_median) < abs(r.expectation.downstream_median) for r in every_deep)
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
# ## The deep model, layer by layer and seed by seed
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
print(f"shipped checkpoint: trained {meta['steps']} steps in {meta['seconds']} s (recorded when it was trained)")
for reports in deep.values():  # the earlier the layer, the more a six costs, and the more the layers after it add
    costs = [r.expectation.observed_dloss_median for r in reports]
    added = [r.expectation.downstream_median for r in reports]
    assert costs == sorted(costs, reverse=True) and added == sorted(added, reverse=True)
    direct = [r.expectation.direct_dloss_median for r in reports]
    assert max(direct) < 2 * min(direct) and max(direct) < min(costs)  # about the same, and small beside the total

# %% [markdown]
# In every seed the cost of a random six falls from the first layer to the last, and so does what the layers after the
# removal add to its direct effect: a head early in the model reaches the output through every later layer, and those
# layers enlarge the damage rather than repair it. The direct effect itself is about the same in every layer.

# %% [markdown]
# ## Recovery by fine-tuning is re-learning
#
# After removing the median random six, every parameter is trained on briefly with the removed heads held at
# zero. That wins most of the loss back, but it is new learning, not the survivors already covering. In the deep
# model's later layers it wins back more than everything: that model was not trained to convergence (notebook 10), so
# a hundred more steps improve it beyond where it started.

# %%
for name, m in shown.items():
    f = m.details["finetune"]
    print(f"{name}: {f['steps']} steps: loss {f['loss_pruned']:.3f} -> {f['loss_after_finetune']:.3f}, "
          f"{100 * m.q2_compensation.finetune_recovered_fraction:.0f}% won back")  # fmt: skip
assert all(m.q2_compensation.finetune_recovered_fraction > 0.5 for m in shown.values())
assert any(r.q2_compensation.finetune_recovered_fraction > 1 for r in deep[0])  # beyond the unpruned model's loss

# %% [markdown]
# Does *training* need heads the final model does not? Michel et al. 2019 give "precursory evidence that training
# dynamics play a role" (abstract; §6). A small probe: a 6-head model of the same d_model, trained from scratch with
# the same steps (`roles-6heads`), against the plain 12-head model with its median random six removed and fine-tuned.

# %%
full, full_meta = load_checkpoint("roles-plain")
six, six_meta = load_checkpoint("roles-6heads")
cmp = compare_scratch_vs_pruned(full, full_meta, six, six_meta, task_from_meta(full_meta["task"]),
                                plain.details["finetune"]["removed"], finetune_steps=100)  # fmt: skip
for label, loss, acc in as_rows(cmp):
    print(f"{label:42s} loss {loss:.4f} nats, accuracy {acc:.4f}")
assert full.num_parameters() == six.num_parameters() and six_meta["training"]["steps"] == full_meta["training"]["steps"]
assert cmp.scratch_loss < cmp.finetuned_loss and cmp.scratch_min_acc >= 0.99

# %% [markdown]
# Six heads from scratch do better than twelve pruned to six and fine-tuned for 100 steps: on this small task there
# is no sign that training needed the extra heads. The probe's limits: the six-head model's heads are twice as wide
# (d_k 16 against 8), the two training budgets differ, and each recipe was trained with one seed.

# %% [markdown]
# ## The papers' settings beside ours
#
# | | heads | task, data | finding |
# |---|---|---|---|
# | Voita et al. 2019 (abstract; §6) | Transformer-base encoder, 6 layers × 8 heads = 48 | WMT English–Russian | hard-concrete gates with an L0 penalty prune 38 of 48 encoder heads for 0.15 BLEU |
# | Michel et al. 2019 (abstract; §3, §4) | Transformer-large, BERT | translation; inference | many heads removable at test time, some layers down to one head; importance from head-mask gradients |
# | McGrath et al. 2023 (direct, indirect and total effects) | Chinchilla 7B | language modelling | ablating a layer, later layers make up part of its direct effect (self-repair) |
# | this notebook | 1 layer × 12; 4 layers × 12 | planted roles; Python's documentation | the box above |
#
# The papers prune by training (Voita) or by importance (Michel), in large models; the question removes heads at
# random.
#
# **Exercises.** Exercise 10 (`exercises/ex10_random_removal.py`) computes the exact expected loss change over all
# C(h, k) subsets; exercise 9 (`exercises/ex09_head_importance.py`) Michel's importance. **Try it.** `mhattn prune`
# runs the two one-layer models; `mhattn prune --task text-deep12` runs the deep model's seed 0 layer by layer (it
# prints its wall time).
