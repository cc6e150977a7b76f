"""Notebook 06's slow measurements, shipped: ``mhattn/data/roles-analysis.json``.

For the two one-layer planted-roles models (``roles-plain``, ``roles-headdropout``), with exactly the calls
notebook 06 shows (so that it runs in seconds and reads them):

* the pruning curves, :func:`mhattn.heads.prune.pruning_curve` on ``task.eval_set(512)`` with 3 random orders
  (``np.random.default_rng(1)``), by importance re-scored after each step and at random;
* hard-concrete gates, :func:`mhattn.heads.gates.train_gates` with ``l0_lambda=0.05``, 150 steps of 64 sequences,
  seeds 0, 1, 2: the heads left open by each seed.

    python benchmarks/roles_data.py        # a few minutes on 2 cores
"""

from __future__ import annotations

import json

import numpy as np

from mhattn.heads.gates import train_gates
from mhattn.heads.importance import masked_eval
from mhattn.heads.prune import pruning_curve
from mhattn.nn.transformer import TransformerModel
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint
from mhattn.training.tasks import task_from_meta

OUT = DATA_DIR / "roles-analysis.json"
GATES = {"l0_lambda": 0.05, "steps": 150, "batch_size": 64, "seeds": [0, 1, 2]}


def measure(name):
    """The curves and the gates' open heads of one checkpoint."""
    model, meta = load_checkpoint(name)
    task = task_from_meta(meta["task"])
    data = task.eval_set(512)
    curve = pruning_curve(model, data, masked_eval(model, *data), 3, np.random.default_rng(1))
    gates = []
    for seed in GATES["seeds"]:
        copy = TransformerModel(model.cfg, params=dict(model.params))
        g = train_gates(copy, task, l0_lambda=GATES["l0_lambda"], steps=GATES["steps"], batch_size=GATES["batch_size"],
                        seed=seed, progress=None)  # fmt: skip
        gates.append([int(h) for h in np.flatnonzero(g["gates"][0] > 0)])
    return {"curve": curve, "gates_open": gates}


def main() -> None:
    result = {"format": "mhattn-roles-analysis", "version": 1, "gates": GATES,
              "models": {name: measure(name) for name in ("roles-plain", "roles-headdropout")}}  # fmt: skip
    OUT.write_text(json.dumps(result) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
