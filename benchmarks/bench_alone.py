"""Issue 33's speed goals, each side timed alone in its own fresh process: the engine against the floor and torch.

Alternating two libraries call by call in one process misleads: OpenBLAS's idle threads spin on the cores torch
needs (issue 33 measured torch at 168-177 ms alternated with mhattn and 100-105 ms alone). So every timing here is
one side alone in a fresh ``python`` process (a fresh import, its own BLAS threads), and the sides alternate process
by process over ``--rounds`` rounds (the order rotated each round, so every side meets every load). Sides:

- ``engine``: ``MultiHeadAttention`` (``engine=True``, the default: :mod:`mhattn.kernels` on NumPy);
- ``reference``: the same module with ``engine=False`` (the reference steps of :mod:`mhattn.functional`);
- ``torch``: ``torch.nn.MultiheadAttention`` (CPU, its default threads);
- ``floor``: :mod:`roofline`'s floor for the shape (the products and exponentials alone at the best rate measured).

Shapes: self-attention forward + backward, float32, d_model 512, h 8, ``need_weights=False`` (the "auto" kernel
takes the tiled path at the two long shapes). Each process times ``--reps`` calls after 3 warm-ups and reports the
median and the fastest. Printed: per shape and side the median over rounds, and the median over rounds of each
round's ratios engine/floor (goal <= 1.2), engine/torch, reference/engine (goal <= 1.5); beside engine/floor, the
engine's fastest call over the floor ("best/floor"): the floor's rates are themselves the best of 7 timings of the
fastest of several shapes and methods, so that is the like-for-like comparison of the two statistics.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_alone.py
    env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=Haswell python benchmarks/bench_alone.py

Not a test: speed is measured here, never in the test suite. Record results in benchmarks/RESULTS.md with the CPU,
the OpenBLAS kernel (printed first) and the command; say whether the machine was quiet (the load average is printed).
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

HERE = Path(__file__).resolve().parent
SHAPES = {"B16 T128": (16, 128, 512, 8), "B1 T2048": (1, 2048, 512, 8), "B2 T1024": (2, 1024, 512, 8)}
SIDES = ("engine", "reference", "torch", "floor")
GOALS = {"engine/floor": 1.2, "reference/engine": 1.5}


def _mhattn_call(B, T, d, h, engine):
    import numpy as np

    from mhattn import MultiHeadAttention

    rng = np.random.default_rng(0)
    x, dout = (rng.standard_normal((B, T, d)).astype(np.float32) for _ in range(2))
    module = MultiHeadAttention(d, h, seed=0, engine=engine)

    def call():
        module.forward(x, need_weights=False)
        module.backward(dout)

    return call


def _torch_call(B, T, d, h):
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    x, dout = (torch.from_numpy(rng.standard_normal((B, T, d)).astype(np.float32)) for _ in range(2))
    x.requires_grad_(True)
    module = torch.nn.MultiheadAttention(d, h, batch_first=True)

    def call():
        x.grad = None
        module.zero_grad(set_to_none=True)
        module(x, x, x, need_weights=False)[0].backward(dout)

    return call


def _floor(B, T, d, h) -> float:
    """:mod:`roofline`'s floor in seconds for one shape (its rates measured in this process)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import roofline  # this folder: the scripts run as `python benchmarks/<script>.py`

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    rng = np.random.default_rng(0)
    with ThreadPoolExecutor(threads) as pool:
        r_exp = max(roofline.exp_rate(pool, threads, rng) for _ in range(2))
        r_proj = max(roofline.projection_rate(B * T, d, pool, threads, rng) for _ in range(2))
        r_attn = roofline.attention_rate(B, T, d // h, h, pool, threads, rng)
    w_proj, w_attn = roofline.work(B, T, d, h)
    return w_proj / r_proj + w_attn / r_attn + B * h * T * T / r_exp


def side_alone(side: str, shape: str, reps: int) -> dict:
    """``{"seconds": median, "best": fastest}`` of one side's forward + backward at ``shape``, in this process (the
    ``--side`` worker); the floor is one number, both."""
    B, T, d, h = SHAPES[shape]
    if side == "floor":
        floor = _floor(B, T, d, h)
        return {"seconds": floor, "best": floor}
    call = _torch_call(B, T, d, h) if side == "torch" else _mhattn_call(B, T, d, h, engine=side == "engine")
    times = call_seconds(call, reps)
    return {"seconds": statistics.median(times), "best": min(times)}


def call_seconds(call, reps: int) -> list:
    """Seconds of each of ``reps`` calls of ``call`` after 3 warm-ups."""
    for _ in range(3):
        call()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def median_seconds(call, reps: int) -> float:
    """Median seconds of ``reps`` calls of ``call`` after 3 warm-ups."""
    return statistics.median(call_seconds(call, reps))


def run_alone(side: str, shape: str, reps: int) -> float:
    """:func:`side_alone` in a fresh ``python`` process: its median seconds."""
    return run_alone_both(side, shape, reps)["seconds"]


def run_alone_both(side: str, shape: str, reps: int) -> dict:
    """:func:`side_alone` in a fresh ``python`` process: ``{"seconds": median, "best": fastest}``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--side", side, "--shape", shape, "--reps", str(reps)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=HERE.parent).stdout
    return json.loads(out.strip().splitlines()[-1])


def _header() -> str:
    import numpy  # noqa: F401 (loads the BLAS that threadpoolctl reports)
    from threadpoolctl import threadpool_info

    blas = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    return (f"CPU {cpu}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')}; BLAS {blas}; "
            f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of one fresh process per side and shape (>= 3)")
    ap.add_argument("--reps", type=int, default=9, help="timed calls per process, after 3 warm-ups")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--sides", nargs="*", default=list(SIDES), choices=list(SIDES))
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # a worker: time one side alone
    ap.add_argument("--shape", choices=list(SHAPES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        print(json.dumps(side_alone(args.side, args.shape, args.reps)))
        return
    print(_header())
    times = {(shape, side): [] for shape in args.shapes for side in args.sides}
    best = {key: [] for key in times}
    for r in range(args.rounds):
        order = args.sides[r % len(args.sides) :] + args.sides[: r % len(args.sides)]  # rotated each round
        for shape in args.shapes:
            for side in order:
                got = run_alone_both(side, shape, args.reps)
                times[shape, side].append(got["seconds"])
                best[shape, side].append(got["best"])
    print(f"{args.rounds} rounds, one fresh process per side; medians over rounds (ms) and of each round's ratio")
    for shape in args.shapes:
        row = "  ".join(f"{side} {statistics.median(times[shape, side]) * 1e3:7.1f}" for side in args.sides)
        ratios = []
        for a, b in (("engine", "floor"), ("engine", "torch"), ("reference", "engine")):
            if a in args.sides and b in args.sides:
                r = statistics.median(x / y for x, y in zip(times[shape, a], times[shape, b], strict=True))
                goal = GOALS.get(f"{a}/{b}")
                ratios.append(f"{a}/{b} {r:.2f}" + (f" (goal <= {goal})" if goal else ""))
                if (a, b) == ("engine", "floor"):
                    r = statistics.median(x / y for x, y in zip(best[shape, a], best[shape, b], strict=True))
                    ratios.append(f"best/floor {r:.2f}")
        print(f"{shape:9s} {row}  |  {'  '.join(ratios)}")


if __name__ == "__main__":
    main()
