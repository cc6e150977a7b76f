"""How many random subsets does ``mhattn prune`` need? Every k-subset measured once, then sampled.

A 12-head model has only C(12, 6) = 924 ways to remove 6 heads, so the whole population of random
removals can be measured (each subset once, on ``mhattn prune``'s evaluation set). The report's random
statistics are estimates from ``--n-random`` subsets drawn i.i.d. as ``mhattn prune`` draws them; this
script resamples that many from the population many times and prints, for each statistic, the
population value and the 95% range of the estimate, plus in what share of the resamples each
sample-dependent verdict of :func:`mhattn.heads.conclusion.verdicts` holds, computed as it computes them:

* ``less_than_naive``: the upper end of the median's 95% bootstrap interval below the naive expectation;
  ``more_than_additive``: the lower end of the mean's interval above the additive expectation. The
  intervals use :func:`mhattn.heads.expectation.bootstrap_interval`'s own resamples (2000, seed 0), held as
  counts per sample position: a median is read off the cumulative counts in sorted order (the same number
  as ``np.median``), a mean is a product with the counts (equal up to rounding). Each n checks its first
  resample against ``bootstrap_interval`` itself.
* ``about_additive`` (mean within ``ADDITIVE_TOLERANCE``), ``spare_evidence`` (the median excess above
  ``ADDITIVE_TOLERANCE`` x the median single-cost sum, and positive in at least ``SPARE_FRACTION`` of the subsets),
  reason 1 (its premise, the Gini and skew of the single costs, does not depend on the sample; the observed median
  does) and reason 3.

Reason 2 is not resampled: with one layer every head reads only the embeddings, so the frozen-survivors
removal is the same computation as the free one (``HeadMaskEvaluator.evaluate(frozen=True)``), the adaptation
is 0 in every subset and ``reason2_compensation_holds`` fails whatever the sample. For the same reason the
frozen single costs are the single costs, so the frozen excess behind ``spare_evidence`` is the interaction
``Δ(S) - Σ_{j∈S} c_j`` computed here; checkpoints with more layers are refused. It also prints, per job
(classifier), the subsets in which that job's loss jumps by more than ``JOB_JUMP`` and the heads they all remove:
why the head-dropout model's outcomes, and so its median's interval, are bimodal. Not a test (4-5 min for the
two roles checkpoints on one core of a shared 2-core VM):

    python benchmarks/random_subset_precision.py --n 50 100 200 400

Record the printed lines in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np

from mhattn.heads.answers import gini
from mhattn.heads.conclusion import ADDITIVE_TOLERANCE, SPARE_FRACTION, UNEQUAL_GINI
from mhattn.heads.expectation import additive_expectation, bootstrap_interval
from mhattn.heads.importance import ablation_deltas
from mhattn.heads.jobs import settings_for
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import _mask
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

STATS = {
    "mean": np.mean,
    "median": np.median,
    "90th pct": lambda d: np.percentile(d, 90),
    "worst": np.max,
}
N_BOOT, BOOT_SEED, LEVEL = 2000, 0, 0.95  # bootstrap_interval's defaults, as expectation() calls it
JOB_JUMP = 0.3  # nats: a job's loss change counted as a jump (bimodal outcomes, RESULTS.md)


def population(model, task):
    """Every k-subset on the prune evaluation set: ``dloss`` ``(C(L*h, k),)``, ``sums`` (Σ single costs of each
    subset, same shape), ``single`` ``(L*h,)``, ``none`` (L(no heads) - L(all)), ``job_dloss`` (each classifier's
    ``loss/j`` change, ``(C(L*h, k),)`` each), all float64 nats; ``k`` and ``subsets`` ``(C(L*h, k), k)`` int."""
    s = settings_for(task, {})
    L, h = model.cfg.num_layers, model.cfg.num_heads
    if L != 1:
        raise SystemExit(f"one-layer checkpoints only (frozen removals equal free ones only then), got {L} layers")
    data = task.eval_set(s.eval_size)
    ev = HeadMaskEvaluator(model, *data)
    base = ev.evaluate()
    single = np.ravel(ablation_deltas(model, *data, mode="zero", evaluator=ev)[0])
    subsets = np.array(list(itertools.combinations(range(L * h), s.n_remove)))  # (C(L*h, k), k)
    runs = [ev.evaluate(_mask(L, h, sub)) for sub in subsets]
    jobs = sorted(key for key in base if key.startswith("loss/"))  # one loss per classifier (the roles' jobs)
    none = ev.evaluate(np.zeros((L, h)))["loss"] - base["loss"]
    return {"dloss": np.array([r["loss"] - base["loss"] for r in runs]), "sums": single[subsets].sum(axis=1),
            "single": single, "none": none, "k": s.n_remove, "subsets": subsets,
            "job_dloss": {j: np.array([r[j] - base[j] for r in runs]) for j in jobs}}  # fmt: skip


def job_breakers(pop, threshold=JOB_JUMP):
    """For each job: in how many subsets its loss rises by more than ``threshold`` nats, the heads every one of
    them removes, and whether those are exactly the subsets that remove all of these heads."""
    subsets = pop["subsets"]
    removed = np.zeros((len(subsets), pop["single"].size), dtype=bool)  # (C(H, k), H): head j removed in subset i
    removed[np.arange(len(subsets))[:, None], subsets] = True
    lines = []
    for job, dj in pop["job_dloss"].items():
        big = dj > threshold
        common = np.flatnonzero(removed[big].all(axis=0)) if big.any() else np.array([], dtype=int)
        exact = big.any() and np.array_equal(big, removed[:, common].all(axis=1))
        lines.append(f"{job} in {int(big.sum())}, all removing heads {common.tolist()}" + (" (exactly those)" if exact else ""))
    some = np.logical_or.reduce([dj > threshold for dj in pop["job_dloss"].values()]) if lines else np.zeros(0, bool)
    return f"  a job's loss up by more than {threshold} nats: " + "; ".join(lines) + f"; some job: {int(some.sum())}"


def references(pop):
    """The sample-free numbers the verdicts compare with (as :func:`mhattn.heads.expectation.expectation` has them)."""
    single, k = pop["single"], pop["k"]
    additive = additive_expectation(single, k)
    add_median = float(np.median(pop["sums"]))  # every k-subset: subset_sums enumerates them all
    skewed = add_median < (1.0 - ADDITIVE_TOLERANCE) * additive
    return {"naive": k / single.size * pop["none"], "additive": additive, "additive_median": add_median,
            "reason1_premise": bool(gini(single) >= UNEQUAL_GINI and skewed)}  # fmt: skip


def boot_counts(n):
    """``(N_BOOT, n)`` int32: how often each of n sample positions is drawn in each of
    :func:`~mhattn.heads.expectation.bootstrap_interval`'s resamples (same generator, same draws)."""
    idx = np.random.default_rng(BOOT_SEED).integers(0, n, size=(N_BOOT, n))
    counts = np.zeros((N_BOOT, n), dtype=np.int32)
    np.add.at(counts, (np.arange(N_BOOT)[:, None], idx), 1)
    return counts


def median_interval(d, counts):
    """``bootstrap_interval(d, np.median)`` from the counts: each resample's median is read off the cumulative
    counts with ``d`` sorted, the two middle order statistics averaged as ``np.median`` does."""
    n = d.size
    order = np.argsort(d, kind="stable")
    cum = np.cumsum(counts[:, order], axis=1)  # (N_BOOT, n)
    lo, hi = (cum < (n + 1) // 2).sum(axis=1), (cum < n // 2 + 1).sum(axis=1)
    meds = (d[order][lo] + d[order][hi]) / 2
    tail = 100 * (1.0 - LEVEL) / 2
    return np.percentile(meds, [tail, 100 - tail])


def mean_intervals(draws, counts):
    """``(R, 2)``: ``bootstrap_interval(d)`` (the mean's) for each row of ``draws`` ``(R, n)``, as one product."""
    means = draws @ counts.T.astype(float) / draws.shape[1]  # (R, N_BOOT)
    tail = 100 * (1.0 - LEVEL) / 2
    return np.percentile(means, [tail, 100 - tail], axis=1).T


def check_intervals(d, counts):
    """The first resample's intervals against :func:`~mhattn.heads.expectation.bootstrap_interval` itself."""
    if not np.array_equal(median_interval(d, counts), bootstrap_interval(d, np.median)):
        raise AssertionError("median interval differs from bootstrap_interval")
    if not np.allclose(mean_intervals(d[None], counts)[0], bootstrap_interval(d), rtol=1e-12, atol=0.0):
        raise AssertionError("mean interval differs from bootstrap_interval")


def held(draws, inter, median_hi, mean_lo, ref):
    """Each verdict per row of ``draws`` ``(R, n)`` (loss changes) and ``inter`` (their Δ(S) - Σ c_j), as
    :func:`mhattn.heads.conclusion.verdicts` decides it; ``median_hi``/``mean_lo`` ``(R,)``: the interval ends."""
    mean, median, add = draws.mean(axis=1), np.median(draws, axis=1), ref["additive"]
    ratio = mean / add if add > 0 else np.full(mean.shape, math.inf)  # observed_mean_over_additive
    close = np.abs(median - ref["additive_median"]) <= ADDITIVE_TOLERANCE * abs(ref["additive_median"])
    clear = np.median(inter, axis=1) > ADDITIVE_TOLERANCE * np.abs(np.median(draws - inter, axis=1))  # conclusion.spare
    return {
        "less_than_naive": median_hi < ref["naive"],
        "more_than_additive": mean_lo > add,
        "about_additive": np.abs(ratio - 1.0) <= ADDITIVE_TOLERANCE,
        "spare_evidence": clear & ((inter > 0).mean(axis=1) >= SPARE_FRACTION),
        "reason1_unequal_explains": ref["reason1_premise"] & close,
        "reason3_noise_holds": (draws < 0).any(axis=1),
    }


def verdict_shares(pop, ref, pick):
    """Share of the resamples ``pick`` ``(R, n)`` (indices into the population) in which each verdict holds, and
    the typical intervals: the median over resamples of each end of the median's and the mean's 95% interval."""
    draws, inter = pop["dloss"][pick], (pop["dloss"] - pop["sums"])[pick]
    counts = boot_counts(pick.shape[1])
    check_intervals(draws[0], counts)
    median_ci = np.array([median_interval(d, counts) for d in draws])  # (R, 2)
    mean_ci = mean_intervals(draws, counts)  # (R, 2)
    shares = {name: float(v.mean()) for name, v in held(draws, inter, median_ci[:, 1], mean_ci[:, 0], ref).items()}
    return shares, {"median": np.median(median_ci, axis=0), "mean": np.median(mean_ci, axis=0)}


def report_model(name, rng, ns, resamples):
    """Measure one checkpoint's population and print its statistics and verdict shares for each n."""
    model, meta = load_checkpoint(name)
    t0 = time.perf_counter()
    pop = population(model, task_from_meta(meta["task"]))
    ref, dloss = references(pop), pop["dloss"]
    print(f"{name}: all {dloss.size} subsets of {pop['k']} of {pop['single'].size} heads measured in "
          f"{time.perf_counter() - t0:.0f} s; naive expectation {ref['naive']:+.3f}, additive {ref['additive']:+.3f}, "
          f"additive median {ref['additive_median']:+.3f}")  # fmt: skip
    print("  population: " + ", ".join(f"{s} {f(dloss):+.3f}" for s, f in STATS.items())
          + f"; lowering the loss {int((dloss < 0).sum())} of {dloss.size}")  # fmt: skip
    print("  population deciles: " + ", ".join(f"{q:+.3f}" for q in np.percentile(dloss, range(10, 100, 10))))
    print(job_breakers(pop))
    whole = held(dloss[None], (dloss - pop["sums"])[None], np.median(dloss)[None], dloss.mean()[None], ref)
    print("  verdicts on the population (point values): " + ", ".join(f"{v} {bool(b[0])}" for v, b in whole.items()))
    for n in ns:
        report_n(pop, ref, rng.integers(0, dloss.size, size=(resamples, n)))  # i.i.d. uniform subsets, as prune draws


def report_n(pop, ref, pick):
    """Print the 95% ranges of the statistics and the verdict shares over the resamples ``pick`` ``(R, n)``."""
    t0, draws = time.perf_counter(), pop["dloss"][pick]
    ranges = []
    for s, f in STATS.items():
        lo, hi = np.percentile([f(d) for d in draws], [2.5, 97.5])
        ranges.append(f"{s} {lo:+.3f}..{hi:+.3f}")
    shares, typical = verdict_shares(pop, ref, pick)
    cis = ", ".join(f"{s} [{lo:+.3f}, {hi:+.3f}]" for s, (lo, hi) in typical.items())
    holds = ", ".join(f"{v} in {p:.1%}" for v, p in shares.items())
    print(f"  n={pick.shape[1]} ({time.perf_counter() - t0:.0f} s): 95% of estimates: {', '.join(ranges)}; "
          f"typical 95% bootstrap interval: {cis}; holds: {holds}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[50, 100, 200, 400], help="subset counts to try")
    p.add_argument("--resamples", type=int, default=4000, help="draws of n subsets per count")
    p.add_argument("--checkpoint", action="append", default=None, help="default: the two roles checkpoints")
    args = p.parse_args()
    rng = np.random.default_rng(1)
    for name in args.checkpoint or ["roles-plain", "roles-headdropout"]:
        report_model(name, rng, args.n, args.resamples)


if __name__ == "__main__":
    main()
