"""Old against new, side by side: the cost of dispatching through the array API standard (issue 18).

Times ``MultiHeadAttention`` forward + backward (float32, self-attention) in the working tree and in an
older commit checked out into a temporary git worktree, in alternating child processes (each child warms
up, then times ``--inner`` samples of about 20 ms of calls each and prints their median), ``--rounds`` rounds;
prints each side's median of round medians and the ratio new/old per shape. The shapes: the reference shape (B 16, T 128,
d_model 512, h 8), exercise size (B 2, T 16, d_model 64, h 4), and the tiled path (``--tiled``:
B 2, T 1024 and B 1, T 2048, d_model 512, h 8, ``block_k`` default, ``need_weights=False``).
Not a test: run it by hand, with both OpenBLAS variables unset in that command only:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_array_api.py --old 433547c
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"reference": (16, 128, 512, 8), "exercise": (2, 16, 64, 4)}
TILED = {"tiled T1024": (2, 1024, 512, 8), "tiled T2048": (1, 2048, 512, 8)}

CHILD = """
import statistics, sys, time
import numpy as np
from mhattn import MultiHeadAttention
B, T, d, h, inner, tiled = (int(a) for a in sys.argv[1:7])
rng = np.random.default_rng(0)
x = rng.standard_normal((B, T, d)).astype(np.float32)
dout = rng.standard_normal((B, T, d)).astype(np.float32)
mha = MultiHeadAttention(d, h, seed=0, attention="tiled" if tiled else "plain")
kw = {"need_weights": False} if tiled else {}
def run():
    mha.forward(x, **kw)
    mha.backward(dout)
t0 = time.perf_counter()
run()
batch = max(1, int(0.02 / (time.perf_counter() - t0)))  # calls per sample: about 20 ms
for _ in range(max(3, 2 * batch)):  # warm-up: caches, lazy imports, the allocator
    run()
times = []
for _ in range(inner):  # each sample: a batch of calls lasting about 20 ms, so the timer's resolution does not matter
    t0 = time.perf_counter()
    for _ in range(batch):
        run()
    times.append((time.perf_counter() - t0) / batch)
print(statistics.median(times))
"""


def child_median(src: Path, shape, inner: int, tiled: bool) -> float:
    """One child process in ``src``: the median seconds of ``inner`` forward + backward calls."""
    args = [str(v) for v in (*shape, inner, int(tiled))]
    out = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=src, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def compare(old: Path, shapes: dict, rounds: int, inner: int, tiled: bool):
    for name, shape in shapes.items():
        per = {"old": [], "new": []}
        for r in range(rounds):
            order = (("old", old), ("new", ROOT)) if r % 2 == 0 else (("new", ROOT), ("old", old))
            for side, src in order:
                per[side].append(child_median(src, shape, inner, tiled))
        m_old, m_new = statistics.median(per["old"]), statistics.median(per["new"])
        lo_hi = {side: f"{min(t) * 1e3:.2f}-{max(t) * 1e3:.2f}" for side, t in per.items()}
        spread = f"new {lo_hi['new']}, old {lo_hi['old']}"
        print(f"{name:<12} B,T,d,h={shape}: old {m_old * 1e3:8.3f} ms  new {m_new * 1e3:8.3f} ms  "
              f"new/old {m_new / m_old:.3f}   (round medians ms: {spread})")  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the commit to compare against (e.g. the last before the port)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--inner", type=int, default=30)
    ap.add_argument("--tiled", action="store_true", help="also the tiled path at T 1024 and 2048")
    a = ap.parse_args()
    import numpy as np

    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}, numpy {np.__version__}")
    print(f"{a.rounds} alternating rounds of one child per side, {a.inner} timed calls each; float32 forward+backward")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old), a.old], check=True)
        try:
            compare(old, SHAPES, a.rounds, a.inner, False)
            if a.tiled:
                compare(old, TILED, max(3, a.rounds // 2), max(3, a.inner // 10), True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)


if __name__ == "__main__":
    main()
