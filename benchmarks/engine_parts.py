"""Where the engine's time goes against the floor (issue 33): the attention core, the projections, the rest.

``bench_alone.py`` gives the engine / floor ratio; this script says why it is what it is. Per shape, in one fresh
process per shape (engine alone, then the floor's rates, as ``bench_alone.py`` measures them):

- **engine**: ``MultiHeadAttention`` forward + backward (float32, self-attention, ``need_weights=False``: the tiled
  path at the two long shapes), median of ``--reps`` after 3 warm-ups;
- **core**: step 3 alone (the engine's attention forward + backward on ``(B, h, T, d_k)`` arrays, pooled as in the
  module), and beside it what the floor allows for it: its products at the floor's best attention rate (6, or 7 on
  the tiled path, which recomputes ``Q K^T``) plus the ``B h T S`` exponentials at the best exponential rate;
- **projections**: the engine's 12 projection products as the module runs them (the fused Q/K/V product, the output
  product, ``dX`` and ``dW`` of each) on its pool, and the floor's time for them;
- **rest** = engine - core - projections: the head split and combine, biases, checks, Python.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/engine_parts.py

Not a test: speed is measured here, never in the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_alone import SHAPES, median_seconds  # this folder: the scripts run as `python benchmarks/<script>.py`


def _median_ms(f, reps) -> float:
    return median_seconds(f, reps) * 1e3


def _steps(B, T, d, h):
    """``(module step, attention core, projections)`` callables of the engine at one shape."""
    import numpy as np

    from mhattn import MultiHeadAttention
    from mhattn.kernels import attention, pool, tiled

    rng = np.random.default_rng(0)
    x, dout = (rng.standard_normal((B, T, d), dtype=np.float32) for _ in range(2))
    module = MultiHeadAttention(d, h, seed=0)
    use_tiled = module._use_tiled(x, x, False, 0.0)
    q, k, v, do = (rng.standard_normal((B, h, T, d // h), dtype=np.float32) for _ in range(4))
    X, W = x.reshape(-1, d), rng.standard_normal((d, 3 * d), dtype=np.float32)
    dY = [rng.standard_normal((B * T, d), dtype=np.float32) for _ in range(4)]  # (B T, d) each

    def step():
        module.forward(x, need_weights=False)
        module.backward(dout)

    def core():
        with pool.pooled():
            if use_tiled:
                tiled.tiled_attention_backward(do, tiled.tiled_attention_forward(q, k, v)[2])
            else:
                attention.scaled_dot_product_attention_backward(do, attention.attend(q, k, v)[2])

    def projections():  # forward: fused Q/K/V and output; backward: dX and dW of each of the four
        with pool.pooled():
            pool.matmul(X, W)
            pool.matmul(X, W[:, :d])
            for dy in dY:
                pool.matmul(dy, W[:, :d].T)
                pool.matmul(X.T, dy)

    return step, core, projections, use_tiled


def parts(shape: str, reps: int) -> dict:
    """The engine's parts and the floor's at ``shape``, in ms (the ``--shape`` worker)."""
    import numpy as np
    import roofline

    B, T, d, h = SHAPES[shape]
    step, core, projections, use_tiled = _steps(B, T, d, h)
    got = {"engine": _median_ms(step, reps), "core": _median_ms(core, reps), "proj": _median_ms(projections, reps)}
    rng = np.random.default_rng(0)
    with ThreadPoolExecutor(2) as ex:
        r_exp = max(roofline.exp_rate(ex, 2, rng) for _ in range(2))
        r_proj = max(roofline.projection_rate(B * T, d, ex, 2, rng) for _ in range(2))
        r_attn = roofline.attention_rate(B, T, d // h, h, ex, 2, rng)
    w_proj, w_attn = roofline.work(B, T, d, h)
    products = 7 if use_tiled else 6
    floor = {"proj": w_proj / r_proj * 1e3, "attn": w_attn / r_attn * 1e3, "exp": B * h * T * T / r_exp * 1e3}
    floor["core"] = floor["attn"] * products / 6 + floor["exp"]
    return {"got": got, "floor": floor, "products": products}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9, help="timed calls per part, after 3 warm-ups")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--shape", choices=list(SHAPES), help=argparse.SUPPRESS)  # a worker
    args = ap.parse_args()
    if args.shape:
        print(json.dumps(parts(args.shape, args.reps)))
        return
    print("ms         engine  floor | core (floor for it: products + exps) | projections (floor) | rest | 7th product")
    for shape in args.shapes:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--shape", shape, "--reps", str(args.reps)]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        g, f = r["got"], r["floor"]
        total_floor = f["proj"] + f["attn"] + f["exp"]
        seventh = f["attn"] / 6 if r["products"] == 7 else 0.0
        rest = g["engine"] - g["core"] - g["proj"]
        print(f"{shape:9s} {g['engine']:7.1f} {total_floor:6.1f} | {g['core']:6.1f} ({f['core']:6.1f}, {r['products']} products)"
              f"            | {g['proj']:6.1f} ({f['proj']:5.1f})       | {rest:5.1f} | {seventh:5.1f}"
              f"  -> engine/floor {g['engine'] / total_floor:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
