"""Forward + backward of MultiHeadAttention against torch.nn.MultiheadAttention on the CPU.

Same process, same shapes, runs alternated, medians compared. Not a test: run it by hand,
and unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in that command only:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_mha.py

One thread each (less sensitive to a busy machine):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 python benchmarks/bench_mha.py --torch-threads 1

Prints the ratio mhattn/torch (target <= 1.0) and the achieved GFLOP/s against the
machine's measured float32 np.matmul rate.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from mhattn import MultiHeadAttention


def mha_flops(B, T, d, h):
    """Multiply-adds x2 of one forward + backward (backward = 2x forward's GEMMs)."""
    d_k = d // h
    proj = 4 * 2 * B * T * d * d  # Q, K, V, O projections
    attn = 2 * 2 * B * h * T * T * d_k  # q k^T and weights @ v
    return 3 * (proj + attn)


def matmul_gflops(n=1024, repeats=7):
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(times) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--T", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (NumPy: OPENBLAS_NUM_THREADS)")
    a = ap.parse_args()
    import torch

    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)

    B, T, d, h = a.B, a.T, a.d_model, a.heads
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, d)).astype(np.float32)
    dout = rng.standard_normal((B, T, d)).astype(np.float32)
    ours = MultiHeadAttention(d, h, seed=0)
    ref = torch.nn.MultiheadAttention(d, h, batch_first=True)
    xt = torch.from_numpy(x).requires_grad_(True)
    dt = torch.from_numpy(dout)

    def run_ours():
        ours.forward(x)
        ours.backward(dout)

    def run_torch():
        xt.grad = None
        ref.zero_grad(set_to_none=True)
        out, _ = ref(xt, xt, xt)
        out.backward(dt)

    for f in (run_ours, run_torch):  # warm up
        f()
    t_ours, t_torch = [], []
    for _ in range(a.repeats):
        for f, acc in ((run_ours, t_ours), (run_torch, t_torch)):
            t0 = time.perf_counter()
            f()
            acc.append(time.perf_counter() - t0)
    m_ours, m_torch = statistics.median(t_ours), statistics.median(t_torch)
    flops = mha_flops(B, T, d, h)
    peak = matmul_gflops()
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, torch threads {torch.get_num_threads()}, numpy {np.__version__}, torch {torch.__version__}")
    print(f"shape: B={B} T={T} d_model={d} h={h} float32, forward+backward, {a.repeats} alternating runs each")
    print(f"mhattn median {m_ours * 1e3:8.1f} ms  ({flops / m_ours / 1e9:6.1f} GFLOP/s)")
    print(f"torch  median {m_torch * 1e3:8.1f} ms  ({flops / m_torch / 1e9:6.1f} GFLOP/s)")
    print(f"np.matmul 1024^2 float32: {peak:6.1f} GFLOP/s; mhattn reaches {flops / m_ours / 1e9 / peak:.0%} of it")
    print(f"ratio mhattn/torch = {m_ours / m_torch:.3f}  (target <= 1.0)")


if __name__ == "__main__":
    main()
