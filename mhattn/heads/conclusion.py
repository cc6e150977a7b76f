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
median is about the additive median (the costs do add up).
"""

from __future__ import annotations

from dataclasses import dataclass

from mhattn.heads.answers import Compensation, RemovalImproved, UnequalContribution
from mhattn.heads.expectation import Expectation

QUESTION = "A layer has twelve heads; six are removed at random and the loss grows less than expected. Why might that be?"
UNEQUAL_GINI = 0.5  # single-ablation costs count as unequal from this Gini coefficient up
ADDITIVE_TOLERANCE = 0.25  # "about additive": observed mean within ±25% of (k/h) Σ single costs
REDUNDANT_SIMILARITY = 0.5  # two heads' centred outputs count as overlapping from this cosine similarity up
SMALL_FRACTION_OF_NAIVE = 0.1  # the survivors "keep the ability" when the median loss change is below this x naive


@dataclass
class Verdicts:
    less_than_naive: bool  # median random removal < (k/h) (L(no heads) - L(all))
    more_than_additive: bool  # mean random removal > (k/h) Σ single costs
    about_additive: bool  # within ADDITIVE_TOLERANCE of it
    unequal_costs: bool  # Gini of single costs >= UNEQUAL_GINI
    redundant_outputs: bool  # some pair of heads with output similarity >= REDUNDANT_SIMILARITY
    reason1_unequal_explains: bool  # unequal, skewed additive outcomes, observed median about the additive median
    reason2_compensation_holds: bool  # overlapping heads and the median loss stays small against naive
    reason3_noise_holds: bool  # some random removal lowered the loss


def _close(a: float, b: float) -> bool:
    """``a`` within ADDITIVE_TOLERANCE of ``b`` (relative)."""
    return abs(a - b) <= ADDITIVE_TOLERANCE * abs(b)


def skewed(e: Expectation) -> bool:
    """Whether unequal costs make a typical additive outcome cheaper: the additive median clearly below the mean."""
    return e.additive_median_dloss < (1.0 - ADDITIVE_TOLERANCE) * e.additive_expected_dloss


def verdicts(e: Expectation, one: UnequalContribution, two: Compensation, three: RemovalImproved):
    """:class:`Verdicts` from the computed comparisons (reason 1: see the module's docstring)."""
    about = abs(e.observed_mean_over_additive - 1.0) <= ADDITIVE_TOLERANCE
    unequal = one.gini_single_ablation >= UNEQUAL_GINI
    redundant = two.max_output_similarity >= REDUNDANT_SIMILARITY
    reason1 = unequal and skewed(e) and _close(e.observed_dloss_median, e.additive_median_dloss)
    return Verdicts(
        less_than_naive=e.observed_dloss_median < e.naive_expected_dloss,
        more_than_additive=e.observed_dloss_mean > e.additive_expected_dloss, about_additive=about,
        unequal_costs=unequal, redundant_outputs=redundant, reason1_unequal_explains=reason1,
        reason2_compensation_holds=redundant and e.observed_dloss_median < SMALL_FRACTION_OF_NAIVE * e.naive_expected_dloss,
        reason3_noise_holds=three.n_random_subsets_improved > 0,
    )  # fmt: skip


def _holds(flag):
    return "holds" if flag else "fails"


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
        return (f"{head} and {spread}, but the observed median {e.observed_dloss_median:+.3f} is not close to that "
                "median (the costs do not add up here), so it fails.")  # fmt: skip
    return (f"{head} and {spread}; the observed median {e.observed_dloss_median:+.3f} is close to that median: a typical "
            "random removal misses the few costly heads, so it holds.")  # fmt: skip


def conclusion(e: Expectation, v: Verdicts, one: UnequalContribution, two: Compensation, three: RemovalImproved):
    """A short conclusion whose every clause follows from a comparison in ``v`` or a number in ``e``."""
    k, h = e.n_remove, e.n_heads
    naive = "less" if v.less_than_naive else "more"
    if v.about_additive:
        add, kind = "about the", "single costs roughly add up"
    elif v.more_than_additive:
        add, kind = "above the", "heads cost more together than alone"
    else:
        add, kind = "below the", "heads cost less together than alone"
    rec = two.finetune_recovered_fraction
    lines = [
        f"Removing {k} of {h} heads at random: median {e.observed_dloss_median:+.3f} nats, mean "
        f"{e.observed_dloss_mean:+.3f}, 90th percentile {e.observed_dloss_p90:+.3f}, worst {e.observed_dloss_worst:+.3f}; "
        f"the {k} most important removed: {e.most_important_removed_dloss:+.3f}.",
        f"The median is {naive} than the naive 'half the heads, half the ability' ({e.naive_expected_dloss:+.3f}); "
        f"the mean is {add} additive expectation (k/h) x sum of single costs = {e.additive_expected_dloss:+.3f} "
        f"(x{e.observed_mean_over_additive:.1f}): on average the {kind} "
        f"({100 * e.fraction_superadditive:.0f}% of subsets cost more than their heads' single costs added).",
        _reason1(e, v, one),
        f"Reason 2 (survivors compensate without retraining): largest output similarity between two heads "
        f"{two.max_output_similarity:.2f}; {_holds(v.reason2_compensation_holds)}.",
        f"Reason 3 (noisy heads): {three.n_random_subsets_improved} of {three.n_random} random removals lowered "
        f"the loss; {_holds(v.reason3_noise_holds)}.",
    ]
    if rec is not None:
        lines.append(
            f"Fine-tuning all parameters afterwards wins back {100 * rec:.0f}% of a median removal's loss: "
            "re-learning, not compensation."
        )
    return " ".join(lines)
