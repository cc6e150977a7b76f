"""When do the hard-concrete gates settle? The evidence for ``mhattn prune``'s default of 200 gate steps.

For each shipped checkpoint, trains the gates as ``mhattn prune`` does (same seed, λ, learning rates) for
``--steps`` steps and prints the step after which the test-time gates no longer changed, with the gates
at that point and at the end. Not a test (about 1.5 minutes for the three checkpoints on 2 cores):

    python benchmarks/gate_convergence.py --steps 300

Record the printed lines in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import time

from mhattn.heads.gates import train_gates
from mhattn.heads.prune import PruneSettings, copy_model
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="gate steps to train (the old default was 300)")
    p.add_argument("--checkpoint", action="append", default=None, help="default: the three shipped checkpoints")
    args = p.parse_args()
    s = PruneSettings()
    for name in args.checkpoint or ["roles-plain", "roles-headdropout", "text"]:
        model, meta = load_checkpoint(name)
        t0 = time.perf_counter()
        g = train_gates(copy_model(model), task_from_meta(meta["task"]), l0_lambda=s.l0_lambda, steps=args.steps, seed=s.seed)
        print(f"{name}: test-time gates settled after step {g['settled_at']} of {args.steps}; open {g['open']} "
              f"{g['gates'].ravel().round(3).tolist()} ({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
