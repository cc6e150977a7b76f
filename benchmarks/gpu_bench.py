"""Forward + backward of mhattn (plain and tiled, CuPy) against torch.nn.MultiheadAttention on CUDA.

Called by ``benchmarks/gpu_check.sh``; prints one row per shape with the ratios
mhattn/torch (medians of alternated runs, each synchronised) and writes a JSON record
that notebook 08 reads (``mhattn/data/gpu_check.json``). ``--device cpu`` runs the same
code with NumPy and torch on the CPU at small shapes: that is how its logic is tested
on machines without a GPU (tests/course/test_gpu_bench.py).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import mhattn
from mhattn.course.scaling import write_record

GPU_SHAPES = ((32, 1024, 1024, 16), (1, 8192, 1024, 16))  # (B, T, d_model, h), float32


def _sync(device):
    if device == "cuda":
        import cupy
        import torch

        cupy.cuda.Device().synchronize()
        torch.cuda.synchronize()


def _runners(B, T, d, h, device):
    """Zero-argument callables doing one forward + backward each: tiled, plain, torch."""
    import torch

    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((B, T, d)).astype(np.float32)
    dout_host = rng.standard_normal((B, T, d)).astype(np.float32)
    x, dout = mhattn.asarray(x_host), mhattn.asarray(dout_host)
    runs = {}
    for name in ("tiled", "plain"):
        mod = mhattn.MultiHeadAttention(d, h, seed=0, attention=name)

        def run(mod=mod):
            mod.forward(x, need_weights=False)
            mod.backward(dout)

        runs[name] = run
    ref = torch.nn.MultiheadAttention(d, h, batch_first=True, device=device)
    xt = torch.tensor(x_host, device=device, requires_grad=True)
    dt = torch.tensor(dout_host, device=device)

    def run_torch():
        xt.grad = None
        ref.zero_grad(set_to_none=True)
        out, _ = ref(xt, xt, xt, need_weights=False)
        out.backward(dt)

    runs["torch"] = run_torch
    return runs


def time_shape(B, T, d, h, device, repeats):
    """Median seconds per runner, runs alternated and synchronised; a runner that runs out of memory gets None."""
    runs = _runners(B, T, d, h, device)
    times = {k: [] for k in runs}
    for _ in range(repeats + 1):  # the first round warms up (kernel compilation, allocator pools)
        for name, run in runs.items():
            if times[name] is None:
                continue
            _sync(device)
            t0 = time.perf_counter()
            try:
                run()
                _sync(device)
            except MemoryError as err:  # cupy.cuda.memory.OutOfMemoryError subclasses MemoryError
                print(f"  {name}: out of memory at B={B}, T={T} ({type(err).__name__})", flush=True)
                times[name] = None
                continue
            times[name].append(time.perf_counter() - t0)
    return {k: (statistics.median(v[1:]) if v else None) for k, v in times.items()}


def _ratio(a, b):
    return None if a is None or b is None else a / b


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--shapes", default=None, help="B,T,d_model,h;B,T,d_model,h (default: the issue's two GPU shapes)")
    p.add_argument("--out", type=Path, default=Path("mhattn/data/gpu_check.json"))
    a = p.parse_args(argv)
    shapes = GPU_SHAPES if a.shapes is None else [tuple(int(n) for n in s.split(",")) for s in a.shapes.split(";")]
    backend = "cupy" if a.device == "cuda" else "numpy"
    mhattn.set_backend(backend)  # refuses loudly when CuPy or a device is missing
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("torch has no CUDA device: install a CUDA build of torch for this check")
    name = torch.cuda.get_device_name(0) if a.device == "cuda" else (platform.processor() or platform.machine())
    print(f"{name}; mhattn on {backend}, torch {torch.__version__} on {a.device}; float32, forward + backward, medians")
    head = ("B", 3), ("T", 5), ("d", 5), ("h", 3), ("tiled ms", 9), ("plain ms", 9), ("torch ms", 9)
    print(" ".join(f"{n:>{w}}" for n, w in head), f"{'tiled/torch':>12} {'plain/torch':>12}")
    rows = []
    for B, T, d, h in shapes:
        t = time_shape(B, T, d, h, a.device, a.repeats)
        row = {"B": B, "T": T, "d_model": d, "num_heads": h, **{f"{k}_s": v for k, v in t.items()}}
        row.update(tiled_over_torch=_ratio(t["tiled"], t["torch"]), plain_over_torch=_ratio(t["plain"], t["torch"]))
        rows.append(row)
        cells = [f"{v * 1e3:9.1f}" if v is not None else f"{'OOM':>9}" for v in (t["tiled"], t["plain"], t["torch"])]
        ratios = [f"{r:12.3f}" if r is not None else f"{'-':>12}" for r in (row["tiled_over_torch"], row["plain_over_torch"])]
        print(f"{B:3d} {T:5d} {d:5d} {h:3d} {' '.join(cells)} {' '.join(ratios)}", flush=True)
    record = {"device": name, "backend": backend, "torch": torch.__version__, "numpy": np.__version__, "dtype": "float32",
              "rows": rows}  # fmt: skip
    write_record(a.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
