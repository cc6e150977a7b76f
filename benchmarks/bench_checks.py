"""Forward cost of the input checks: the same forward timed on two source trees, side by side.

Times ``MultiHeadAttention.forward`` at the reference shape (B 16, T 128, d_model 512,
h 8, float32, self-attention) with and without masks, and one ``TransformerModel``
forward at the shipped models' size (1 layer, d_model 96, h 12, B 128, T 16), where
fixed per-call costs such as input checks weigh most. Each tree runs in its own
subprocess; the subprocesses alternate (old-new, new-old, ...), so both see the same machine load.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
        python benchmarks/bench_checks.py --baseline 3e8b7b4

``--baseline REV`` extracts that git revision (``git archive``) into a temporary folder
and times it against the working tree; without it only the working tree is timed.
Prints the median of each case per tree and the ratio new/old (below 1 = faster).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Runs inside each subprocess with the tree under test first on sys.path; prints JSON {case: [seconds, ...]}.
CHILD = r"""
import json, sys, time
import numpy as np
import mhattn
from mhattn.nn import ModelConfig, TransformerModel

repeats = int(sys.argv[1])
rng = np.random.default_rng(0)
B, T, d, h = 16, 128, 512, 8
x = rng.standard_normal((B, T, d)).astype(np.float32)
mha = mhattn.MultiHeadAttention(d, h, seed=0)
float_mask = np.where(mhattn.causal_mask(T), -np.inf, 0.0).astype(np.float32)  # (T, T)
padding = np.zeros((B, T), dtype=bool)
padding[:, -8:] = True  # (B, T) the last 8 keys are padding
model = TransformerModel(ModelConfig(vocab_size=64, output_sizes=(66, 66, 66)), seed=0)
ids = rng.integers(0, 64, size=(128, 16))
cases = {
    "mha, no mask": lambda: mha(x),
    "mha, float attn_mask + key_padding_mask": lambda: mha(x, attn_mask=float_mask, key_padding_mask=padding),
    "transformer d96 h12 B128 T16": lambda: model(ids),
}
times = {}
for name, f in cases.items():
    f()  # warm-up
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    times[name] = t
print(json.dumps({"mhattn": mhattn.__file__, "times": times}))
"""


def run_tree(src, repeats):
    code = f"import sys; sys.path.insert(0, {str(src)!r})\n" + CHILD
    out = subprocess.run([sys.executable, "-c", code, str(repeats)], capture_output=True, text=True, check=True, cwd="/")
    result = json.loads(out.stdout)
    assert result["mhattn"].startswith(str(src)), f"imported {result['mhattn']}, expected the tree in {src}"
    return result["times"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="git revision to compare against (default: time the working tree only)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating subprocess rounds per tree")
    ap.add_argument("--repeats", type=int, default=7, help="timed calls per case per round")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"new": ROOT}
        if a.baseline:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.baseline, "mhattn"], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            trees = {"old": pathlib.Path(tmp), "new": ROOT}
        times = {label: {} for label in trees}
        for r in range(a.rounds):
            order = list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]  # ABBA: no tree always goes first
            for label, src in order:
                for case, t in run_tree(src, a.repeats).items():
                    times[label].setdefault(case, []).extend(t)
    print(f"median of {a.rounds} rounds x {a.repeats} calls, ms")
    for case in times["new"]:
        row = {label: 1e3 * statistics.median(times[label][case]) for label in trees}
        cells = "  ".join(f"{label} {ms:8.2f}" for label, ms in row.items())
        ratio = f"  new/old {row['new'] / row['old']:.3f}" if "old" in row else ""
        print(f"{case:42s} {cells}{ratio}")


if __name__ == "__main__":
    main()
