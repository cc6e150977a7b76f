"""What "expected" means when k of h heads are removed at random, and how the measured losses compare.

Two expectations for the loss change ``Δ(S) = L(heads S removed) - L(all heads)`` of a random
k-subset S (each of the ``C(h, k)`` subsets equally likely):

* **additive**: if single-head costs ``c_j = Δ({j})`` simply added up, ``Δ(S) = Σ_{j∈S} c_j``.
  Every head lies in a fraction k/h of the subsets, so ``E[Δ] = (k/h) Σ_j c_j`` *however unequal
  the c_j are*: inequality widens the spread of ``Σ_{j∈S} c_j`` (and pulls its median below its
  mean when a few costs are large), never its mean.
* **naive** ("half the heads, half the ability"): the loss moves the fraction k/h of the way from
  all heads to no heads, ``E[Δ] = (k/h) (L(no heads) - L(all heads))``; accuracy likewise.

The sign of ``Δ(S) - Σ_{j∈S} c_j`` tells how heads combine. Positive (superadditive): a head costs
more once others are gone. "Less than naive" is the same kind of fact at a larger scale: if every
half S and its complement S' satisfy ``Δ(S) + Δ(S') <= Δ(all)`` (halves superadditive against the
whole), the mean random half costs at most ``Δ(all)/2``, the naive reading. Superadditivity against
single heads does not imply it, nor the reverse; :mod:`mhattn.heads.reasons` measures both over complement pairs
(in the shipped 4 x 12-head model every layer has both). Two
mechanisms make heads superadditive, and one measurement tells them apart: *spare evidence* (the
rest of the network, LayerNorm, feed-forward and softmax, needs only part of what the heads provide,
as a model whose loss is near zero does) and *compensation* (surviving heads change what they do
when others are gone). Freezing every surviving head's output at its all-heads value removes
compensation and keeps spare evidence: the ``frozen_*`` fields are the superadditivity left then, the
``adaptation_*`` fields what the survivors' changes add (negative: they lowered the cost). Negative
(subadditive): the heads' costs overlap, as when several heads are each needed for the same job.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

CHEAP_FRACTION = 0.5  # a removal is "cheap" below this fraction of the mean random removal (the course's choice)
MAX_EXACT_SUBSETS = 200_000  # above this many k-subsets the sum distribution is sampled, not enumerated


def additive_expectation(single_costs, k):
    """``(k/h) Σ_j c_j``: the mean loss change over random k-subsets if single costs added up.

    Args:
        single_costs: ``(h,)`` or ``(L, h)`` single-ablation loss changes in nats (NaN not allowed).
        k: heads removed, ``0 <= k <= h``.

    Raises:
        ValueError: ``k`` outside ``0..h`` or non-finite costs.
    """
    c = _costs(single_costs, k)
    return float(k / c.size * c.sum())


def naive_expectation(base, none, k, h):
    """``base + (k/h) (none - base)``: "half the heads, half the ability" for a loss or an accuracy."""
    if not 0 <= k <= h:
        raise ValueError(f"k={k} must be between 0 and h={h}")
    return float(base + k / h * (none - base))


def subset_sums(single_costs, k, rng=None, n_samples=100_000):
    """``Σ_{j∈S} c_j`` for every k-subset S (exact), or for ``n_samples`` random ones when there are
    more than :data:`MAX_EXACT_SUBSETS` subsets (``rng`` then required).

    Returns:
        ``(C(h, k),)`` or ``(n_samples,)`` float64 array; its mean is :func:`additive_expectation`
        exactly when enumerated (each head is in a fraction k/h of the subsets).
    """
    c = _costs(single_costs, k)
    if math.comb(c.size, k) <= MAX_EXACT_SUBSETS:
        idx = np.array(list(itertools.combinations(range(c.size), k)), dtype=int).reshape(-1, k)  # (C(h,k), k)
        return c[idx].sum(axis=1)
    if rng is None:
        raise ValueError(f"C({c.size}, {k}) > {MAX_EXACT_SUBSETS} subsets: pass rng to sample them")
    idx = np.argsort(rng.random((n_samples, c.size)), axis=1)[:, :k]  # (n_samples, k) uniform k-subsets
    return c[idx].sum(axis=1)


def p_miss_costliest(h, k, c):
    """``C(h - c, k) / C(h, k)``: the chance that a random k-subset misses all of the c costliest heads."""
    if not (0 <= k <= h and 0 <= c <= h):
        raise ValueError(f"need 0 <= k={k} <= h={h} and 0 <= c={c} <= h")
    return math.comb(h - c, k) / math.comb(h, k)


def interactions(subsets, joint_dloss, single_costs):
    """``Δ(S) - Σ_{j∈S} c_j`` for each measured subset: ``(n,)`` nats (> 0 superadditive)."""
    c = np.ravel(np.asarray(single_costs, dtype=float))
    return np.asarray(joint_dloss, dtype=float) - np.array([c[list(s)].sum() for s in subsets])


def bootstrap_interval(values, statistic=np.mean, n_resamples=2000, level=0.95, seed=0):
    """``[low, high]``: the central ``level`` interval of ``statistic`` over bootstrap resamples of ``values``.

    The spread of a quantity measured on a sample (here random subsets of heads): resample the n values with
    replacement ``n_resamples`` times (seeded, so the same numbers every run) and take the percentiles.

    Raises:
        ValueError: ``values`` empty or not finite, ``level`` outside (0, 1), or ``n_resamples`` below 1.
    """
    if not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    v = np.ravel(np.asarray(values, dtype=float))
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"values must be a non-empty finite sample, got {v.size} values")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    idx = np.random.default_rng(seed).integers(0, v.size, size=(n_resamples, v.size))  # (n_resamples, n)
    stats = np.array([statistic(v[row]) for row in idx])
    tail = 100 * (1.0 - level) / 2
    return [float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail))]


def _costs(single_costs, k):
    c = np.ravel(np.asarray(single_costs, dtype=float))
    if not np.all(np.isfinite(c)):
        raise ValueError("single_costs must be finite (a NaN marks a head already pruned)")
    if not 0 <= k <= c.size:
        raise ValueError(f"k={k} must be between 0 and h={c.size}")
    return c


def _no_heads(curve):
    """Loss and accuracy with every head removed: the pruning curve's last point (fraction 1.0)."""
    if curve["fraction_removed"][-1] != 1.0:
        raise ValueError(f"the pruning curve must end at fraction 1.0, got {curve['fraction_removed'][-1]}")
    return {"loss": curve["importance_loss"][-1], "acc": curve["importance_acc"][-1]}


@dataclass
class Expectation:
    """Observed random-removal outcomes against both expectations (nats; accuracy as a fraction)."""

    n_heads: int
    n_remove: int
    sum_single_dloss: float  # Σ_j c_j
    additive_expected_dloss: float  # (k/h) Σ_j c_j
    additive_median_dloss: float  # median of Σ_{j∈S} c_j over all k-subsets
    additive_std_dloss: float  # its spread; 0 if all c_j were equal
    additive_p90_dloss: float
    no_heads_dloss: float  # L(no heads) - L(all heads)
    no_heads_acc: float
    naive_expected_dloss: float  # (k/h) (L(no heads) - L(all heads))
    naive_expected_acc: float
    baseline_acc: float
    observed_dloss_mean: float
    observed_dloss_mean_ci: list[float]  # 95% bootstrap interval of the mean over the random subsets
    observed_dloss_median: float
    observed_dloss_median_ci: list[float]  # likewise for the median
    observed_dloss_p10: float
    observed_dloss_p90: float
    observed_dloss_worst: float
    observed_acc_median: float  # accuracy left after a median random removal
    most_important_removed_dloss: float  # the k heads of highest Michel importance removed together
    observed_mean_over_additive: float
    observed_median_over_naive: float
    interaction_median: float  # median over subsets of Δ(S) - Σ_{j∈S} c_j
    fraction_superadditive: float  # subsets with Δ(S) > Σ_{j∈S} c_j
    top2_share: float  # share of Σ c_j carried by the two costliest heads
    p_random_misses_top2: float  # C(h-2, k) / C(h, k)
    # the same subsets with every surviving head's output frozen (no head can change what it does)
    frozen_dloss_median: float
    frozen_single_sum_median: float  # median over subsets of Σ_{j∈S} c_j^frozen
    frozen_excess_median: float  # Δ_frozen(S) - Σ_{j∈S} c_j^frozen: > 0 = superadditive with the survivors fixed
    frozen_excess_p10: float
    frozen_excess_p90: float
    fraction_frozen_superadditive: float
    adaptation_median: float  # Δ(S) - Δ_frozen(S): < 0 = the survivors' changes lowered the cost (compensation)
    adaptation_p10: float
    adaptation_p90: float
    fraction_adaptation_lowers: float  # subsets with Δ(S) < Δ_frozen(S)
    adaptation_max_abs: float  # 0 when no subset's loss changed with the survivors freed (always so with one layer)
    # the same comparisons in accuracy (a fraction; dacc < 0 = worse), as the question may mean either measure
    additive_expected_dacc: float  # (k/h) Σ_j a_j, a_j = single-ablation accuracy change
    naive_expected_dacc: float  # (k/h) (acc(no heads) - acc(all heads))
    observed_dacc_mean: float
    observed_dacc_mean_ci: list[float]
    observed_dacc_median: float
    observed_dacc_median_ci: list[float]
    fraction_dloss_below_naive: float  # random removals that cost less loss than the naive reading
    fraction_dacc_above_naive: float  # random removals that keep more accuracy than the naive reading
    # reason 1 in its stated form, "a random six mostly removes heads that did little": how skewed the real costs are
    observed_median_over_mean: float  # < 1: a typical removal costs less than the average one
    fraction_cheap: float  # removals costing less than CHEAP_FRACTION x the mean removal
    # three levels of freezing (mhattn.heads.effects), when measured (None otherwise): direct effect (everything
    # downstream of the removed heads frozen), heads-only (the surviving heads frozen), total (nothing frozen)
    direct_dloss_median: float | None = None
    direct_excess_median: float | None = None  # Δ_direct(S) - Σ_{j∈S} c_j^direct: > 0 = superadditive at the output
    fraction_direct_superadditive: float | None = None
    downstream_median: float | None = None  # Δ_heads-only(S) - Δ_direct(S): what the layers after the removal add
    downstream_p10: float | None = None
    downstream_p90: float | None = None
    fraction_downstream_lowers: float | None = None  # subsets whose cost the downstream layers lower (self-repair)


def expectation(details):
    """:class:`Expectation` from :func:`~mhattn.heads.prune.run_prune`'s measurements (``details``)."""
    c = np.ravel(np.asarray(details["ablation_zero_dloss"], dtype=float))
    k, h = details["settings"]["n_remove"], c.size
    base, none = details["baseline"], _no_heads(details["curve"])
    rnd, acc = np.asarray(details["random"]["dloss"]), np.asarray(details["random"]["dacc"])
    sums, inter = subset_sums(c, k, np.random.default_rng(0)), interactions(details["random"]["subsets"], rnd, c)
    frozen = _frozen(details, rnd)
    pos = np.sort(np.clip(c, 0.0, None))[::-1]
    add, naive = additive_expectation(c, k), naive_expectation(0.0, none["loss"] - base["loss"], k, h)
    return Expectation(
        n_heads=h, n_remove=k, sum_single_dloss=float(c.sum()), additive_expected_dloss=add,
        additive_median_dloss=float(np.median(sums)), additive_std_dloss=float(sums.std()),
        additive_p90_dloss=float(np.percentile(sums, 90)),
        no_heads_dloss=none["loss"] - base["loss"], no_heads_acc=none["acc"], naive_expected_dloss=naive,
        naive_expected_acc=naive_expectation(base["acc"], none["acc"], k, h), baseline_acc=base["acc"],
        observed_dloss_mean=float(rnd.mean()), observed_dloss_mean_ci=bootstrap_interval(rnd),
        observed_dloss_median=float(np.median(rnd)), observed_dloss_median_ci=bootstrap_interval(rnd, np.median),
        observed_dloss_p10=float(np.percentile(rnd, 10)),
        observed_dloss_p90=float(np.percentile(rnd, 90)), observed_dloss_worst=float(rnd.max()),
        observed_acc_median=float(base["acc"] + np.median(acc)),
        most_important_removed_dloss=details["most_important"]["loss"] - base["loss"],
        observed_mean_over_additive=float(rnd.mean() / add) if add > 0 else math.inf,
        observed_median_over_naive=float(np.median(rnd) / naive) if naive > 0 else math.inf,
        interaction_median=float(np.median(inter)), fraction_superadditive=float((inter > 0).mean()),
        top2_share=float(pos[:2].sum() / pos.sum()) if pos.sum() > 0 else 0.0,
        p_random_misses_top2=p_miss_costliest(h, k, min(2, h)), **frozen, **_accuracy(details, k, h, naive),
        **_direct(details),
    )  # fmt: skip


def _direct(details):
    """The direct-effect fields of :class:`Expectation` (empty when ``details`` has no direct-effect measurement)."""
    if "direct_dloss" not in details["random"]:
        return {}
    direct, frozen = np.asarray(details["random"]["direct_dloss"]), np.asarray(details["random"]["frozen_dloss"])
    excess = interactions(details["random"]["subsets"], direct, details["ablation_direct_dloss"])
    down = frozen - direct
    return dict(
        direct_dloss_median=float(np.median(direct)), direct_excess_median=float(np.median(excess)),
        fraction_direct_superadditive=float((excess > 0).mean()), downstream_median=float(np.median(down)),
        downstream_p10=float(np.percentile(down, 10)), downstream_p90=float(np.percentile(down, 90)),
        fraction_downstream_lowers=float((down < 0).mean()),
    )  # fmt: skip


def _accuracy(details, k, h, naive_dloss):
    """The accuracy fields of :class:`Expectation`, and how skewed the observed loss changes are."""
    rnd, acc = np.asarray(details["random"]["dloss"], dtype=float), np.asarray(details["random"]["dacc"], dtype=float)
    base, none = details["baseline"]["acc"], _no_heads(details["curve"])["acc"]
    naive = naive_expectation(0.0, none - base, k, h)
    single = np.ravel(np.asarray(details["ablation_zero_dacc"], dtype=float))
    return dict(
        additive_expected_dacc=float(k / h * single.sum()), naive_expected_dacc=naive,
        observed_dacc_mean=float(acc.mean()), observed_dacc_mean_ci=bootstrap_interval(acc),
        observed_dacc_median=float(np.median(acc)), observed_dacc_median_ci=bootstrap_interval(acc, np.median),
        fraction_dloss_below_naive=float((rnd < naive_dloss).mean()), fraction_dacc_above_naive=float((acc > naive).mean()),
        observed_median_over_mean=float(np.median(rnd) / rnd.mean()) if rnd.mean() > 0 else math.nan,
        fraction_cheap=float((rnd < CHEAP_FRACTION * rnd.mean()).mean()),
    )  # fmt: skip


def _frozen(details, rnd):
    """The frozen-survivor fields of :class:`Expectation`: the superadditivity left when no surviving head can
    change (``frozen_excess``) and what the survivors' changes add (``adaptation``), over the random subsets."""
    fr = np.asarray(details["random"]["frozen_dloss"], dtype=float)
    excess = interactions(details["random"]["subsets"], fr, details["ablation_frozen_dloss"])
    adapt = rnd - fr
    pct = lambda x, q: float(np.percentile(x, q))  # noqa: E731
    return dict(
        frozen_dloss_median=float(np.median(fr)), frozen_single_sum_median=float(np.median(fr - excess)),
        frozen_excess_median=float(np.median(excess)),
        frozen_excess_p10=pct(excess, 10), frozen_excess_p90=pct(excess, 90),
        fraction_frozen_superadditive=float((excess > 0).mean()), adaptation_median=float(np.median(adapt)),
        adaptation_p10=pct(adapt, 10), adaptation_p90=pct(adapt, 90), fraction_adaptation_lowers=float((adapt < 0).mean()),
        adaptation_max_abs=float(np.abs(adapt).max()),
    )  # fmt: skip
