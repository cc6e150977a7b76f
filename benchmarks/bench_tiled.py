"""Tiled against plain attention and torch.nn.MultiheadAttention on the CPU: time and peak memory.

Forward + backward, self-attention, d_model 512, h 8, float32, ``need_weights=False``;
mhattn tiled, mhattn plain and torch alternated in one process, medians compared.
Then the peak traced memory (``tracemalloc`` sees NumPy's allocations) of one
forward + backward, tiled against plain. Not a test: run it by hand (about 2 minutes):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_tiled.py
    ... --out mhattn/data/attention_tiled_numpy.json    # the record notebook 09 reads

The plain path's memory is measured up to ``--plain-max-T`` (default 8192: a peak of about
6.5 GiB), and only where the machine has twice its expected peak available (MemAvailable);
otherwise it is reported as "not run", and the tiled peak at T is compared against the
plain peak at the largest T measured (a lower bound for plain at T: it grows as T^2).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from mhattn import MultiHeadAttention
from mhattn.course.scaling import write_record

SPEED_SHAPES = ((2, 1024), (1, 2048), (1, 4096))  # (B, T)


def fwd_bwd_ours(mod, x, dout):
    mod.forward(x, need_weights=False)
    mod.backward(dout)


def make_torch(d, h, x, dout):
    import torch

    ref = torch.nn.MultiheadAttention(d, h, batch_first=True)
    xt = torch.from_numpy(x).requires_grad_(True)
    dt = torch.from_numpy(dout)

    def run():
        xt.grad = None
        ref.zero_grad(set_to_none=True)
        out, _ = ref(xt, xt, xt, need_weights=False)
        out.backward(dt)

    return run


def speed(B, T, d, h, repeats):
    """Median seconds of forward + backward: tiled, plain, torch (runs alternated)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, d)).astype(np.float32)
    dout = rng.standard_normal((B, T, d)).astype(np.float32)
    mods = {name: MultiHeadAttention(d, h, seed=0, attention=name) for name in ("tiled", "plain")}
    runs = {name: (lambda m=m: fwd_bwd_ours(m, x, dout)) for name, m in mods.items()}
    runs["torch"] = make_torch(d, h, x, dout)
    times = {k: [] for k in runs}
    for f in runs.values():  # warm-up
        f()
    for _ in range(repeats):
        for k, f in runs.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def peak_bytes(attention, B, T, d, h):
    """Peak traced bytes of one forward + backward (inputs and parameters made before tracing)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, d)).astype(np.float32)
    dout = rng.standard_normal((B, T, d)).astype(np.float32)
    mod = MultiHeadAttention(d, h, seed=0, attention=attention)
    tracemalloc.start()
    try:
        fwd_bwd_ours(mod, x, dout)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def plain_fits(B, T, h) -> bool:
    """Whether the plain path's forward + backward (about 3.2 copies of the float32 weights) fits twice over."""
    need = 3.2 * B * h * T * T * 4
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable"))
    except (OSError, StopIteration):
        return T <= 4096
    return avail > 2 * need


def speed_table(d, h, repeats):
    """Print and return the timing rows of SPEED_SHAPES."""
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; d_model {d}, h {h}, float32, fwd+bwd medians")
    print(f"{'B':>3} {'T':>5} {'tiled ms':>9} {'plain ms':>9} {'torch ms':>9} {'tiled/torch':>12} {'plain/torch':>12}")
    rows = []
    for B, T in SPEED_SHAPES:
        t = speed(B, T, d, h, repeats)
        rows.append({"B": B, "T": T, **{f"{k}_s": v for k, v in t.items()}})
        print(f"{B:3d} {T:5d} {t['tiled'] * 1e3:9.1f} {t['plain'] * 1e3:9.1f} {t['torch'] * 1e3:9.1f} "
              f"{t['tiled'] / t['torch']:12.3f} {t['plain'] / t['torch']:12.3f}", flush=True)  # fmt: skip
    return rows


def memory_table(lengths, d, h, plain_max_T):
    """Print and return the peak-memory rows (B = 1); plain only where it is allowed and fits."""
    print(f"\npeak traced memory of forward + backward, B 1, MiB  (plain measured up to T = {plain_max_T}, if it fits)")
    print(f"{'T':>5} {'tiled':>9} {'plain':>9} {'tiled/plain':>12}")
    rows, plain_last = [], None
    for T in lengths:
        tiled = peak_bytes("tiled", 1, T, d, h)
        plain = peak_bytes("plain", 1, T, d, h) if T <= plain_max_T and plain_fits(1, T, h) else None
        plain_last = plain or plain_last
        rows.append({"T": T, "tiled_bytes": tiled, "plain_bytes": plain})
        note = "" if plain else "   (vs plain at the largest T run: a lower bound for plain here)"
        plain_txt = f"{plain / 2**20:9.1f}" if plain else f"{'not run':>9}"
        print(f"{T:5d} {tiled / 2**20:9.1f} {plain_txt} {tiled / (plain or plain_last):12.4f}{note}", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--memory-T", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    p.add_argument("--plain-max-T", type=int, default=8192, help="largest T at which the plain path's memory is measured")
    p.add_argument("--no-torch", action="store_true", help="skip the timing (memory only)")
    p.add_argument("--out", type=Path, default=None, help="write the record as JSON here")
    a = p.parse_args(argv)
    d, h = a.d_model, a.heads
    import threadpoolctl

    blas = threadpoolctl.threadpool_info()
    print(f"{platform.processor() or platform.machine()}, NumPy {np.__version__}, BLAS {[b['internal_api'] for b in blas]}")
    speed_rows = [] if a.no_torch else speed_table(d, h, a.repeats)
    memory_rows = memory_table(a.memory_T, d, h, a.plain_max_T)
    if a.out:
        record = {"device": platform.processor() or platform.machine(), "numpy": np.__version__, "d_model": d,
                  "num_heads": h, "dtype": "float32", "speed": speed_rows, "memory": memory_rows}  # fmt: skip
        write_record(a.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
