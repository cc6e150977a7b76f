"""The course's shipped pruning data: ``mhattn/data/sixes.json`` (notebook 07 reads it; ``mhattn prune`` reads the
other seeds' figures from it for the seed-to-seed range).

What it holds, each measured by :func:`mhattn.heads.sixes.measure_model` with :class:`~mhattn.heads.sixes.SixesSettings`'s
defaults, exactly as ``mhattn prune`` measures (so seed 0's numbers are the command's):

* ``text-deep12`` (4 layers x 12 heads, d_k 8), training seeds 0, 1 and 2 (seed 0 is the shipped checkpoint; the
  others are trained into ``--checkpoints`` when missing, about three minutes each on 2 cores): every layer's sixes;
  and the second question, half of all 48 heads from any layers (:func:`mhattn.heads.sixes.measure_half`);
* the two one-layer toys, ``roles-plain`` and ``roles-headdropout`` (``mhattn prune --task roles``).

    python benchmarks/sixes_data.py            # all of it: about ten minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from deep_pruning import checkpoint_for  # this folder: the script runs as a file

from mhattn.heads.sixes import SixesSettings, measure_half, measure_model
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint
from mhattn.training.recipes import RECIPES
from mhattn.training.tasks import task_from_meta
from mhattn.training.textdata import text_sha256

OUT = DATA_DIR / "sixes.json"


def one(path, settings, half=False):
    """The measurement of one checkpoint file, with its training record (and the second question with ``half``)."""
    model, meta = load_checkpoint(path)
    task = task_from_meta(meta["task"])
    t0 = time.perf_counter()
    out = measure_model(model, task, settings)
    out["training"] = {k: meta["training"][k] for k in ("seconds", "steps", "val") if k in meta["training"]}
    if half:
        out["half"] = measure_half(model, task, settings)
    out["measure_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"{path}: {out['measure_seconds']} s", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--checkpoints", default="build/text-deep12-seeds", help="folder for the seeds other than 0")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args()
    s = SixesSettings()
    deep = {str(seed): one(checkpoint_for(seed, args.checkpoints, "text-deep12"), s, half=True) for seed in args.seeds}
    toys = {name: one(name, s) for name in ("roles-plain", "roles-headdropout")}
    result = {"format": "mhattn-sixes", "version": 1, "settings": vars(s) if hasattr(s, "__dict__") else s,
              "text_sha256": text_sha256(), "recipe": RECIPES["text-deep12"], "text-deep12": deep, "toys": toys}  # fmt: skip
    Path(args.out).write_text(json.dumps(result) + "\n")  # compact: it ships in the wheel
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
