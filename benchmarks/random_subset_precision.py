"""How many random subsets does ``mhattn prune`` need? Every k-subset measured once, then sampled.

A 12-head model has only C(12, 6) = 924 ways to remove 6 heads, so the whole population of random
removals can be measured (each subset once, on ``mhattn prune``'s evaluation set). The report's random
statistics are estimates from ``--n-random`` subsets drawn i.i.d. as ``mhattn prune`` draws them; this
script resamples that many from the population many times and prints, for each statistic, the
population value and the 95% range of the estimate, plus how often each conclusion of the report
(median below the naive expectation, mean above the additive one, some removal lowering the loss)
comes out as it does on the whole population. Not a test (about 90 s for the two roles checkpoints
on one core):

    python benchmarks/random_subset_precision.py --n 50 100 200 400

Record the printed lines in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from mhattn.commands.prune_jobs import settings_for
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
            below_naive = np.mean(np.median(draws, axis=1) < naive)
            above_additive = np.mean(draws.mean(axis=1) > additive)
            some_lower = np.mean((draws < 0).any(axis=1))
            print(f"  n={n}: 95% of estimates: " + ", ".join(ranges)
                  + f"; median < naive in {below_naive:.1%}, mean > additive in {above_additive:.1%}, "
                  f"some removal lowers the loss in {some_lower:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
