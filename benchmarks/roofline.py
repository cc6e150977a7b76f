"""The fastest any NumPy implementation of MHA could run here, against torch and issue 28's goals.

Issue 28 asks for a float32 forward + backward (self-attention, d_model 512, h 8, ``need_weights=False``) at
<= 0.75x torch's time at B1 T2048 and B2 T1024 and <= 0.5x at B16 T128. Whatever the code around them, an exact
MHA step must do its matrix products, and NumPy's products are its BLAS's. So this script prints, per shape:

- **work**: the multiply-adds of the fewest products an exact forward + backward needs: the four projections
  ``(B T, d_model) @ (d_model, d_model)`` forward and two products each backward (``dX`` and ``dW``), 12 in all;
  and per head the two attention products forward (``Q K^T``, ``P V``) and four backward (``dV = P^T dO``,
  ``dP = dO V^T``, ``dQ = dS K``, ``dK = dS^T Q``), with ``P`` stored. (The tiled path and torch's CPU flash kernel
  recompute ``Q K^T`` in the backward: 7 attention products; the floor counts 6.)
- **rate**: the best rate NumPy's BLAS reaches on this machine for each group of products: the fastest shape and
  layout of the group (projections separate and fused, plain and transposed operands; attention in whole heads and in
  tiles of 256 or 512 queries by 256 to 1024 keys), each the fastest of four ways (BLAS's own threads or one BLAS thread per
  core sharing the work, each as a loop of products or as one stacked ``matmul`` call), best of 7 runs;
- **floor** = projection work / projection rate + attention work / attention rate + the softmax's ``B h T S``
  exponentials / the best exponential rate measured (each computed once, as when ``P`` is stored): the time of the
  products and the exponentials alone, every one at the best rate measured, with no other softmax pass, no ``dS``
  pass, no copies and no Python. No NumPy implementation doing
  these products with ordinary (cubic) matrix multiplication can be faster.

Beside it, mhattn's and torch's measured times (``torch.nn.MultiheadAttention``, its default threads; each side alone
in its own fresh process, medians: ``bench_alone.py``), and ``floor / torch`` against the goal. A goal is out of
reach for NumPy on this machine when ``floor / torch`` exceeds it.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/roofline.py
    env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=Haswell python benchmarks/roofline.py

Not a test: speed is measured here, never in the test suite. About a minute per kernel on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from bench_alone import SHAPES as ALONE_SHAPES  # this folder: the scripts run as `python benchmarks/<script>.py`
from bench_alone import run_alone
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


def gemm_rate(m, n, k, batch, pool, threads, rng, trans="") -> float:
    """Best multiply-adds per second of ``batch`` products ``(m, k) @ (k, n)`` in float32, the fastest of four ways:
    BLAS's own ``threads`` on each product in a loop, or on one stacked ``matmul`` call; one BLAS thread per pool
    thread with the products (or, for one product, its rows) shared out in a loop, or as one stacked call per thread.
    ``trans``: ``"a"`` or ``"b"`` passes that operand as a transposed view (``X^T dY``, ``dY W^T``)."""
    a = rng.standard_normal((batch, k, m) if "a" in trans else (batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, n, k) if "b" in trans else (batch, k, n), dtype=np.float32)
    a, b = (a.mT if "a" in trans else a), (b.mT if "b" in trans else b)
    out = np.empty((batch, m, n), np.float32)
    reps = max(1, int(4e8 // (batch * m * n * k)))
    chunks = [slice(i * batch // threads, (i + 1) * batch // threads) for i in range(threads)]
    step = -(-m // threads)

    def loop():
        for _ in range(reps):
            for i in range(batch):
                np.matmul(a[i], b[i], out=out[i])

    def stacked():
        for _ in range(reps):
            np.matmul(a, b, out=out)

    def part_loop(t):
        for _ in range(reps):
            for i in range(batch) if batch < threads else range(t, batch, threads):
                rows = slice(t * step, (t + 1) * step) if batch < threads else slice(None)
                np.matmul(a[i, rows], b[i], out=out[i, rows])

    def part_stacked(t):
        for _ in range(reps):
            np.matmul(a[chunks[t]], b[chunks[t]], out=out[chunks[t]])

    times = [_best_seconds(loop), _best_seconds(stacked)]
    with threadpool_limits(1, user_api="blas"):
        times.append(_best_seconds(lambda: list(pool.map(part_loop, range(threads)))))
        if batch >= threads:
            times.append(_best_seconds(lambda: list(pool.map(part_stacked, range(threads)))))
    return reps * batch * m * n * k / min(times)


def exp_rate(pool, threads, rng) -> float:
    """Best exponentials per second in float32 (``np.exp`` into its own buffer, one ``(256, 1024)`` tile per thread on
    every core at once, or one thread alone times the cores, whichever is faster), best of 7 runs."""
    tiles = [rng.standard_normal((256, 1024), dtype=np.float32) for _ in range(threads)]
    outs = [np.empty_like(t) for t in tiles]

    def one(t):
        for _ in range(20):
            np.exp(tiles[t], out=outs[t])

    together = _best_seconds(lambda: list(pool.map(one, range(threads))))  # threads x 20 tiles
    alone = _best_seconds(lambda: one(0))  # 20 tiles: as if every core ran as fast as one core alone
    return 20 * threads * tiles[0].size / min(together, alone)


def projection_rate(N, d, pool, threads, rng) -> float:
    """Best rate over the projections' product shapes and layouts, separate and fused (Q/K/V as one product):
    ``X W`` ``(N, d) @ (d, d|3d)``, ``dX = dY W^T`` ``(N, d|3d) @ (d|3d, d)^T``, ``dW = X^T dY`` ``(d, N)^T @ (N, d|3d)``."""
    shapes = []
    for w in (d, 3 * d):
        shapes += [((N, w, d), ""), ((N, d, w), "b"), ((d, w, N), "a")]
    return max(gemm_rate(*shape, 1, pool, threads, rng, trans) for shape, trans in shapes)


def attention_rate(B, T, dk, h, pool, threads, rng) -> float:
    """Best rate over the attention products: whole heads (``Q K^T`` and ``dP``: m T, n S, k d_k; ``P V``, ``dQ``,
    ``dV``, ``dK``: k = T or S), and the same products cut into tiles of 256 or 512 queries by 256-1024 keys (what a tiled code
    runs instead; they fit the cache), up to 64 distinct operands of each."""
    shapes = [((T, T, dk), B * h), ((T, dk, T), B * h)]
    for bq, bk in ((256, 256), (256, 512), (256, 1024), (512, 256), (512, 512)):
        if bq <= T and bk <= T:
            tiles = B * h * (T // bq) * (T // bk)
            shapes += [((bq, bk, dk), tiles), ((bq, dk, bk), tiles), ((bk, dk, bq), tiles)]
    return max(gemm_rate(*shape, min(count, 64), pool, threads, rng) for shape, count in shapes)


def measured(B, T, d, h, reps=7):
    """Median seconds of mhattn's and torch's forward + backward, each alone in its own fresh process
    (:func:`bench_alone.run_alone`; issue 33: alternated call by call in one process, each slows the other)."""
    shape = next(name for name, dims in ALONE_SHAPES.items() if dims == (B, T, d, h))
    return run_alone("engine", shape, reps), run_alone("torch", shape, reps)


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
    proj_rates = {}  # by N = B T: the projections' shapes depend on nothing else (all three shapes have N 2048)
    with ThreadPoolExecutor(threads) as pool:
        r_exp = max(exp_rate(pool, threads, rng) for _ in range(2))
        print(f"exponentials: {r_exp / 1e9:.2f} G/s\n{head}")
        for name, (B, T, d, h, goal) in SHAPES.items():
            w_proj, w_attn = work(B, T, d, h)
            if B * T not in proj_rates:
                proj_rates[B * T] = max(projection_rate(B * T, d, pool, threads, rng) for _ in range(2))
            r_proj, r_attn = proj_rates[B * T], attention_rate(B, T, d // h, h, pool, threads, rng)
            floor = w_proj / r_proj + w_attn / r_attn + B * h * T * T / r_exp
            ours, torch_s = measured(B, T, d, h, args.reps)
            verdict = "out of reach" if floor / torch_s > goal else "not ruled out"
            print(f"{name:12s} {w_proj / 1e9:5.2f} / {w_attn / 1e9:5.2f}    {r_proj / 1e9:6.1f} / {r_attn / 1e9:6.1f}"
                  f"      {floor * 1e3:7.1f}  {ours * 1e3:9.1f}  {torch_s * 1e3:8.1f}  {floor / torch_s:11.3f}"
                  f"  <= {goal}: {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
