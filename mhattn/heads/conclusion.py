"""Which of the commonly given reasons hold for one model, decided from its numbers, and the words for it.

The question (the "test yourself" of the course's topic; the reasons are the ones usually given, after
Voita et al. 2019 and Michel et al. 2019):

1. *heads contribute unequally*, so a random half mostly removes heads that did little;
2. *the remaining heads compensate* without retraining, because they already overlap (redundancy);
3. *some heads add noise*, so removing them can even lower the loss.

Each verdict below is a comparison of measured numbers with a threshold named here, so a re-run that
changes the numbers changes the words.
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
    reason1_unequal_explains: bool  # unequal costs and additivity: the additive picture accounts for the loss
    reason2_compensation_holds: bool  # overlapping heads and the median loss stays small against naive
    reason3_noise_holds: bool  # some random removal lowered the loss


def verdicts(e: Expectation, one: UnequalContribution, two: Compensation, three: RemovalImproved):
    """:class:`Verdicts` from the computed comparisons."""
    about = abs(e.observed_mean_over_additive - 1.0) <= ADDITIVE_TOLERANCE
    unequal = one.gini_single_ablation >= UNEQUAL_GINI
    redundant = two.max_output_similarity >= REDUNDANT_SIMILARITY
    return Verdicts(
        less_than_naive=e.observed_dloss_median < e.naive_expected_dloss,
        more_than_additive=e.observed_dloss_mean > e.additive_expected_dloss, about_additive=about,
        unequal_costs=unequal, redundant_outputs=redundant, reason1_unequal_explains=unequal and about,
        reason2_compensation_holds=redundant and e.observed_dloss_median < SMALL_FRACTION_OF_NAIVE * e.naive_expected_dloss,
        reason3_noise_holds=three.n_random_subsets_improved > 0,
    )  # fmt: skip


def _holds(flag):
    return "holds" if flag else "fails"


def conclusion(e: Expectation, v: Verdicts, one: UnequalContribution, two: Compensation, three: RemovalImproved):
    """A short conclusion whose every clause follows from a comparison in ``v`` or a number in ``e``."""
    k, h = e.n_remove, e.n_heads
    naive = "less" if v.less_than_naive else "more"
    add = "about the" if v.about_additive else ("above the" if v.more_than_additive else "below the")
    kind = (
        "cost more together than alone: a head is partly covered while the others are there"
        if v.more_than_additive
        else "cost less together than alone: their costs overlap"
    )
    rec = two.finetune_recovered_fraction
    lines = [
        f"Removing {k} of {h} heads at random: median {e.observed_dloss_median:+.3f} nats, mean "
        f"{e.observed_dloss_mean:+.3f}, 90th percentile {e.observed_dloss_p90:+.3f}, worst {e.observed_dloss_worst:+.3f}; "
        f"the {k} most important removed: {e.most_important_removed_dloss:+.3f}.",
        f"The median is {naive} than the naive 'half the heads, half the ability' ({e.naive_expected_dloss:+.3f}); "
        f"the mean is {add} additive expectation (k/h) x sum of single costs = {e.additive_expected_dloss:+.3f} "
        f"(x{e.observed_mean_over_additive:.1f}): the heads {kind} "
        f"({100 * e.fraction_superadditive:.0f}% of subsets cost more than their heads' single costs added).",
        f"Reason 1 (unequal heads): single costs {'are' if v.unequal_costs else 'are not'} unequal "
        f"(Gini {one.gini_single_ablation:.2f}); inequality spreads the additive outcomes (sd "
        f"{e.additive_std_dloss:.3f}) but leaves their mean at {e.additive_expected_dloss:+.3f} (median "
        f"{e.additive_median_dloss:+.3f}), so it "
        f"{_holds(v.reason1_unequal_explains)} as the explanation here"
        + ("." if v.reason1_unequal_explains else " (the observed mean is not close to the additive expectation)."),
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
