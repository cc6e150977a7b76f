"""Time and memory of MultiHeadAttention as the sequence length T grows; prints a table, optionally writes a JSON record.

Part of the package, so it runs from a wheel as from a clone (notebook 08 shows the records shipped in mhattn/data/):

    python -m mhattn.course.scaling                        # NumPy, this machine's CPU
    python -m mhattn.course.scaling --dtype float64 --d-model 64 --out my_record.json
    python -m mhattn.course.scaling --backend cupy         # CuPy, needs a CUDA GPU
    python -m mhattn.course.scaling --d-model 512 --attention tiled   # the tiled path of notebook 09 (or plain)

Each row: T, best-of-3 forward and backward seconds, and the bytes of the (B, h, T, T)
attention weights. In a clone, benchmarks/attention_scaling.py runs this same code.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

import mhattn
from mhattn.course.lessons import time_attention, weights_bytes


def run(backend: str, lengths, B: int, d_model: int, h: int, dtype: str, repeats: int, attention: str = "auto") -> dict:
    """Time ``MultiHeadAttention(d_model, h)`` forward + backward on inputs ``(B, T, d_model)`` of ``dtype``, each T.

    Returns:
        The record: the settings, the machine, and ``rows`` of ``{"T", "forward_s", "backward_s", "weights_bytes"}``
        (best of ``repeats``; weights_bytes: the size the (B, h, T, T) weights would have).
    """
    rows = []
    with mhattn.use_backend(backend):
        mha = mhattn.MultiHeadAttention(d_model, h, dtype=dtype, seed=0, attention=attention)
        rng = np.random.default_rng(0)
        for T in lengths:
            x = mhattn.asarray(rng.standard_normal((B, T, d_model)).astype(dtype))
            t = time_attention(mha, x, repeats)  # warms up first (CuPy compiles kernels on first use)
            rows.append({"T": T, **t, "weights_bytes": weights_bytes(B, h, T, T, dtype)})
            print(f"T={T:5d}  forward {t['forward_s'] * 1e3:9.2f} ms  backward {t['backward_s'] * 1e3:9.2f} ms", flush=True)
    device = platform.processor() or platform.machine()
    if backend == "cupy":
        import cupy

        device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    return {"backend": backend, "device": device, "B": B, "d_model": d_model, "num_heads": h, "dtype": dtype,
            "attention": attention, "numpy": np.__version__, "python": sys.version.split()[0], "rows": rows}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mhattn.course.scaling", description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="numpy", choices=mhattn.backend.BACKENDS)
    p.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--num-heads", type=int, default=8)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--attention", default="auto", choices=["auto", "plain", "tiled"],
                   help="MultiHeadAttention's path (notebook 09): auto takes the tiled one for large B*h*T*S")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="write the record as JSON here")
    args = p.parse_args(argv)
    record = run(args.backend, args.lengths, args.batch, args.d_model, args.num_heads, args.dtype, args.repeats, args.attention)
    if args.out:
        write_record(args.out, record)
    return 0


def write_record(path: Path, record: dict) -> None:
    """Write a timing record as indented JSON to ``path`` (its folder made if missing) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
