"""The fastest any NumPy implementation of MHA could run here, against torch and issue 28's goals.

Issue 28 asks for a float32 forward + backward (self-attention, d_model 512, h 8, ``need_weights=False``) at
<= 0.75x torch's time at B1 T2048 and B2 T1024 and <= 0.5x at B16 T128. Whatever the code around them, an exact
MHA step must do its matrix products, and NumPy's products are its BLAS's. So this script prints, per shape:

- **work**: the multiply-adds of the fewest products an exact forward + backward needs: the four projections
  ``(B T, d_model) @ (d_model, d_model)`` forward and two products each backward (``dX`` and ``dW``), 12 in all;
  and per head the two attention products forward (``Q K^T``, ``P V``) and four backward (``dV = P^T dO``,
  ``dP = dO V^T``, ``dQ = dS K``, ``dK = dS^T Q``), with ``P`` stored. (The tiled path and torch's CPU flash kernel
  recompute ``Q K^T`` in the backward: 7 attention products; the floor counts 6.)
- **rate**: the best rate NumPy's BLAS reaches on this machine for each group of products (the fastest shape of the
  group, taken as the faster of BLAS's own threads on one whole product and one BLAS thread per core on halves of
  the work side by side, best of 7 runs; for attention, whole heads and tiles of 256 queries by 256 to 1024 keys);
- **floor** = projection work / projection rate + attention work / attention rate: the time of the products alone,
  every one at the best rate measured, with no softmax, no copies and no Python. No NumPy implementation doing
  these products can be faster.

Beside it, mhattn's and torch's measured times (``torch.nn.MultiheadAttention``, its default threads; the two
alternated call by call, medians), and ``floor / torch`` against the goal. A goal is out of reach for NumPy on this
machine when ``floor / torch`` exceeds it.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/roofline.py
    env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=Haswell python benchmarks/roofline.py

Not a test: speed is measured here, never in the test suite. About a minute per kernel on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

SHAPES = {"B1 T2048": (1, 2048, 512, 8, 0.75), "B2 T1024": (2, 1024, 512, 8, 0.75), "B16 T128": (16, 128, 512, 8, 0.5)}


def work(B, T, d, h):
    """Multiply-adds ``(projections, attention)`` of the fewest products of an exact self-attention step."""
    projections = 12 * (B * T) * d * d
    attention = 6 * B * h * T * T * (d // h)
    return projections, attention


def _best_seconds(f, runs=7):
    f()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def gemm_rate(m, n, k, batch, pool, threads, rng) -> float:
    """Best multiply-adds per second of ``batch`` products ``(m, k) @ (k, n)`` in float32: BLAS's own ``threads``
    on each product, or one BLAS thread per pool thread with the products shared out, whichever is faster."""
    a = rng.standard_normal((batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, k, n), dtype=np.float32)
    out = np.empty((batch, m, n), np.float32)
    reps = max(1, int(4e8 // (batch * m * n * k)))

    def whole():
        for _ in range(reps):
            for i in range(batch):
                np.matmul(a[i], b[i], out=out[i])

    def part(rows):
        for _ in range(reps):
            if batch >= threads:
                for i in range(rows, batch, threads):
                    np.matmul(a[i], b[i], out=out[i])
            else:  # one product: row blocks
                step = -(-m // threads)
                for i in range(batch):
                    np.matmul(a[i, rows * step : (rows + 1) * step], b[i], out=out[i, rows * step : (rows + 1) * step])

    blas_threads = _best_seconds(whole)
    with threadpool_limits(1, user_api="blas"):
        one_per_core = _best_seconds(lambda: list(pool.map(part, range(threads))))
    return reps * batch * m * n * k / min(blas_threads, one_per_core)


def rates(B, T, d, h, pool, threads, rng):
    """Best rate ``(projections, attention)`` over each group's product shapes at this size."""
    N, dk = B * T, d // h
    proj = max(gemm_rate(*s, 1, pool, threads, rng) for s in ((N, d, d), (d, d, N)))  # X W and dX; dW = X^T dY
    # whole heads: Q K^T and dP (m T, n S, k d_k); P V, dQ, dV, dK (k = T or S); and the same products cut into
    # tiles of 256 queries by 256-1024 keys (what a tiled code may run instead, often faster: they fit the cache)
    shapes = [((T, T, dk), B * h), ((T, dk, T), B * h)]
    for bq, bk in ((256, 256), (256, 512), (256, 1024)):
        if bq <= T and bk <= T:
            n = B * h * (T // bq) * (T // bk)
            shapes += [((bq, bk, dk), n), ((bq, dk, bk), n), ((bk, dk, bq), n)]
    attn = max(gemm_rate(*s, min(n, 64), pool, threads, rng) for s, n in shapes)
    return proj, attn


def measured(B, T, d, h, reps=7):
    """Median seconds of mhattn's and torch's forward + backward, alternated call by call."""
    import torch

    from mhattn import MultiHeadAttention

    rng = np.random.default_rng(0)
    x, dout = (rng.standard_normal((B, T, d)).astype(np.float32) for _ in range(2))
    ours, ref = MultiHeadAttention(d, h, seed=0), torch.nn.MultiheadAttention(d, h, batch_first=True)
    xt, dt = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(dout)

    def run_ours():
        ours.forward(x, need_weights=False)
        ours.backward(dout)

    def run_torch():
        xt.grad = None
        ref.zero_grad(set_to_none=True)
        ref(xt, xt, xt, need_weights=False)[0].backward(dt)

    times = {"mhattn": [], "torch": []}
    run_ours(), run_torch()
    for _ in range(reps):
        for key, f in (("mhattn", run_ours), ("torch", run_torch)):
            t0 = time.perf_counter()
            f()
            times[key].append(time.perf_counter() - t0)
    return statistics.median(times["mhattn"]), statistics.median(times["torch"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7, help="timed mhattn and torch calls per shape")
    args = ap.parse_args()
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    blas = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')}; BLAS {blas}; {threads} cores; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    rng = np.random.default_rng(0)
    head = "shape        GMAC proj/attn  rate GMAC/s proj/attn  floor ms  mhattn ms  torch ms  floor/torch  goal"
    print(head)
    with ThreadPoolExecutor(threads) as pool:
        for name, (B, T, d, h, goal) in SHAPES.items():
            w_proj, w_attn = work(B, T, d, h)
            r_proj, r_attn = rates(B, T, d, h, pool, threads, rng)
            floor = w_proj / r_proj + w_attn / r_attn
            ours, torch_s = measured(B, T, d, h, args.reps)
            verdict = "out of reach" if floor / torch_s > goal else "not ruled out"
            print(f"{name:12s} {w_proj / 1e9:5.2f} / {w_attn / 1e9:5.2f}    {r_proj / 1e9:6.1f} / {r_attn / 1e9:6.1f}"
                  f"      {floor * 1e3:7.1f}  {ours * 1e3:9.1f}  {torch_s * 1e3:8.1f}  {floor / torch_s:11.3f}"
                  f"  <= {goal}: {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
