"""How many random subsets does ``mhattn prune`` need? Every k-subset measured once, then sampled.

A 12-head model has only C(12, 6) = 924 ways to remove 6 heads, so the whole population of random
removals can be measured (each subset once, on ``mhattn prune``'s evaluation set). The report's random
statistics are estimates from ``--n-random`` subsets drawn i.i.d. as ``mhattn prune`` draws them; this
script resamples that many from the population many times and prints, for each statistic, the
population value and the 95% range of the estimate, plus in what share of the resamples each
sample-dependent comparison behind the report's verdicts (:func:`mhattn.heads.conclusion.verdicts`)
holds. Not a test (about 90 s for the two roles checkpoints on one core):

    python benchmarks/random_subset_precision.py --n 50 100 200 400

Record the printed lines in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from mhattn.commands.prune_jobs import settings_for
from mhattn.heads.conclusion import ADDITIVE_TOLERANCE, SMALL_FRACTION_OF_NAIVE
from mhattn.heads.expectation import additive_expectation
from mhattn.heads.importance import ablation_deltas
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


def verdict_tests(naive, additive):
    """The sample-dependent comparisons behind the report's verdicts (:func:`mhattn.heads.conclusion.verdicts`),
    each a function of ``draws`` ``(resamples, n)`` giving one bool per resample."""
    return {
        "median < naive": lambda d: np.median(d, axis=1) < naive,
        "mean > additive": lambda d: d.mean(axis=1) > additive,
        "mean about additive": lambda d: np.abs(d.mean(axis=1) / additive - 1.0) <= ADDITIVE_TOLERANCE,
        f"median < {SMALL_FRACTION_OF_NAIVE} x naive (reason 2)": lambda d: (
            np.median(d, axis=1) < SMALL_FRACTION_OF_NAIVE * naive
        ),
        "some removal lowers the loss (reason 3)": lambda d: (d < 0).any(axis=1),
    }


def population(model, task):
    """``(dloss of every k-subset (n,), single costs (L*h,), L(no heads) - L(all), k)`` on the prune evaluation set."""
    s = settings_for(task, {})
    L, h = model.cfg.num_layers, model.cfg.num_heads
    data = task.eval_set(s.eval_size)
    ev = HeadMaskEvaluator(model, *data)
    base = ev.evaluate()
    single, _ = ablation_deltas(model, *data, mode="zero", evaluator=ev)
    subsets = list(itertools.combinations(range(L * h), s.n_remove))
    dloss = np.array([ev.evaluate(_mask(L, h, sub))["loss"] - base["loss"] for sub in subsets])
    none = ev.evaluate(np.zeros((L, h)))["loss"] - base["loss"]
    return dloss, np.ravel(single), none, s.n_remove


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[50, 100, 200, 400], help="subset counts to try")
    p.add_argument("--resamples", type=int, default=4000, help="draws of n subsets per count")
    p.add_argument("--checkpoint", action="append", default=None, help="default: the two roles checkpoints")
    args = p.parse_args()
    rng = np.random.default_rng(1)
    for name in args.checkpoint or ["roles-plain", "roles-headdropout"]:
        model, meta = load_checkpoint(name)
        t0 = time.perf_counter()
        pop, single, none, k = population(model, task_from_meta(meta["task"]))
        H = single.size
        naive, additive = k / H * none, additive_expectation(single, k)
        print(f"{name}: all {pop.size} subsets of {k} of {H} heads measured in {time.perf_counter() - t0:.0f} s; "
              f"naive expectation {naive:+.3f}, additive {additive:+.3f}")  # fmt: skip
        print("  population: " + ", ".join(f"{s} {f(pop):+.3f}" for s, f in STATS.items())
              + f"; lowering the loss {int((pop < 0).sum())} of {pop.size}")  # fmt: skip
        print("  population deciles: " + ", ".join(f"{q:+.3f}" for q in np.percentile(pop, range(10, 100, 10))))
        for n in args.n:
            draws = pop[rng.integers(0, pop.size, size=(args.resamples, n))]  # i.i.d. uniform subsets, as prune draws
            ranges = []
            for s, f in STATS.items():
                est = np.array([f(d) for d in draws])
                lo, hi = np.percentile(est, [2.5, 97.5])
                ranges.append(f"{s} {lo:+.3f}..{hi:+.3f}")
            verdicts = ", ".join(f"{v} in {np.mean(test(draws)):.1%}" for v, test in verdict_tests(naive, additive).items())
            print(f"  n={n}: 95% of estimates: " + ", ".join(ranges) + f"; {verdicts}")


if __name__ == "__main__":
    main()
