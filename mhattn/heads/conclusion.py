"""Which of the commonly given reasons hold for one model, decided from its numbers, and the words for it.

The question (the "test yourself" of the course's topic; the reasons are the ones usually given, after
Voita et al. 2019 and Michel et al. 2019):

1. *heads contribute unequally*, so a random half mostly removes heads that did little;
2. *the remaining heads compensate* without retraining, because they already overlap (redundancy);
3. *some heads add noise*, so removing them can even lower the loss.

Each verdict below is a comparison of measured numbers with a threshold named here, so a re-run that
changes the numbers changes the words. Reason 1 is decided by the test notebook 06 teaches: if single costs
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
CONCLUSION_WORDS = 200  # the printed conclusion of one model, at most
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
    # from the three levels of freezing (None when the direct effect was not measured)
    direct_superadditive: bool | None = None  # clearly superadditive with everything downstream frozen
    downstream_compensates: bool | None = None  # the layers after the removal lower its direct cost (self-repair)
    downstream_amplifies: bool | None = None  # ... raise it


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
        duplicated_roles=bool(two.duplicated_roles), **_levels(e),
    )  # fmt: skip


def _levels(e: Expectation) -> dict:
    """The verdicts of the three levels of freezing (empty when the direct effect was not measured): the same
    thresholds as the heads-only test (ADDITIVE_TOLERANCE for "clearly superadditive", COMPENSATION_FRACTION of the
    direct cost for a response of the downstream layers, in most subsets)."""
    if e.direct_dloss_median is None:
        return {}
    direct, down = abs(e.direct_dloss_median), e.downstream_median
    singles = abs(e.direct_dloss_median - e.direct_excess_median)
    return dict(
        direct_superadditive=e.direct_excess_median > ADDITIVE_TOLERANCE * singles and e.fraction_direct_superadditive >= 0.5,
        downstream_compensates=down < -COMPENSATION_FRACTION * direct and e.fraction_downstream_lowers > 0.5,
        downstream_amplifies=down > COMPENSATION_FRACTION * direct and e.fraction_downstream_lowers < 0.5,
    )  # fmt: skip


def _interval(lo: float, hi: float) -> str:
    return f"[{lo:+.3f}, {hi:+.3f}]"


def _reason1(e: Expectation, v: Verdicts, one: UnequalContribution) -> str:
    """Reason 1 in both its forms: additive (can inequality lower the mean?) and as stated (is a typical removal cheap?)."""
    are = "very unequal" if v.unequal_costs else "not very unequal"
    typical = (f"a typical removal is cheap ({e.observed_median_over_mean:.2f} x the mean)" if v.typical_cheap
               else f"a typical removal costs about the mean ({e.observed_median_over_mean:.2f} x)")  # fmt: skip
    return (f"Reason 1: single costs are {are} (Gini {one.gini_single_ablation:.2f}; the course's threshold "
            f"{UNEQUAL_GINI}); added up they would average {e.additive_expected_dloss:+.3f} whatever the inequality, so "
            f"in its additive form it {_holds(v.reason1_unequal_explains)}; as stated, {typical}.")  # fmt: skip


def _holds(flag):
    return "holds" if flag else "fails"


def _heads_sentence(e: Expectation, v: Verdicts, one_layer: bool) -> str:
    """The surviving heads: frozen (heads-only) against free (total)."""
    if one_layer:
        return "freezing the survivors changes no subset's loss (in one layer no head reads another's output)"
    return (
        f"letting the surviving heads change moves a removal's cost {e.adaptation_median:+.3f} (lower in "
        f"{100 * e.fraction_adaptation_lowers:.0f}% of subsets): compensation {_holds(v.reason2_compensation_holds)}"
    )


def _levels_sentence(e: Expectation, v: Verdicts, one_layer: bool) -> str:
    """What the levels of freezing separate: the output, the layers after the removal, the surviving heads."""
    heads = _heads_sentence(e, v, one_layer)
    if v.direct_superadditive is None:
        return (f"With the survivors frozen, a removal costs {e.frozen_excess_median:+.3f} more than its heads' frozen "
                f"single costs added: spare evidence {_holds(v.spare_evidence)}; {heads}.")  # fmt: skip
    down = "they compensate" if v.downstream_compensates else "they add to it" if v.downstream_amplifies else "little"
    return (f"Direct effect (all after the removed heads frozen): median {e.direct_dloss_median:+.3f}, "
            f"{e.direct_excess_median:+.3f} more than the direct single costs added: spare evidence at the output "
            f"{_holds(v.direct_superadditive)}. The layers after them move it {e.downstream_median:+.3f}: {down}; "
            f"{heads}.")  # fmt: skip


def _compare(v: Verdicts) -> str:
    loss = "less than" if v.less_than_naive else "not clearly less than"
    acc = "less than" if v.less_than_naive_acc else "more than" if v.worse_than_naive_acc else "about"
    mean = "about the" if v.about_additive else "above the" if v.more_than_additive else "not clearly above the"
    return f"loss {loss} the naive reading, accuracy lost {acc} it; the mean loss is {mean} additive expectation"


def _answer(v: Verdicts) -> str:
    """Which way each measure goes against the naive reading, and the mechanisms whose test held."""
    spare = v.spare_evidence if v.direct_superadditive is None else v.direct_superadditive
    found = [text for flag, text in [
        (spare, "heads cost more together than alone (spare evidence)"),
        (v.downstream_compensates, "the later layers make up for the removed heads (self-repair)"),
        (v.reason2_compensation_holds, "the survivors' changes lower the cost (compensation)"),
        (v.typical_cheap, "a typical removal is cheap"), (v.duplicated_roles, "duplicated roles"),
        (v.reason3_noise_holds, "some removals take away noise")] if flag]  # fmt: skip
    return f"Answer: {_compare(v)}; mechanisms whose test held: {'; '.join(found) if found else 'none'}."


def conclusion(e: Expectation, v: Verdicts, one: UnequalContribution, two: Compensation, three: RemovalImproved,
               one_layer: bool | None = None):  # fmt: skip
    """A conclusion of at most :data:`CONCLUSION_WORDS` words whose every clause follows from a comparison in ``v``
    or a number in ``e``. ``one_layer``: no head reads another's output (default: freeing the survivors changed nothing)."""
    one_layer = e.adaptation_max_abs == 0.0 if one_layer is None else one_layer
    rec = two.finetune_recovered_fraction
    lines = [
        f"Removing {e.n_remove} of {e.n_heads} heads at random: loss median {e.observed_dloss_median:+.3f} nats "
        f"{_interval(*e.observed_dloss_median_ci)} (naive {e.naive_expected_dloss:+.3f}, additive "
        f"{e.additive_expected_dloss:+.3f}); accuracy median {100 * e.observed_dacc_median:+.1f} points (naive "
        f"{100 * e.naive_expected_dacc:+.1f}).",
        _reason1(e, v, one),
        _levels_sentence(e, v, one_layer),
        f"Duplicated roles: {', '.join(two.duplicated_roles) or 'none'}. Reason 3: {three.n_random_subsets_improved} of "
        f"{three.n_random} random removals lowered the loss; {_holds(v.reason3_noise_holds)}.",
    ]  # fmt: skip
    if rec is not None:
        lines.append(f"Fine-tuning afterwards wins back {100 * rec:.0f}% of a median removal's loss: re-learning.")
    return " ".join([*lines, _answer(v)])
