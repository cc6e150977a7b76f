"""The course's question as asked, on a deep model: six of the twelve heads of one layer removed at random.

For each training seed of the ``text-deep12`` recipe (4 layers x 12 heads, d_k 8; seed 0 is the shipped
``mhattn/data/text-deep12.npz``, the others are trained into ``--checkpoints`` when missing, a few minutes each on
2 cores) this runs, on the validation windows ``mhattn prune --task text-deep12`` uses (``eval_set(256)``):

* for each layer, what ``mhattn prune --task text-deep12 --layer L`` runs: ``--random`` random sixes of that
  layer's twelve heads (the other layers keep all theirs), each with the surviving heads free (total effect), with
  them frozen (heads-only) and with everything downstream frozen (direct effect), single-head costs at the same
  three levels, the pruning curve within the layer and a brief fine-tuning;
* the second question, half of all 48 heads from any layers (``mhattn prune --task text-deep12 --layer none
  --remove 24 --n-random 100``).

Writes ``mhattn/data/text-deep12-pruning.json`` (notebook 07 reads it; ``tests/lib/test_deep12.py`` re-computes a
slice of seed 0)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/deep12_pruning.py --seeds 0      # one seed per process, in parallel
    python benchmarks/deep12_pruning.py --merge build/deep12-seed0.json build/deep12-seed1.json ...
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from deep_pruning import checkpoint_for  # this folder: the script runs as a file

from mhattn.heads.jobs import settings_for
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import run_prune
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint, shipped_path
from mhattn.training.recipes import RECIPES
from mhattn.training.tasks import task_from_meta
from mhattn.training.textdata import text_sha256

OUT = DATA_DIR / "text-deep12-pruning.json"
LAYER = {"n_remove": 6, "n_random": 200, "gate_steps": 0}  # per layer: the command's other defaults
HALF = {"n_remove": 24, "gate_steps": 0}


def measure(seed, folder):
    """Every layer's six-of-twelve experiment and the half-of-all-heads one, for one training seed."""
    model, meta = load_checkpoint(checkpoint_for(seed, folder, "text-deep12"))
    task = task_from_meta(meta["task"])
    s0 = settings_for(task, LAYER)
    ev = HeadMaskEvaluator(model, *task.eval_set(s0.eval_size))  # shared by the layers: single costs computed once
    out = {"seed": seed, "training_seconds": meta["training"]["seconds"], "val": meta["training"]["val"], "layers": []}
    t0 = time.perf_counter()
    for layer in range(model.cfg.num_layers):
        out["layers"].append(
            run_prune(model, task, settings_for(task, {**LAYER, "layer": layer}), gates=False, evaluator=ev, direct=True)
        )
        print(f"seed {seed} layer {layer}: {time.perf_counter() - t0:.0f} s", flush=True)
    out["half"] = run_prune(model, task, settings_for(task, HALF), gates=False, evaluator=ev, direct=True)
    out["measure_seconds"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--checkpoints", default="build/text-deep12-seeds", help="folder for the seeds other than 0")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--merge", nargs="+", metavar="SEED_FILE", help="join files written with --seed-out into --out")
    p.add_argument("--seed-out", help="write only the measured seeds, to this file")
    args = p.parse_args()
    if args.merge:
        seeds = sorted((s for f in args.merge for s in json.loads(Path(f).read_text())), key=lambda s: s["seed"])
        _, meta = load_checkpoint(shipped_path("text-deep12"))
        result = {"recipe": RECIPES["text-deep12"], "task": meta["task"], "text_sha256": text_sha256(), "layer": LAYER,
                  "half": HALF, "seeds": seeds}  # fmt: skip
        Path(args.out).write_text(json.dumps(result) + "\n")  # compact: it ships in the wheel
        print(f"wrote {args.out}")
        return
    seeds = [measure(s, args.checkpoints) for s in args.seeds]
    Path(args.seed_out or args.out).write_text(json.dumps(seeds) + "\n")


if __name__ == "__main__":
    main()
