"""How much does brief fine-tuning win back, step by step? The evidence for ``mhattn prune``'s 100 fine-tuning steps.

For each shipped checkpoint, removes the median random subset exactly as ``mhattn prune`` does (same seed,
evaluation set and random subsets), fine-tunes for each of ``--steps`` (separate runs: the learning-rate
schedule depends on the step count) and prints the recovered fraction of the loss increase. Not a test
(about 2 minutes for the two roles checkpoints on 2 cores):

    python benchmarks/finetune_convergence.py --steps 50 100 150 200

Record the printed lines in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mhattn.heads.jobs import settings_for
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import finetune_recovery, random_removals
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta


def median_subset(model, task, s):
    """``(data, evaluator, base, removed)``: the median random removal of ``run_prune`` with settings ``s``."""
    data = task.eval_set(s.eval_size)
    ev = HeadMaskEvaluator(model, *data)
    base = ev.evaluate()
    # run_prune draws the random subsets first from default_rng(seed); nothing before them uses the generator
    rand = random_removals(model, data, base, s.n_remove, s.n_random, np.random.default_rng(s.seed), evaluator=ev)
    return data, ev, base, rand["subsets"][int(np.argsort(rand["dloss"])[len(rand["dloss"]) // 2])]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, nargs="+", default=[50, 100, 150, 200], help="fine-tuning step counts to try")
    p.add_argument("--checkpoint", action="append", default=None, help="default: the two roles checkpoints")
    args = p.parse_args()
    for name in args.checkpoint or ["roles-plain", "roles-headdropout"]:
        model, meta = load_checkpoint(name)
        task = task_from_meta(meta["task"])
        s = settings_for(task, {})  # mhattn prune's defaults for this task
        data, ev, base, removed = median_subset(model, task, s)
        for steps in args.steps:
            t0 = time.perf_counter()
            f = finetune_recovery(model, task, data, base, removed, steps, s.seed, evaluator=ev)
            print(f"{name}: {steps} steps: loss {f['loss_pruned']:.4f} -> {f['loss_after_finetune']:.4f}, "
                  f"recovered {f['recovered_fraction']:.3f}, accuracy {f['acc_after_finetune']:.4f} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
