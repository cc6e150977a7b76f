"""The head-ablation explorer's data: loss and accuracy of every subset of heads, computed by mhattn.

For each shipped 12-head checkpoint, every one of the 2^12 = 4096 head masks is evaluated with
:class:`mhattn.heads.mask_eval.HeadMaskEvaluator` on ``mhattn prune``'s evaluation set (512 roles
sequences, seed 12345), and one sample's attention maps are kept. Values are rounded to 6
significant digits. Index ``m`` of ``loss``/``acc`` is the subset whose bit ``j`` is set when head
``j`` is kept (4095: all heads, 0: none). Each head's role is :func:`mhattn.heads.roles.detect_roles`'s on
the whole evaluation set, with the statistics it decides by (``role_stats``: the most frequent offset of the
head's largest weight and the share of queries where it falls there, the share where it falls on the
sequence's rarest token) and the threshold both shares are held to (``role_threshold``); ``"other"`` is a
head that reaches neither. The output ships in the repository (docs/explorer/data.json);
the site embeds it, and tests/site/test_explorer.py checks shown values against a live evaluation.
Not run at build time (a few minutes on one core per checkpoint):

    python docs/explorer/make_data.py            # writes docs/explorer/data.json
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from mhattn.heads.jobs import settings_for
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.roles import POSITIONAL_THRESHOLD, attention_maps, detect_roles
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

MODELS = ("roles-plain", "roles-headdropout")
DIGITS = 6  # significant digits kept for losses and accuracies
SAMPLE = 0  # which evaluation sequence's attention maps are shown
OUT = Path(__file__).with_name("data.json")


def round_sig(x, digits=DIGITS):
    """``x`` rounded to ``digits`` significant digits, as a Python float."""
    return float(f"{x:.{digits}g}")


def subset_mask(m, h):
    """``(1, h)`` head mask of subset index ``m``: 1.0 where bit ``j`` of ``m`` is set (head ``j`` kept)."""
    return np.array([[(m >> j) & 1 for j in range(h)]], dtype=float)


def load(name):
    """``(model, task, (ids, targets))``: checkpoint ``name`` and ``mhattn prune``'s evaluation set for it."""
    model, meta = load_checkpoint(name)
    task = task_from_meta(meta["task"])
    return model, task, task.eval_set(settings_for(task, {}).eval_size)


def role_record(weights, ids, rarity):
    """``{"roles", "role_stats"}`` of one model: :func:`detect_roles` on ``weights`` ``(1, N, h, T, T)``, with
    the shares it compares with :data:`POSITIONAL_THRESHOLD` rounded to 3 decimals."""
    roles = detect_roles(weights, ids, rarity, threshold=POSITIONAL_THRESHOLD)
    stats = [{"offset": r["offset"], "offset_fraction": round(r["offset_fraction"], 3),
              "rare_fraction": round(r["rare_fraction"], 3)} for r in roles]  # fmt: skip
    return {"roles": [r["role"] for r in roles], "role_stats": stats}


def model_data(name):
    """The explorer's record of checkpoint ``name`` (see the module docstring)."""
    model, task, (ids, targets) = load(name)
    cfg = model.cfg
    if cfg.num_layers != 1 or cfg.num_heads != 12:
        raise ValueError(f"{name}: the explorer shows one layer of 12 heads, got {cfg.num_layers} x {cfg.num_heads}")
    ev = HeadMaskEvaluator(model, ids, targets)
    t0 = time.perf_counter()
    results = []
    for m in range(2**cfg.num_heads):
        results.append(ev.evaluate(subset_mask(m, cfg.num_heads)))
        if m % 512 == 511:
            print(f"{name}: {m + 1} subsets, {time.perf_counter() - t0:.0f} s", flush=True)
    seconds = time.perf_counter() - t0
    weights = attention_maps(model, ids)  # (1, N, h, T, T): the mask acts after attention, so one set of maps
    return {
        "num_heads": cfg.num_heads,
        "loss": [round_sig(r["loss"]) for r in results],
        "acc": [round_sig(r["acc"]) for r in results],
        **role_record(weights, ids, task.rarity()),
        "sample": {
            "ids": [int(i) for i in ids[SAMPLE]],
            "attention": np.round(weights[0, SAMPLE], 3).tolist(),  # (h, T, T)
        },
        "seconds": round(seconds, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT, help=f"JSON file to write (default {OUT})")
    p.add_argument("--workers", type=int, default=len(MODELS), help="processes, one checkpoint each")
    args = p.parse_args()
    with ProcessPoolExecutor(args.workers) as pool:
        records = dict(zip(MODELS, pool.map(model_data, MODELS), strict=True))
    settings = settings_for(task_from_meta(load_checkpoint(MODELS[0])[1]["task"]), {})
    data = {
        "format": "mhattn-explorer",
        "version": 1,
        "digits": DIGITS,
        "eval_size": settings.eval_size,
        "subset_index": "bit j set = head j kept",
        "role_threshold": POSITIONAL_THRESHOLD,
        "models": records,
    }
    seconds = {k: v.pop("seconds") for k, v in records.items()}
    args.out.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB); seconds per model: {seconds}")


if __name__ == "__main__":
    main()
