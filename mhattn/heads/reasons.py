"""The reasons a random half of a layer's heads may cost less than expected, each measured in the form the question
states it and given a verdict from an interval (never from a point value against a threshold).

From one layer's measurements (:func:`mhattn.heads.sixes.measure_layer`), for k of h heads removed at random
(Δ = loss change in nats, positive = worse; accuracy changes in fractions, negative = worse):

* **anchors**: the *naive* reading, (k/h) of what removing all h heads of the layer costs (the question's "half the
  heads, half the ability"), and the same fraction of the layer replaced by its mean output (mean ablation: a
  softer "no attention here" than zeros).
* **overlapping information** (static): for complement pairs, (Δ(S) + Δ(S')) / Δ(all h) below 1 means each half
  keeps much of what all h did (Michel et al. 2019 §3; Voita et al. 2019 §6); and Δ(S) / Σ_{j∈S} c_j above 1 means
  single costs understate what heads do together, as when heads cover for each other.
* **unequal heads**: the single costs' inequality (share of the three costliest), against what it can do: at
  k = h/2 the additive expectation is half the total *whatever* the inequality, and the added-up costs of all
  C(h, k) subsets are symmetric (each subset's complement holds the rest), so inequality widens the spread of sixes
  and lowers neither their mean nor their median. Reason 1 is supported only where the added-up costs put the typical
  subset below the average one *and* the observed median/mean ratio's interval lies below 1; an observed skew that
  the added-up costs cannot make comes from how heads combine, not from their inequality.
* **remaining heads adapt** (dynamic): total − direct effect per subset (McGrath et al. 2023, "The Hydra Effect":
  *repair* where the total is below the direct effect, *amplification* where above), split into what the later
  layers' heads add (total − heads-only) and what the feed-forward layers and LayerNorms add (heads-only − direct).
* **noise**: the share of single heads and of subsets whose removal lowers the loss or raises the accuracy.

Intervals: ``ci`` is the 95% bootstrap interval of the median over the subsets (or pairs) drawn (the uncertainty of
the typical value from drawing only some subsets); ``p5``/``p95`` is the spread of the subsets themselves (5-95% of
draws); shares carry a 95% Wilson interval over the draws. A verdict compares an interval with its reference:
wholly on one side gives that side's word, straddling gives "unclear".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mhattn.heads.expectation import bootstrap_interval, subset_sums

TOP = 3  # "the three costliest heads" carry this share of the single costs


@dataclass
class Stat:
    """A sample summarised: its median with the median's 95% bootstrap interval, its 5-95% spread and mean."""

    median: float
    ci: list[float]
    p5: float
    p95: float
    mean: float
    n: int


def stat(values) -> Stat:
    """:class:`Stat` of a finite sample (seeded bootstrap: the same numbers every run)."""
    v = np.asarray(values, dtype=float)
    return Stat(float(np.median(v)), bootstrap_interval(v, np.median), float(np.percentile(v, 5)),
                float(np.percentile(v, 95)), float(v.mean()), int(v.size))  # fmt: skip


@dataclass
class Share:
    """``count`` of ``n`` draws, as a share with its 95% Wilson score interval."""

    count: int
    n: int
    share: float
    ci: list[float]


def share(count: int, n: int, z: float = 1.959964) -> Share:
    """:class:`Share` with the Wilson score interval (Wilson 1927), which stays inside [0, 1] and is not empty at 0."""
    p = count / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Share(int(count), int(n), float(p), [max(0.0, centre - half), min(1.0, centre + half)])


def side(ci, ref: float, below: str, above: str) -> str:
    """``below`` when the interval lies wholly below ``ref``, ``above`` when wholly above, else ``"unclear"``."""
    return below if ci[1] < ref else above if ci[0] > ref else "unclear"


@dataclass
class LayerReasons:
    """Every reason's measure for one layer (loss in nats, accuracy as fractions) and its verdict word."""

    layer: int
    num_layers: int
    n_remove: int
    num_heads: int
    paired: bool
    six_dloss: Stat
    six_dacc: Stat
    naive_dloss: float  # (k/h) Δ(all h of the layer)
    naive_dacc: float
    mean_anchor_dloss: float  # (k/h) Δ(the layer replaced by its mean output)
    mean_anchor_dacc: float
    vs_naive: str  # loss: "less" / "more" / "unclear" than naive
    vs_naive_acc: str  # accuracy lost: "less" / "more" / "unclear" than naive
    vs_mean_anchor: str
    pair_ratio: Stat | None  # (Δ(S) + Δ(S')) / Δ(all) over complement pairs
    pair_ratio_acc: Stat | None
    pairs_below_whole: Share | None  # pairs with Δ(S) + Δ(S') < Δ(all)
    six_over_singles: Stat  # Δ(S) / Σ_{j∈S} c_j
    overlap: str  # "supported" / "not supported" / "unclear" / "not measured"
    top_share: float  # share of Σ max(c_j, 0) carried by the TOP costliest heads
    additive_median_over_mean: float  # the same ratio if single costs added up, over all C(h, k) subsets (exact)
    additive_p5: float  # the spread of the added-up single costs over all C(h, k) subsets
    additive_p95: float
    median_over_mean: Stat  # the typical six against the average six, observed (bootstrap of the ratio)
    typical_cheaper: str  # observed: "supported" / "not supported" / "unclear" (the typical six below the average)
    unequal: str  # "supported" only where added-up unequal costs make the typical six cheaper and so do the data
    indirect: Stat  # total - direct per subset (< 0 repair, > 0 amplification)
    downstream: str  # "repair" / "amplification" / "unclear"
    heads_part: Stat | None  # total - heads-only: what the later layers' heads add (None: no head reads the layer)
    heads_part_share: Stat | None  # ... as a share of the heads-only cost
    heads_lower: Share | None  # subsets whose cost the later heads lower
    heads: str  # "compensate" / "amplify" / "unclear" / "none after"
    rest_part: Stat  # heads-only - direct: what the feed-forward layers and LayerNorms after the removal add
    indirect_acc: Stat  # the same three differences in accuracy (fractions; < 0: the response costs accuracy)
    heads_part_acc: Stat | None
    rest_part_acc: Stat
    rest: str  # "repair" / "amplification" / "unclear"
    singles_lower_loss: Share
    singles_raise_acc: Share
    sixes_lower_loss: Share
    sixes_raise_acc: Share
    best_single_dacc: float  # the largest accuracy change of a single removal (> 0: it raised the accuracy)
    noise: str  # "seen" / "not seen"


def _ratio_stat(v):
    """The typical against the average: median/mean with a bootstrap interval of that ratio."""
    ci = bootstrap_interval(v, lambda x: np.median(x) / np.mean(x))
    r = float(np.median(v) / np.mean(v))
    return Stat(r, ci, r, r, r, int(np.size(v)))


def _pairs(layer):
    """``(ratio in loss, ratio in accuracy, pairs below the whole)`` over complement pairs, or Nones."""
    if not layer["paired"]:
        return None, None, None
    d, a = (np.asarray(layer["sixes"]["total"][k]) for k in ("dloss", "dacc"))
    whole = layer["all"]["total"]
    sums, asums = d[0::2] + d[1::2], a[0::2] + a[1::2]
    return stat(sums / whole["dloss"]), stat(asums / whole["dacc"]), share(int((sums < whole["dloss"]).sum()), sums.size)


def _overlap(pair_ratio, over_singles) -> str:
    """Supported when both forms agree: halves cost less together than the whole, and a six more than its heads'
    single costs added (each interval wholly past 1); the reverse of both: not supported; else unclear."""
    if pair_ratio is None:
        return side(over_singles.ci, 1.0, "not supported", "supported")
    a = side(pair_ratio.ci, 1.0, "supported", "not supported")
    b = side(over_singles.ci, 1.0, "not supported", "supported")
    return a if a == b else "unclear"


def layer_reasons(layer: dict, num_layers: int) -> LayerReasons:
    """:class:`LayerReasons` from :func:`~mhattn.heads.sixes.measure_layer`'s measurements of one layer."""
    k, h = layer["n_remove"], layer["num_heads"]
    six = {lv: {m: np.asarray(v) for m, v in layer["sixes"][lv].items()} for lv in layer["sixes"]}
    total, direct, frozen = six["total"]["dloss"], six["direct"]["dloss"], six["heads-only"]["dloss"]
    c = np.asarray(layer["single"]["total"]["dloss"])
    sums = np.array([c[s].sum() for s in layer["subsets"]])
    whole, mean = layer["all"]["total"], layer["all"].get("mean", layer["all"]["total"])
    d_stat, a_stat = stat(total), stat(six["total"]["dacc"])
    pair_ratio, pair_acc, below = _pairs(layer)
    over = stat(total / sums)
    pos = np.sort(np.clip(c, 0.0, None))[::-1]
    last = layer["layer"] == num_layers - 1
    heads = None if last else stat(total - frozen)
    heads_lower = None if last else share(int((total < frozen).sum()), total.size)
    rest = stat(frozen - direct)
    return LayerReasons(
        layer=layer["layer"], num_layers=num_layers, n_remove=k, num_heads=h, paired=layer["paired"],
        six_dloss=d_stat, six_dacc=a_stat, naive_dloss=k / h * whole["dloss"], naive_dacc=k / h * whole["dacc"],
        mean_anchor_dloss=k / h * mean["dloss"], mean_anchor_dacc=k / h * mean["dacc"],
        vs_naive=side(d_stat.ci, k / h * whole["dloss"], "less", "more"),
        vs_naive_acc=side(a_stat.ci, k / h * whole["dacc"], "more", "less"),
        vs_mean_anchor=side(d_stat.ci, k / h * mean["dloss"], "less", "more"),
        pair_ratio=pair_ratio, pair_ratio_acc=pair_acc, pairs_below_whole=below, six_over_singles=over,
        overlap=_overlap(pair_ratio, over), top_share=float(pos[:TOP].sum() / pos.sum()) if pos.sum() > 0 else 0.0,
        **_additive(c, k), median_over_mean=(mm := _ratio_stat(total)),
        typical_cheaper=(tc := side(mm.ci, 1.0, "supported", "not supported")),
        unequal=_unequal(_additive(c, k)["additive_median_over_mean"], tc),
        indirect=(ind := stat(total - direct)), downstream=side(ind.ci, 0.0, "repair", "amplification"),
        heads_part=heads, heads_part_share=None if last else stat((total - frozen) / frozen), heads_lower=heads_lower,
        heads="none after" if last else side(heads.ci, 0.0, "compensate", "amplify"),
        rest_part=rest, rest=side(rest.ci, 0.0, "repair", "amplification"), **_accuracy_parts(six, last),
        **_noise(layer, six),
    )  # fmt: skip


def _unequal(additive_ratio: float, observed: str) -> str:
    """Reason 1 holds where unequal costs, added up, put the typical subset below the average one (never at k = h/2:
    1e-9 is rounding) and the observed typical subset is cheaper than the average too (its interval below 1)."""
    return "supported" if additive_ratio < 1.0 - 1e-9 and observed == "supported" else "not supported"


def _additive(c, k) -> dict:
    """What unequal single costs alone do to random k-subsets: their sums over all C(h, k) subsets (exact), median
    against mean (equal at k = h/2, where the sums are symmetric: each subset's complement sums to the rest), and the
    spread; ``unequal`` is decided with the observed ratio in :func:`layer_reasons`."""
    sums = subset_sums(c, k, np.random.default_rng(0))
    mean = float(sums.mean())
    ratio = float(np.median(sums) / mean) if mean > 0 else 1.0
    return {"additive_median_over_mean": ratio, "additive_p5": float(np.percentile(sums, 5)),
            "additive_p95": float(np.percentile(sums, 95))}  # fmt: skip


def _accuracy_parts(six, last) -> dict:
    """The levels' differences in accuracy: total - direct, total - heads-only (None after the last layer),
    heads-only - direct."""
    total, frozen, direct = (six[lv]["dacc"] for lv in ("total", "heads-only", "direct"))
    return {"indirect_acc": stat(total - direct), "heads_part_acc": None if last else stat(total - frozen),
            "rest_part_acc": stat(frozen - direct)}  # fmt: skip


def _noise(layer, six) -> dict:
    """Reason 3's counts: single heads and subsets whose removal lowered the loss or raised the accuracy."""
    s = layer["single"]["total"]
    d, a = np.asarray(s["dloss"]), np.asarray(s["dacc"])
    counts = {"singles_lower_loss": share(int((d < 0).sum()), d.size), "singles_raise_acc": share(int((a > 0).sum()), a.size),
              "sixes_lower_loss": share(int((six["total"]["dloss"] < 0).sum()), six["total"]["dloss"].size),
              "sixes_raise_acc": share(int((six["total"]["dacc"] > 0).sum()), six["total"]["dacc"].size)}  # fmt: skip
    seen = counts["singles_lower_loss"].count + counts["sixes_lower_loss"].count > 0
    return {**counts, "best_single_dacc": float(a.max()), "noise": "seen" if seen else "not seen"}


def model_reasons(measurement: dict) -> list[LayerReasons]:
    """:func:`layer_reasons` for every layer of one model's measurement (:func:`~mhattn.heads.sixes.measure_model`)."""
    return [layer_reasons(layer, measurement["num_layers"]) for layer in measurement["layers"]]
