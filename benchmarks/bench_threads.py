"""One threading model per call (issue 28): MHA forward + backward against torch and against an older tree, side by side.

Each round runs a fresh subprocess per tree (this one, and ``--old``: a checkout of the commit before, e.g. a git
worktree of main), alternated ABBA so both see the same load; inside each subprocess mhattn and
``torch.nn.MultiheadAttention`` (CPU, its default threads) alternate call by call. Printed: medians per shape, the
ratios mhattn/torch for each tree and new/old. Shapes: self-attention, float32, d_model 512, h 8,
``need_weights=False`` (so the "auto" kernel takes the tiled path at the large shapes): B1 T2048, B2 T1024, the
reference B16 T128; and exercise size (B2 T16 d_model 64 h4, mhattn only, CPU time): fresh processes of the two trees
in ``--exercise-pairs`` pairs, the median of the per-pair ratios new/old with its quartiles (the host's speed drifts by a
few percent from one process to the next, more than the 3% bound; pairing cancels most of the drift). ``--memory`` adds the peak
traced memory of one tiled forward + backward at B1 T8192 against one ``(h, T, T)`` float32 array.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_threads.py --old /path/to/main
    env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=Haswell python benchmarks/bench_threads.py --old /path/to/main

Not a test: speed is measured here, never in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SHAPES = {"B1 T2048": (1, 2048, 512, 8), "B2 T1024": (2, 1024, 512, 8), "B16 T128 (reference)": (16, 128, 512, 8)}
EXERCISE = (2, 16, 64, 4)


def _fwd_bwd(module, x, dout):
    module.forward(x, need_weights=False)
    module.backward(dout)


def time_shape(B, T, d, h, reps, rng) -> dict:
    """Seconds of ``reps`` mhattn and torch forward + backward calls at one shape, alternated call by call."""
    import numpy as np
    import torch

    from mhattn import MultiHeadAttention

    x, dout = (rng.standard_normal((B, T, d)).astype(np.float32) for _ in range(2))
    ours, ref = MultiHeadAttention(d, h, seed=0), torch.nn.MultiheadAttention(d, h, batch_first=True)
    xt, dt = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(dout)

    def run_torch():
        xt.grad = None
        ref.zero_grad(set_to_none=True)
        ref(xt, xt, xt, need_weights=False)[0].backward(dt)

    calls = {"mhattn": lambda: _fwd_bwd(ours, x, dout), "torch": run_torch}
    times = {key: [] for key in calls}
    for f in calls.values():  # warm up
        f()
    for _ in range(reps):
        for key, f in calls.items():
            t0 = time.perf_counter()
            f()
            times[key].append(time.perf_counter() - t0)
    return times


def _worker(reps: int) -> dict:
    import numpy as np
    from threadpoolctl import threadpool_info

    rng = np.random.default_rng(0)
    out = {"blas": [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]}
    for name, shape in SHAPES.items():
        out[name] = time_shape(*shape, reps, rng)
    return out


def _exercise_worker(exercise_calls: int) -> float:
    """Median CPU seconds of one exercise-size forward + backward in a fresh process (15 samples)."""
    import numpy as np

    from mhattn import MultiHeadAttention

    B, T, d, h = EXERCISE
    x, dout = (np.random.default_rng(0).standard_normal((B, T, d)).astype(np.float32) for _ in range(2))
    small = MultiHeadAttention(d, h, seed=0)
    for _ in range(200):  # warm up
        _fwd_bwd(small, x, dout)
    samples = []
    for _ in range(15):
        t0 = time.process_time()  # CPU seconds of this process: less sensitive to other processes than wall time
        for _ in range(exercise_calls):
            _fwd_bwd(small, x, dout)
        samples.append((time.process_time() - t0) / exercise_calls)
    return statistics.median(samples)


def _memory() -> dict:
    import tracemalloc

    import numpy as np

    from mhattn import MultiHeadAttention

    T, d, h = 8192, 512, 8
    x = np.random.default_rng(0).standard_normal((1, T, d)).astype(np.float32)
    m = MultiHeadAttention(d, h, seed=0, attention="tiled")
    tracemalloc.start()
    m.forward(x, need_weights=False)
    m.backward(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"peak_bytes": peak, "ratio": peak / (h * T * T * 4)}


def _run(tree: Path, args, mode="--worker"):
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, __file__, mode, "--reps", str(args.reps), "--exercise-calls", str(args.exercise_calls)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _exercise(trees, args) -> dict:
    """Exercise size: fresh processes of the two trees in pairs (alternating which goes first); per-pair ratios."""
    times = {k: [] for k in trees}
    for r in range(args.exercise_pairs):
        for key in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            times[key].append(_run(trees[key], args, "--exercise-worker"))
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, help="a checkout of the tree to compare with (its repository root)")
    ap.add_argument("--rounds", type=int, default=4, help="subprocess rounds per tree, ABBA order")
    ap.add_argument("--reps", type=int, default=3, help="timed calls per shape per round")
    ap.add_argument("--exercise-calls", type=int, default=300, help="calls per exercise-size sample")
    ap.add_argument("--exercise-pairs", type=int, default=16, help="exercise-size processes per tree, paired")
    ap.add_argument("--memory", action="store_true", help="also the peak memory at T 8192 (this tree)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--memory-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--exercise-worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(_worker(a.reps)))
        return
    if a.exercise_worker:
        print(json.dumps(_exercise_worker(a.exercise_calls)))
        return
    if a.memory_worker:
        print(json.dumps(_memory()))
        return
    trees = {"new": HERE} | ({"old": a.old.resolve()} if a.old else {})
    runs = {k: [] for k in trees}
    for r in range(a.rounds):
        for key in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            runs[key].append(_run(trees[key], a))
    print(f"CPU: {_cpu()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')}; "
          f"BLAS: {runs['new'][0]['blas']}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    med = {k: {s: {w: statistics.median(t for run in v for t in run[s][w]) for w in ("mhattn", "torch")} for s in SHAPES}
           for k, v in runs.items()}  # fmt: skip
    print(f"{'shape':24s} " + "  ".join(f"{k} ms  {k}/torch" for k in trees) + ("  new/old" if a.old else ""))
    for s in SHAPES:
        cells = [f"{med[k][s]['mhattn'] * 1e3:7.1f}  {med[k][s]['mhattn'] / med[k][s]['torch']:8.3f}" for k in trees]
        extra = f"  {med['new'][s]['mhattn'] / med['old'][s]['mhattn']:7.3f}" if a.old else ""
        print(f"{s:24s} " + "  ".join(cells) + extra + f"   (torch {med['new'][s]['torch'] * 1e3:.1f} ms)")
    ex = _exercise(trees, a)
    medians = ", ".join(f"{k} {statistics.median(v) * 1e6:.0f} us" for k, v in ex.items())
    line = f"exercise size B2 T16 d64 h4, CPU time: {medians}"
    if a.old:
        ratios = sorted(n / o for n, o in zip(ex["new"], ex["old"], strict=True))
        q = len(ratios) // 4
        quartiles = f"{ratios[q]:.3f}-{ratios[-q - 1]:.3f}"
        line += f", new/old {statistics.median(ratios):.3f} (median of {len(ratios)} pairs; quartiles {quartiles})"
    print(line)
    if a.memory:
        cmd = [sys.executable, __file__, "--memory-worker"]
        mem = json.loads(subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(HERE)), capture_output=True,
                                        text=True, check=True).stdout.strip().splitlines()[-1])  # fmt: skip
        print(
            f"peak traced memory, tiled fwd+bwd B1 T8192: {mem['peak_bytes'] / 2**20:.1f} MiB = "
            f"{mem['ratio']:.3f} of one (h, T, T) float32 array (goal <= 0.15)"
        )


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    main()
