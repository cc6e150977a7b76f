"""Which of the commonly given reasons hold for one model, decided from its numbers, and the words for it.

The question (the "test yourself" of the course's topic; the reasons are the ones usually given, after
Voita et al. 2019 and Michel et al. 2019):

1. *heads contribute unequally*, so a random half mostly removes heads that did little;
2. *the remaining heads compensate* without retraining, because they already overlap (redundancy);
3. *some heads add noise*, so removing them can even lower the loss.

Each verdict below is a comparison of measured numbers with a threshold named here, so a re-run that
changes the numbers changes the words. Reason 1 is decided by the test notebook 07 teaches: if single costs
added up, every head is removed in k/h of the subsets, so however unequal the costs are, the *mean* random
removal is (k/h) Σ c_j; inequality can only make a *typical* removal cheaper through skew, a median of the
additive outcomes below their mean (never for k = h/2, where each half's complement is another half). So
reason 1 holds only when the costs are unequal, the additive outcomes are skewed that way, and the observed
median is about the additive median (the costs do add up). Reason 2 is decided by freezing the survivors
(:mod:`mhattn.heads.expectation`): it holds only when letting the surviving heads change what they do lowers
the cost of a removal; superadditivity that stays with the survivors frozen is spare evidence, not compensation.
Sample-dependent comparisons use the 95% bootstrap interval over the random subsets, not the point value.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhattn.heads.answers import Compensation, RemovalImproved, UnequalContribution
from mhattn.heads.expectation import Expectation

QUESTION = "A layer has twelve heads; six are removed at random and the loss grows less than expected. Why might that be?"
UNEQUAL_GINI = 0.5  # single-ablation costs count as unequal from this Gini coefficient up
ADDITIVE_TOLERANCE = 0.25  # "about additive": observed mean within ±25% of (k/h) Σ single costs
REDUNDANT_SIMILARITY = 0.5  # two heads' centred outputs count as overlapping from this cosine similarity up
COMPENSATION_FRACTION = 0.1  # survivors compensate when freeing them lowers the median cost by 10% of the frozen one
SPARE_FRACTION = 0.5  # spare evidence: at least half the subsets superadditive with the survivors frozen, and the
# median excess above ADDITIVE_TOLERANCE x the median sum of frozen single costs (not "about additive")


@dataclass
class Verdicts:
    less_than_naive: bool  # the median's 95% interval lies below (k/h) (L(no heads) - L(all))
    more_than_additive: bool  # the mean's 95% interval lies above (k/h) Σ single costs
    about_additive: bool  # the mean within ADDITIVE_TOLERANCE of it
    unequal_costs: bool  # Gini of single costs >= UNEQUAL_GINI
    redundant_outputs: bool  # some pair of heads with output similarity >= REDUNDANT_SIMILARITY
    spare_evidence: bool  # clearly superadditive with every surviving head frozen (see SPARE_FRACTION)
    reason1_unequal_explains: bool  # unequal, skewed additive outcomes, observed median about the additive median
    reason2_compensation_holds: bool  # freeing the survivors lowers the median cost by >= COMPENSATION_FRACTION
    reason3_noise_holds: bool  # some random removal lowered the loss
    less_than_naive_acc: bool  # the median accuracy change's 95% interval lies above (k/h) (acc(no heads) - acc(all))
    worse_than_naive_acc: bool  # ... lies below it: a random removal loses more accuracy than the naive reading
    typical_cheap: bool  # reason 1 as stated: the median removal's interval below (1 - ADDITIVE_TOLERANCE) x the mean
    duplicated_roles: bool  # reason 2's overlap as stated: some role is held by two heads or more


def _close(a: float, b: float) -> bool:
    """``a`` within ADDITIVE_TOLERANCE of ``b`` (relative)."""
    return abs(a - b) <= ADDITIVE_TOLERANCE * abs(b)


def skewed(e: Expectation) -> bool:
    """Whether unequal costs make a typical additive outcome cheaper: the additive median clearly below the mean."""
    return e.additive_median_dloss < (1.0 - ADDITIVE_TOLERANCE) * e.additive_expected_dloss


def compensates(e: Expectation) -> bool:
    """Whether the survivors' changes lower the cost: the median adaptation below -COMPENSATION_FRACTION x the
    median frozen cost, and lower in most subsets."""
    return e.adaptation_median < -COMPENSATION_FRACTION * abs(e.frozen_dloss_median) and e.fraction_adaptation_lowers > 0.5


def spare(e: Expectation) -> bool:
    """Whether heads stay clearly superadditive with every surviving head frozen: in at least SPARE_FRACTION of the
    subsets, and the median excess above ADDITIVE_TOLERANCE x the median sum of the frozen single costs."""
    clear = e.frozen_excess_median > ADDITIVE_TOLERANCE * abs(e.frozen_single_sum_median)
    return clear and e.fraction_frozen_superadditive >= SPARE_FRACTION


def verdicts(e: Expectation, one: UnequalContribution, two: Compensation, three: RemovalImproved):
    """:class:`Verdicts` from the computed comparisons (reasons 1 and 2: see the module's docstring)."""
    unequal = one.gini_single_ablation >= UNEQUAL_GINI
    reason1 = unequal and skewed(e) and _close(e.observed_dloss_median, e.additive_median_dloss)
    return Verdicts(
        less_than_naive=e.observed_dloss_median_ci[1] < e.naive_expected_dloss,
        more_than_additive=e.observed_dloss_mean_ci[0] > e.additive_expected_dloss,
        about_additive=abs(e.observed_mean_over_additive - 1.0) <= ADDITIVE_TOLERANCE, unequal_costs=unequal,
        redundant_outputs=two.max_output_similarity >= REDUNDANT_SIMILARITY,
        spare_evidence=spare(e),
        reason1_unequal_explains=reason1, reason2_compensation_holds=compensates(e),
        reason3_noise_holds=three.n_random_subsets_improved > 0,
        less_than_naive_acc=e.observed_dacc_median_ci[0] > e.naive_expected_dacc,
        worse_than_naive_acc=e.observed_dacc_median_ci[1] < e.naive_expected_dacc,
        typical_cheap=e.observed_dloss_median_ci[1] < (1.0 - ADDITIVE_TOLERANCE) * e.observed_dloss_mean,
        duplicated_roles=bool(two.duplicated_roles),
    )  # fmt: skip


def _holds(flag):
    return "holds" if flag else "fails"


def _interval(lo: float, hi: float) -> str:
    return f"[{lo:+.3f}, {hi:+.3f}]"


def _reason1(e: Expectation, v: Verdicts, one: UnequalContribution) -> str:
    """The reason-1 sentence: the first condition of its test that fails, or why it holds."""
    are = "are" if v.unequal_costs else "are not"
    head = f"Reason 1 (unequal heads): single costs {are} unequal (Gini {one.gini_single_ablation:.2f})"
    spread = (f"if they added up, random removals would have mean {e.additive_expected_dloss:+.3f} whatever the inequality, "
              f"median {e.additive_median_dloss:+.3f}, sd {e.additive_std_dloss:.3f}")  # fmt: skip
    if not v.unequal_costs:
        return f"{head}: its premise fails."
    if not skewed(e):
        return f"{head}, but {spread}: inequality widens the spread without making a typical removal cheaper, so it fails."
    if not v.reason1_unequal_explains:
        return (f"{head} and {spread}, but the observed median {e.observed_dloss_median:+.3f} is not within "
                f"{100 * ADDITIVE_TOLERANCE:.0f}% of that median, so it fails.")  # fmt: skip
    return (f"{head} and {spread}; the observed median {e.observed_dloss_median:+.3f} is close to that median: a typical "
            "random removal misses the few costly heads, so it holds.")  # fmt: skip


def _mechanism(e: Expectation, v: Verdicts) -> str:
    """What is left with every surviving head frozen: the spare-evidence sentence."""
    text = (f"With every surviving head's output frozen, a removal's cost minus its heads' frozen single costs added is "
            f"{e.frozen_excess_median:+.3f} (median, against a median sum of {e.frozen_single_sum_median:+.3f}; 10th-90th "
            f"percentile {_interval(e.frozen_excess_p10, e.frozen_excess_p90)}; positive in "
            f"{100 * e.fraction_frozen_superadditive:.0f}% of subsets)")  # fmt: skip
    if v.spare_evidence:
        return text + ", so spare evidence holds: the rest of the network needs only part of what the heads give."
    return text + ", so spare evidence fails."


def _reason2(e: Expectation, v: Verdicts, two: Compensation) -> str:
    """The reason-2 sentence: what letting the survivors change does to the cost."""
    head = "Reason 2 (survivors compensate without retraining):"
    if e.adaptation_max_abs == 0.0:
        change = ("freezing the survivors changes no subset's loss: no surviving head changed what it does (in a "
                  "one-layer model none can, every head reads only the embeddings)")  # fmt: skip
    else:
        change = (f"letting the survivors change moves a removal's cost by {e.adaptation_median:+.3f} (median; 10th-90th "
                  f"percentile {_interval(e.adaptation_p10, e.adaptation_p90)}; lower in "
                  f"{100 * e.fraction_adaptation_lowers:.0f}% of subsets)")  # fmt: skip
    dup = "some" if v.redundant_outputs else "no"
    return (f"{head} {change}; {_holds(v.reason2_compensation_holds)}. Largest output similarity between two heads "
            f"{two.max_output_similarity:.2f}: {dup} pair of heads writes alike.")  # fmt: skip


def _answer(v: Verdicts) -> str:
    """What the verdicts support: every mechanism whose test held, none that failed (a held test is a mechanism
    at work, not proof that it alone makes the loss grow less than the naive reading)."""
    if not v.less_than_naive:
        return "Answer: here the loss does not clearly grow less than the naive reading: the question's premise fails."
    found = [text for flag, text in [
        (v.spare_evidence, "heads cost more together than alone even with the survivors frozen (spare evidence)"),
        (v.reason2_compensation_holds, "the survivors' changes lower the cost (compensation)"),
        (v.reason1_unequal_explains, "a typical random removal misses the few costly heads"),
        (v.reason3_noise_holds, "some removals take away noise")] if flag]  # fmt: skip
    why = "; ".join(found) if found else "none"
    return f"Answer: the loss grows less than the naive reading; the tested mechanisms that hold: {why}."


def conclusion(e: Expectation, v: Verdicts, one: UnequalContribution, two: Compensation, three: RemovalImproved):
    """A short conclusion whose every clause follows from a comparison in ``v`` or a number in ``e``."""
    k, h = e.n_remove, e.n_heads
    naive = "less" if v.less_than_naive else "not clearly less"
    if v.about_additive:
        add, kind = "about the", "single costs roughly add up"
    elif v.more_than_additive:
        add, kind = "above the", "heads cost more together than alone"
    else:
        add, kind = "not clearly above the", "single costs do not clearly add up or fall short"
    rec = two.finetune_recovered_fraction
    lines = [
        f"Removing {k} of {h} heads at random: median {e.observed_dloss_median:+.3f} nats (95% interval "
        f"{_interval(*e.observed_dloss_median_ci)}), mean {e.observed_dloss_mean:+.3f} ({_interval(*e.observed_dloss_mean_ci)}), "
        f"10th-90th percentile {_interval(e.observed_dloss_p10, e.observed_dloss_p90)}, worst {e.observed_dloss_worst:+.3f}; "
        f"the {k} most important removed: {e.most_important_removed_dloss:+.3f}.",
        f"The median is {naive} than the naive 'half the heads, half the ability' ({e.naive_expected_dloss:+.3f}); "
        f"the mean is {add} additive expectation (k/h) x sum of single costs = {e.additive_expected_dloss:+.3f} "
        f"(x{e.observed_mean_over_additive:.1f}): on average {kind} "
        f"({100 * e.fraction_superadditive:.0f}% of subsets cost more than their heads' single costs added).",
        _reason1(e, v, one),
        _mechanism(e, v),
        _reason2(e, v, two),
        f"Reason 3 (noisy heads): {three.n_random_subsets_improved} of {three.n_random} random removals lowered "
        f"the loss; {_holds(v.reason3_noise_holds)}.",
    ]
    if rec is not None:
        lines.append(f"Fine-tuning all parameters afterwards wins back {100 * rec:.0f}% of a median removal's loss: "
                     "re-learning, not compensation.")  # fmt: skip
    return " ".join([*lines, _answer(v)])
