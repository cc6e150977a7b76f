"""The answer box: the few lines ``mhattn prune`` prints first for each model and notebook 07 opens with.

For one model (:func:`model_box`, at most :data:`MODEL_BOX_WORDS` words): what a random removal does to the loss
*and* the accuracy (median with its 95% interval over the random draws, against the naive and the additive
readings), then each reason the question's usual answer gives, in its own words, with the verdict its test gives
here. Every clause comes from a comparison in :class:`~mhattn.heads.conclusion.Verdicts` or a number in
:class:`~mhattn.heads.expectation.Expectation`; the details stay in ``report.md``.

For k = h/2, as in the question, the additive outcomes are symmetric about their mean (each half's complement is
another half), so the additive reading is both the median and the mean of the additive outcomes.
"""

from __future__ import annotations

from mhattn.heads.conclusion import Verdicts
from mhattn.heads.expectation import Expectation

MODEL_BOX_WORDS = 120  # the box of one model, as `mhattn prune` prints it

# the usual answer's reasons, quoted from its own words (the course's question, notebook 07)
REASON_WORDS = {
    "little": "likely to remove several that contributed little",
    "overlap": "may already encode overlapping information",
    "compensate": "the remaining heads may partially compensate",
    "noise": "may have been adding noise",
}


def _vs(low, high, reading, name, more, less):
    """``"<more> <name>"`` when the interval ``[low, high]`` lies above ``reading``, ``"<less> <name>"`` below it,
    else ``"about <name>"``."""
    return f"{more if low > reading else less if high < reading else 'about'} {name}"


def _against_readings(interval, naive, additive, more, less) -> tuple[str, str]:
    """Where ``interval`` lies against the naive and the additive reading: e.g. ``("more than naive", "about additive")``."""
    lo, hi = interval
    return _vs(lo, hi, naive, "naive", more, less), _vs(lo, hi, additive, "additive", more, less)


def loss_line(e: Expectation) -> str:
    """Loss: median change with its interval, the two readings, and where the interval lies against each."""
    lo, hi = e.observed_dloss_median_ci
    naive, add = _against_readings((lo, hi), e.naive_expected_dloss, e.additive_median_dloss, "more than", "less than")
    return (f"loss {e.observed_dloss_median:+.3f} nats [{lo:+.3f}, {hi:+.3f}]; naive {e.naive_expected_dloss:+.3f}, "
            f"additive {e.additive_median_dloss:+.3f}: {naive}, {add}")  # fmt: skip


def accuracy_line(e: Expectation) -> str:
    """Accuracy (percentage points): the same comparisons as :func:`loss_line`; losing less accuracy is better."""
    lo, hi = e.observed_dacc_median_ci
    naive, add = _against_readings((lo, hi), e.naive_expected_dacc, e.additive_expected_dacc, "better than", "worse than")
    pts = lambda x: f"{100 * x:+.1f}"  # noqa: E731
    return (f"accuracy {pts(e.observed_dacc_median)} points [{pts(lo)}, {pts(hi)}]; naive {pts(e.naive_expected_dacc)}, "
            f"additive {pts(e.additive_expected_dacc)}: {naive}, {add}")  # fmt: skip


def reason_lines(e: Expectation, v: Verdicts, duplicated: dict, no_reader: bool, improved: tuple[int, int]) -> list[str]:
    """One line per reason of the usual answer: its words, then the verdict of its test on this model."""
    ratio = f"a typical removal costs {e.observed_median_over_mean:.2f} x the mean"
    little = (f"yes: {ratio}, {100 * e.fraction_cheap:.0f}% cost under half of it" if v.typical_cheap
              else f"no: {ratio}; unequal heads widen the spread only")  # fmt: skip
    overlap = ("yes, as duplicated roles (" + ", ".join(f"{r} x{len(hs)}" for r, hs in duplicated.items()) + ")"
               if duplicated else "no role is held twice")  # fmt: skip
    change = _compensation(e, v, no_reader)
    noise = ("seen" if v.reason3_noise_holds else "not seen") + f" ({improved[0]} of {improved[1]} lowered the loss)"
    return [f'"{REASON_WORDS["little"]}": {little}', f'"{REASON_WORDS["overlap"]}": {overlap}',
            f'"{REASON_WORDS["compensate"]}": {change}', f'"{REASON_WORDS["noise"]}": {noise}']  # fmt: skip


def _compensation(e: Expectation, v: Verdicts, no_reader: bool) -> str:
    """The compensation verdict at two places: the surviving heads (heads-only against total) and the layers after
    the removal (direct effect against heads-only), when the direct effect was measured. ``no_reader``: no surviving
    head reads the removed heads' output (a one-layer model, or removals from a model's last layer), so none can
    change what it does."""
    if no_reader:
        heads = "no surviving head reads them"
    else:
        heads = f"surviving heads {e.adaptation_median:+.3f} nats: " + ("yes" if v.reason2_compensation_holds else "no")
    if v.downstream_compensates is None:
        return heads
    word = "yes" if v.downstream_compensates else "no, they add to it" if v.downstream_amplifies else "no"
    return f"{heads}; the layers after them {e.downstream_median:+.3f} on the direct cost: {word}"


def model_box(name: str, report) -> str:
    """The answer box of one :class:`~mhattn.heads.report.ModelReport`, at most :data:`MODEL_BOX_WORDS` words."""
    e, v, d = report.expectation, report.verdicts, report.details
    where = f" of layer {d['layer']}" if "layer" in d else ""
    n = len(d["random"]["dloss"])
    head = f"{name}: {e.n_remove} of {e.n_heads} heads{where} removed at random ({n} draws; median [95% interval])"
    last = d.get("model_num_layers", d["num_layers"]) - 1  # a removal from the last layer has no head after it
    no_reader = last == 0 or d.get("layer") == last
    q3 = report.q3_removal_improved_loss
    reasons = reason_lines(e, v, report.q2_compensation.duplicated_roles, no_reader, (q3.n_random_subsets_improved, n))
    lines = [head, loss_line(e), accuracy_line(e), *reasons]
    return "\n".join([lines[0], *("  " + line for line in lines[1:])])


def word_count(text: str) -> int:
    """Words as a reader counts them: runs of characters between spaces (a number is one word)."""
    return len(text.split())


COURSE_BOX_WORDS = 150  # notebook 07's box, all models together


def _row(name: str, e: Expectation) -> str:
    """One model's numbers: median change [95% interval] vs the naive/additive readings, loss (nats); accuracy (points)."""
    lo, hi = e.observed_dloss_median_ci
    alo, ahi = (100 * x for x in e.observed_dacc_median_ci)
    return (f"{name}: {e.observed_dloss_median:+.3f} [{lo:+.3f},{hi:+.3f}] vs {e.naive_expected_dloss:+.3f}/"
            f"{e.additive_median_dloss:+.3f}; {100 * e.observed_dacc_median:+.1f} [{alo:+.1f},{ahi:+.1f}] vs "
            f"{100 * e.naive_expected_dacc:+.1f}/{100 * e.additive_expected_dacc:+.1f}")  # fmt: skip


def _which(reports: dict, test) -> str:
    """The names of the models for which ``test(report)`` holds, or "none"."""
    names = [n for n, r in reports.items() if test(r)]
    return ", ".join(names) if names else "none"


def course_box(reports: dict) -> str:
    """Notebook 07's answer box: one row of numbers per model (median change in loss, nats, and accuracy, points,
    with 95% intervals, against the naive/additive readings), then each reason of the usual answer and the models
    whose data support it. At most :data:`COURSE_BOX_WORDS` words for notebook 07's seven rows."""
    lines = ["Six of twelve heads removed at random (unless named): loss (nats); accuracy (points), median [95% "
             "interval] vs naive/additive",
             *(_row(n, r.expectation) for n, r in reports.items()),
             f'"{REASON_WORDS["little"]}": a typical removal is cheap in {_which(reports, lambda r: r.verdicts.typical_cheap)}',
             f'"{REASON_WORDS["overlap"]}": duplicated roles in {_which(reports, lambda r: r.verdicts.duplicated_roles)}',
             f'"{REASON_WORDS["compensate"]}": the layers after the removed heads do in '
             f"{_which(reports, lambda r: bool(r.verdicts.downstream_compensates))}; the surviving heads in "
             f"{_which(reports, lambda r: r.verdicts.reason2_compensation_holds)}",
             f'"{REASON_WORDS["noise"]}": seen in {_which(reports, lambda r: r.verdicts.reason3_noise_holds)}']  # fmt: skip
    split = _which(reports, lambda r: r.verdicts.less_than_naive != r.verdicts.less_than_naive_acc)
    if split != "none":  # where the two measures disagree, the box says so
        lines.insert(len(reports) + 1, f"Loss and accuracy disagree against the naive reading in: {split}")
    return "\n".join(lines)
