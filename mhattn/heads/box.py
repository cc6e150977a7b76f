"""The answer box: what ``mhattn prune`` prints first, ``report.md`` and notebook 07 open with, in the same words.

For one model (:func:`model_box`): the question as the course's source puts it, the six-of-twelve outcome of each
layer against the naive reading (loss and accuracy, with the median's interval and the spread of sixes kept
apart), then each reason (:mod:`mhattn.heads.reasons`) with the layers where its interval supports it and one number,
those the data support first. Every verdict word comes from an interval (:func:`mhattn.heads.reasons.side`); a
reason that is not supported says what was measured. With other training seeds of the same model (``seeds``) a
headline number also gets its seed-to-seed range (the smallest and largest of the seeds' values).
"""

from __future__ import annotations

from mhattn.heads.reasons import LayerReasons, share, side

QUESTION = ("If a model has twelve attention heads per layer and you remove six of them uniformly at random, what are "
            "two distinct reasons the performance loss might be smaller than you expect?")  # fmt: skip
BOX_WORDS = 600  # one model's box, at most (a reader takes it in one screen)

# the reasons in the words of the course's source (the question's usual answer), in the order they are tested
REASONS = {
    "overlap": "the heads that remain may already encode overlapping information",
    "adapt": "the remaining heads may partially compensate",
    "unequal": "removing six at random is likely to remove several that contributed little",
    "noise": "some of the removed heads may have been adding noise",
}


def _word(k: int) -> str:
    """What the box calls a removed subset of ``k`` heads: a "six" for the question's six."""
    return {6: "six"}.get(k, f"{k}-subset")


def _words(k: int) -> str:
    return {6: "sixes"}.get(k, f"{k}-subsets")


def _nats(x):
    return f"{x:+.3f}"


def _pts(x):
    return f"{100 * x:+.1f}"


def _ci(ci, fmt=_nats):
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _layers(rows: list[LayerReasons], test) -> list[int]:
    return [r.layer for r in rows if test(r)]


def _where(layers: list[int], rows: list[LayerReasons]) -> str:
    """``"every layer"``, ``"layers 1, 2"``, ``"layer 0"`` or ``"no layer"``."""
    if len(rows) == 1:
        return "its one layer" if layers else "no layer"
    if len(layers) == len(rows):
        return "every layer"
    return f"layer{'s' if len(layers) > 1 else ''} {', '.join(map(str, layers))}" if layers else "no layer"


def _range(values, fmt) -> str:
    return f"{fmt(min(values))} to {fmt(max(values))}"


def outcome_lines(rows: list[LayerReasons]) -> list[str]:
    """One line per layer: a six's cost in loss and accuracy, median [its interval] (spread), against naive."""
    k = rows[0].n_remove
    lines = [f"layer: loss change of a {_word(k)}, median [95% interval of the median] (5-95% of {_words(k)}) vs naive; "
             "accuracy points likewise"]  # fmt: skip
    for r in rows:
        d, a = r.six_dloss, r.six_dacc
        lines.append(f"  L{r.layer}: {_nats(d.median)} {_ci(d.ci)} ({_nats(d.p5)} to {_nats(d.p95)}) vs "
                     f"{_nats(r.naive_dloss)}: {r.vs_naive}; {_pts(a.median)} {_ci(a.ci, _pts)} vs "
                     f"{_pts(r.naive_dacc)}: {_lost(r.vs_naive_acc)}")  # fmt: skip
    return lines


def _lost(word: str) -> str:
    """The accuracy verdict in words: "less lost", "more lost" or "about as much lost" (an interval that straddles)."""
    return "about as much lost" if word == "unclear" else f"{word} lost"


def _seeds(values_by_seed, fmt) -> str:
    """``"; seeds: a to b"`` over the seeds' values, or nothing with one seed."""
    return f"; {len(values_by_seed)} seeds: {_range(values_by_seed, fmt)}" if len(values_by_seed) > 1 else ""


def _f2(x):
    return f"{x:.2f}"


def overlap_line(rows, seeds) -> tuple[bool, str, str]:
    """Overlapping information: complementary sixes against the whole layer, and a six against its single costs."""
    held = _layers(rows, lambda r: r.overlap == "supported")
    if rows[0].pair_ratio is None:  # no complement pairs (k != h/2): the singles form only
        best = max(rows, key=lambda r: r.six_over_singles.median)
        num = f"{_f2(best.six_over_singles.median)} x its heads' single costs added (layer {best.layer})"
        return bool(held), f"overlapping information (a removal costs {num})", f"in {_where(held, rows)}: a removal costs {num}"
    best = min(rows, key=lambda r: r.pair_ratio.median)
    per = ", ".join(_f2(r.pair_ratio.median) for r in rows)
    spread = _seeds([min(x.pair_ratio.median for x in s) for s in seeds], _f2)
    short = (
        f"overlapping information (two complementary sixes cost {_f2(best.pair_ratio.median)} of all twelve, layer {best.layer})"
    )
    return bool(held), short, (
        f"in {_where(held, rows)}: a six and its complement together cost {_f2(best.pair_ratio.median)} "
        f"{_ci(best.pair_ratio.ci, _f2)} of removing all twelve (layer {best.layer}; by layer {per}{spread}): six heads "
        f"left keep much of what twelve did. The same overlap, seen from single heads: a six costs "
        f"{_f2(best.six_over_singles.median)} x its heads' single costs added, as a head removed alone is covered by "
        f"the others"
    )  # fmt: skip


def adapt_line(rows, seeds) -> tuple[bool, str, str]:
    """The later heads' response (total - heads-only) and the whole network's after the removed heads (total -
    direct effect, McGrath et al. 2023)."""
    comp, amp = _layers(rows, lambda r: r.heads == "compensate"), _layers(rows, lambda r: r.heads == "amplify")
    repair, ampl = _layers(rows, lambda r: r.downstream == "repair"), _layers(rows, lambda r: r.downstream == "amplification")
    parts, short = [], None
    if comp:
        best = min((r for r in rows if r.layer in comp), key=lambda r: r.heads_part_share.median)
        pct = lambda x: f"{100 * x:+.0f}%"  # noqa: E731
        spread = _seeds([min((x.heads_part_share.median for x in s if x.heads == "compensate"), default=0.0)
                         for s in seeds], pct)  # fmt: skip
        short = (f"the heads of later layers adapt a little ({pct(best.heads_part_share.median)} on a six's cost, "
                 f"layer {best.layer})")  # fmt: skip
        parts.append(f"partly: the heads of later layers, free to respond rather than held at their full-model "
                     f"outputs, change a six's cost by {pct(best.heads_part_share.median)} "
                     f"{_ci(best.heads_part_share.ci, pct)} in layer {best.layer} (lower in {best.heads_lower.count} of "
                     f"{best.heads_lower.n} sixes{spread}); they lower it in {_where(comp, rows)}")  # fmt: skip
    if amp:
        parts.append(f"raise it in {_where(amp, rows)}")
    if not comp and not amp:
        parts.append("no head comes after the removed ones, so none can respond" if all(r.heads == "none after" for r in rows)
                     else "the later heads' response is unclear")  # fmt: skip
    if repair and not short:
        short = f"what follows the removed heads repairs it ({_where(repair, rows)})"
    whole = max(rows, key=lambda r: abs(r.indirect.median))
    one = rows[0].num_layers == 1
    word = "repairs" if repair else "amplifies" if ampl else "leaves unclear"
    repaired = ("self-repair in McGrath et al.'s sense (the total below the direct effect) in " + _where(repair, rows)
                if repair else "so no self-repair in McGrath et al.'s sense, which needs the total below the direct "
                "effect")  # fmt: skip
    after = ("the feed-forward layer after the heads (with its LayerNorm)" if one else
             "everything after the removed heads together (heads, feed-forward layers, LayerNorms)")  # fmt: skip
    parts.append(f"{'But ' if comp or amp else 'What does respond: '}{after} {word} the removal in "
                 f"{_where(repair or ampl, rows)}: the cost minus its direct effect (the cost if nothing after the "
                 f"removed heads changed) is {_nats(whole.indirect.median)} {_ci(whole.indirect.ci)} in layer "
                 f"{whole.layer}; {repaired}")  # fmt: skip
    return bool(short), short or "", "; ".join(parts[:-1]) + ". " + parts[-1]


def unequal_line(rows, seeds) -> tuple[bool, str, str]:
    """Unequal heads: the costliest heads' share, what it does to added-up sixes, and the observed skew."""
    held = _layers(rows, lambda r: r.unequal == "supported")
    top = max(rows, key=lambda r: r.top_share)
    low = min(rows, key=lambda r: r.median_over_mean.median)
    skew = _layers(rows, lambda r: r.typical_cheaper == "supported")
    spread = _seeds([min(x.median_over_mean.median for x in s) for s in seeds], _f2)
    short = f"unequal heads (a typical six costs {_f2(low.median_over_mean.median)} x the average six, layer {low.layer})"
    half = all(2 * r.n_remove == r.num_heads for r in rows)
    why = ("at six of twelve, added-up single costs are symmetric: inequality widens the spread of sixes "
           f"({_nats(top.additive_p5)} to {_nats(top.additive_p95)} in layer {top.layer}) and moves neither their mean "
           "nor their median" if half else "added up, the typical subset costs "
           f"{_f2(min(r.additive_median_over_mean for r in rows))} x the average one")  # fmt: skip
    found = (f"; the typical six is cheaper than the average in {_where(skew, rows)} ({_f2(low.median_over_mean.median)} "
             f"{_ci(low.median_over_mean.ci, _f2)} x, layer {low.layer}{spread}), a skew from how heads combine"
             if skew and not held else f"; a typical six costs {_f2(low.median_over_mean.median)} "
             f"{_ci(low.median_over_mean.ci, _f2)} x the average six (layer {low.layer}{spread})")  # fmt: skip
    return bool(held), short, (f"the three costliest heads carry {top.top_share:.0%} of the single costs (layer "
                               f"{top.layer}), but {why}{found}")  # fmt: skip


def noise_line(rows, seeds) -> tuple[bool, str, str]:
    """Noise: single heads and sixes whose removal lowered the loss or raised the accuracy."""
    singles = [sum(getattr(r, f).count for r in rows) for f in ("singles_lower_loss", "singles_raise_acc")]
    sixes = [sum(getattr(r, f).count for r in rows) for f in ("sixes_lower_loss", "sixes_raise_acc")]
    n1, n6 = sum(r.singles_lower_loss.n for r in rows), sum(r.sixes_lower_loss.n for r in rows)
    seen = singles[0] + sixes[0] > 0
    gain = max(r.best_single_dacc for r in rows)
    up = share(sixes[0], n6).ci[1]
    short = f"noise ({singles[0]} of {n1} single heads and {sixes[0]} of {n6} sixes lowered the loss)"
    return seen, short, (
        f"{singles[0]} of {n1} single heads and {sixes[0]} of {n6} sixes (95% interval up to {up:.1%}) lowered the "
        f"loss; in accuracy {_count(singles[1], 'single head')}"
        f"{f' (by up to {_pts(gain)} points)' if singles[1] else ''} and {_count(sixes[1], 'six', 'sixes')} did better"
    )  # fmt: skip


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


LINES = {"overlap": overlap_line, "adapt": adapt_line, "unequal": unequal_line, "noise": noise_line}


def verdict_lines(rows: list[LayerReasons], seeds=()) -> list[str]:
    """``Answer: ...`` (the supported reasons in a few words, one number each), then every reason, supported first:
    ``Supported, "<the source's words>": <where and one number>`` or ``Not supported, ...: <what was measured>``.
    ``seeds``: other seeds' rows (for the seed-to-seed range)."""
    seeds = [rows, *seeds]
    tested = [(key, *LINES[key](rows, seeds)) for key in REASONS]
    held = [short for _, ok, short, _ in tested if ok]
    answer = f"Answer: the data support {_join(held)}." if held else "Answer: no reason's test held."
    ordered = [t for t in tested if t[1]] + [t for t in tested if not t[1]]
    return [answer, *(f'{"Supported" if ok else "Not supported"}, "{REASONS[key]}": {text}.' for key, ok, _, text in ordered)]


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "; ".join(parts[:-1]) + "; and " + parts[-1]


def anchor_line(rows: list[LayerReasons], measurement: dict) -> str:
    """Which reading of "expected" the box uses, why, and the no-attention anchors beside it."""
    r = rows[0]
    share = "half" if 2 * r.n_remove == r.num_heads else f"{r.n_remove}/{r.num_heads} of"
    whole = r.naive_dloss * r.num_heads / r.n_remove
    mean = r.mean_anchor_dloss * r.num_heads / r.n_remove
    text = (f'"Expected" (naive): {share} the cost of zeroing all {r.num_heads} heads of the layer ({_nats(whole)} in '
            f"layer {r.layer}; replacing them by their mean output instead costs {_nats(mean)})")  # fmt: skip
    ngram = measurement.get("ngram")
    if ngram:
        gap = ngram["bigram"]["loss"] - measurement["baseline"]["loss"]
        word = side(r.six_dloss.ci, gap * r.n_remove / r.num_heads, "less than", "more than")
        word = "about" if word == "unclear" else word
        text += (f". A bigram model, which uses no attention at all, is {_nats(gap)} worse than the full model; where "
                 f"zeroing a layer costs more than that, the naive reading is set too high. A layer-{r.layer} "
                 f"{_word(r.n_remove)} costs {word} {share} the bigram's gap as well")  # fmt: skip
    return text + "."


def model_box(name: str, measurement: dict, rows: list[LayerReasons], seeds=()) -> str:
    """One model's answer box (at most :data:`BOX_WORDS` words for a model of four layers); :data:`QUESTION` is
    printed once above the boxes.

    Args:
        name: the model's label; measurement: :func:`~mhattn.heads.sixes.measure_model`'s result; rows: its
            :func:`~mhattn.heads.reasons.model_reasons`; seeds: the rows of other training seeds of the same model.
    """
    s = measurement["settings"]
    n = rows[0].six_dloss.n
    where = "its one layer" if measurement["num_layers"] == 1 else "one layer (the other layers whole)"
    k = s["n_remove"]
    pairs = f", as {n // 2} pairs of a {_word(k)} and its complement (the other {_word(k)})" if rows[0].paired else ""
    head = (f"{name} ({measurement['num_layers']} x {rows[0].num_heads} heads): a \"{_word(k)}\" is {k} heads of {where} "
            f"removed at random (outputs zeroed); {n} per layer{pairs}; loss in nats on "
            f"{measurement['predictions']:,} predictions; rows: training seed "
            f"{measurement.get('seed', 0)}{f', ranges: {len(seeds) + 1} seeds' if seeds else ''}")  # fmt: skip
    return "\n".join([head, anchor_line(rows, measurement), *outcome_lines(rows), *verdict_lines(rows, seeds)])


def word_count(text: str) -> int:
    """Words as a reader counts them: runs of characters between spaces (a number is one word)."""
    return len(text.split())
