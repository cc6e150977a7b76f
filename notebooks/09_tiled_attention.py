# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Attention in linear memory: tiles and the online softmax
#
# **Learning objectives.** After this notebook you can
#
# 1. derive the online softmax: a running maximum, and a running sum and output that are rescaled whenever the maximum grows (Milakov & Gimelshein 2018);
# 2. say which score tiles a causal tiled pass computes and which it skips, from a picture of the tiles;
# 3. explain how the backward recomputes each tile from one number per row, the log-sum-exp (FlashAttention-2, Dao 2023, Algorithm 2), and why that costs less than it sounds;
# 4. check the tiled backward against centred differences, and read recorded time and memory against $T$.

# %%
import json
import re
from pathlib import Path

import numpy as np

import mhattn
from mhattn.course.display import show
from mhattn.course.lessons import weights_bytes
from mhattn.functional import scaled_dot_product_attention_backward, scaled_dot_product_attention_forward
from mhattn.functional.attention_tiled import tiled_attention_backward, tiled_attention_forward
from mhattn.gradcheck import check_backward, rel_error
from mhattn.plots.performance import FULL, PARTIAL, SKIPPED, tile_picture, tile_states, tiled_record_figure

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 1. What the plain path stores
#
# The plain path (notebooks 02 and 03) keeps the weights `(B, h, T, S)` for the backward. For one sequence and eight heads in float32:

# %%
for T in (1024, 4096, 8192, 32768):
    print(f"T={T:6d}   weights of one layer: {weights_bytes(1, 8, T, T, 'float32') / 2**20:10,.0f} MiB")
assert weights_bytes(1, 8, 8192, 8192, "float32") == 2 * 2**30  # 2 GiB at T = 8192

# %% [markdown]
# What else the layer keeps for the backward ($Q, K, V$, the output) is `(B, T, d_model)`: linear in $T$. The scores, and in the backward their gradients, are `(B, h, T, S)` as well, but only while they are computed; the weights are the quadratic array that is kept. A tiled pass never holds any of them whole: it holds one tile of scores at a time (one per worker thread on NumPy).
#
# ## 2. The online softmax, step by step
#
# Take one query's row of scores $s_1, \dots, s_S$ and values $v_1, \dots, v_S$. The output is $o = \sum_j e^{s_j - m} v_j \,/\, \sum_j e^{s_j - m}$ for any constant $m$; the stable choice is $m = \max_j s_j$, which needs the whole row. Cut the row into tiles and keep three running quantities after tile $t$:
#
# * the running maximum $m^{(t)} = \max(m^{(t-1)}, \max_{j \in t} s_j)$;
# * the running sum $\ell^{(t)} = \sum_{j \le t} e^{s_j - m^{(t)}}$;
# * the running (unnormalised) output $a^{(t)} = \sum_{j \le t} e^{s_j - m^{(t)}} v_j$.
#
# When tile $t$ arrives, every term already in $\ell^{(t-1)}$ was exponentiated against $m^{(t-1)}$. Since $e^{s - m^{(t)}} = e^{s - m^{(t-1)}} \cdot e^{m^{(t-1)} - m^{(t)}}$, one factor $\alpha = e^{m^{(t-1)} - m^{(t)}} \le 1$ moves all of them to the new maximum:
#
# $$\ell^{(t)} = \alpha\, \ell^{(t-1)} + \sum_{j \in t} e^{s_j - m^{(t)}}, \qquad a^{(t)} = \alpha\, a^{(t-1)} + \sum_{j \in t} e^{s_j - m^{(t)}} v_j .$$
#
# After the last tile, $o = a / \ell$ and the log-sum-exp is $L = m + \log \ell$ (Dao 2023, Algorithm 1, lines 8-13). No exponent is ever positive, so nothing overflows. One row, three tiles, printed tile by tile:

# %%
rng = np.random.default_rng(0)
s = rng.standard_normal(9) * 3  # one query's scores over S = 9 keys
v = rng.standard_normal((9, 2))  # the keys' values, d_v = 2
m, ell, a = -np.inf, 0.0, np.zeros(2)
for t, j in enumerate(range(0, 9, 3)):
    tile = s[j : j + 3]
    m_new = max(m, tile.max())
    alpha = np.exp(m - m_new)  # 0 on the first tile (m = -inf)
    ell = alpha * ell + np.exp(tile - m_new).sum()
    a = alpha * a + np.exp(tile - m_new) @ v[j : j + 3]
    m = m_new
    print(f"tile {t}: max so far {m:7.3f}   alpha {alpha:6.3f}   running sum {ell:7.3f}   running output {a}")
p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()  # the ordinary softmax, whole row at once
print("online:", a / ell, "  whole row:", p @ v)
assert np.allclose(a / ell, p @ v, rtol=1e-13) and np.isclose(m + np.log(ell), np.log(np.exp(s).sum()))

# %% [markdown]
# A row whose keys are all masked has $m = -\infty$ and $\ell = 0$ to the end: the library uses 0 in place of a maximum that is still $-\infty$ (so $e^{-\infty - 0} = 0$, with no `inf - inf`), returns output 0 and $L = -\infty$, as the plain path does:

# %%
masked = np.zeros((1, 1, 4, 6), dtype=bool)
masked[..., 2, :] = True  # query 2 may see no key
q1, k1, v1 = (np.random.default_rng(1).standard_normal((1, 1, n, 3)) for n in (4, 6, 6))
o1, lse1, _ = tiled_attention_forward(q1, k1, v1, masked, block_k=2)
print("row with no allowed key: output", o1[0, 0, 2], "  L =", lse1[0, 0, 2])
assert np.all(o1[0, 0, 2] == 0) and np.isneginf(lse1[0, 0, 2]) and np.isfinite(o1).all()

# %% [markdown]
# ## 3. The tiles
#
# Queries go in blocks of `block_q`, keys in tiles of `block_k`. With a causal mask (query $t$ sees keys $s \le t$), a tile whose first key comes after its block's last query is masked everywhere and is **skipped**; tiles crossing the diagonal are computed and masked inside.

# %%
show(tile_picture(T=32, S=32, block_q=8, block_k=8, causal=True))
states = tile_states(32, 32, 8, 8, causal=True)
n = states.shape[0]
print(f"tiles: {states.size}, computed: {(states != SKIPPED).sum()}, of them on the diagonal: {(states == PARTIAL).sum()}")
assert (
    (states != SKIPPED).sum() == n * (n + 1) // 2
    and (states == PARTIAL).sum() == n
    and (states == FULL).sum() == n * (n - 1) // 2
)

# %% [markdown]
# The computed fraction tends to one half as the number of tiles grows: a causal tiled pass computes about half the score tiles of full attention, so it does about half of full attention's score arithmetic (the other costs of a layer, such as the projections, do not shrink).

# %%
for n_tiles in (4, 16, 64):
    st = tile_states(8 * n_tiles, 8 * n_tiles, 8, 8)
    print(f"{n_tiles:3d} x {n_tiles:<3d} tiles: computed fraction {(st != SKIPPED).mean():.3f}")
assert abs((tile_states(512, 512, 8, 8) != SKIPPED).mean() - 0.5) < 0.01

# %% [markdown]
# The library's tiled forward gives the plain path's output, whatever the tile sizes. Small tiles (`block_k` = 3 keys) run the online softmax across many tiles; the default `block_k` (256 keys, or the whole row when it is shorter, as here) runs no rescaling at all:

# %%
B, h, T, S, d_k = 2, 4, 24, 24, 8
q, k, v, dout = (rng.standard_normal((B, h, n, d_k)) for n in (T, S, S, T))
causal = mhattn.causal_mask(T, S, np)
out, weights, cache = scaled_dot_product_attention_forward(q, k, v, causal)
for block_q, block_k in ((8, 3), (5, 7), (64, None)):
    out_t, lse, cache_t = tiled_attention_forward(q, k, v, causal=True, block_q=block_q, block_k=block_k)
    print(f"block_q={block_q:3d} block_k={block_k!s:>4}: relative difference from the plain output {rel_error(out_t, out):.1e}")
    assert rel_error(out_t, out) < 1e-13
scores = np.where(causal, -np.inf, q @ k.swapaxes(-1, -2) / np.sqrt(d_k))
assert np.allclose(lse, np.log(np.exp(scores).sum(-1)))  # L is each row's log-sum-exp

# %% [markdown]
# ## 4. The backward recomputes each tile from $L$
#
# The backward needs the weights $P$ again. Storing $L$, one number per query, is enough to rebuild any tile exactly:
#
# $$P_{ij} = e^{S_{ij} - L_i} \qquad \text{(Dao 2023, Algorithm 2, lines 10-11)}$$
#
# one exponential per entry, with no maximum and no sum, because $L_i$ already is the row's normaliser. The softmax's backward needs $\sum_j P_{ij}\, dP_{ij}$ per row; since $dP = dO\, V^\top$ and $O = P V$, that sum equals $D_i = \sum_c dO_{ic}\, O_{ic}$ (line 4), which needs only the output, never $P$. Then for each tile:
#
# $$\begin{aligned}
# dV_j &\mathrel{+}= P_{ij}^\top dO_i, & dP_{ij} &= dO_i V_j^\top, \\
# dS_{ij} &= P_{ij} \circ (dP_{ij} - D_i), & dQ_i &\mathrel{+}= dS_{ij} K_j / \sqrt{d_k}, \\
# dK_j &\mathrel{+}= dS_{ij}^\top Q_i / \sqrt{d_k} & &
# \end{aligned}$$
#
# (lines 12-16). **Why recomputing is cheap.** The plain backward does four matrix products per tile ($dV$, $dP$, $dQ$, $dK$); the tiled one adds a fifth, $Q K^\top$ again, and one `exp`. Counted in multiply-adds for a forward plus backward:


# %%
def attention_madds(T, S, d_k, tiled):
    """Multiply-adds of attention's matrix products, forward + backward, per (batch, head)."""
    forward = 2 * T * S * d_k  # Q K^T and P V
    backward = (5 if tiled else 4) * T * S * d_k
    return forward + backward


extra = attention_madds(4096, 4096, 64, True) / attention_madds(4096, 4096, 64, False)
print(f"tiled / plain multiply-adds: {extra:.3f}")
assert np.isclose(extra, 7 / 6)

# %% [markdown]
# One more product in seven: the price of never writing a `(T, S)` array to memory. Dao et al. (2022, the first FlashAttention paper: §3.1, "Recomputation", and Fig. 2, on an A100 GPU) measure the trade: FlashAttention does more FLOPs than standard attention but far fewer reads and writes of GPU memory, and runs faster; they name that memory traffic as the main factor in attention's run time there. Section 6 compares the two paths' times on this course's CPU.
#
# The same gradients as the plain path:

# %%
dq, dk, dv = scaled_dot_product_attention_backward(dout, cache)
_, _, cache_t = tiled_attention_forward(q, k, v, causal=True, block_q=8, block_k=3)
grads_t = tiled_attention_backward(dout, cache_t)
for name, a, b in zip(("dq", "dk", "dv"), (dq, dk, dv), grads_t, strict=True):
    print(f"{name}: relative difference {rel_error(a, b):.1e}")
    assert rel_error(a, b) < 1e-12

# %% [markdown]
# ## 5. The gradient check
#
# As in notebook 03: centred differences of $\langle f(x), dO \rangle$, in float64, against the hand-written backward, here with a padding mask, a causal mask and tiles small enough that every row spans several of them.

# %%
pad = np.zeros((1, 1, 1, 6), dtype=bool)
pad[..., -1] = True  # the last key is padding
qs, ks, vs = (rng.standard_normal((1, 2, 6, 3)) for _ in range(3))


def forward(q, k, v):
    return tiled_attention_forward(q, k, v, pad, causal=True, block_q=2, block_k=4)


errors = check_backward(forward, tiled_attention_backward, [qs, ks, vs])
print("relative errors dq, dk, dv:", [f"{e:.1e}" for e in errors])
assert max(errors) < 1e-7

# %% [markdown]
# ## 6. Time and memory against $T$, recorded
#
# The repository's `benchmarks/bench_tiled.py` (in a clone) times forward + backward of `MultiHeadAttention(512, 8)` (float32, `need_weights=False`) with the tiled path, the plain path and `torch.nn.MultiheadAttention` side by side, and measures the peak memory with `tracemalloc` (NumPy reports its allocations to it). The record shipped with mhattn was made on the course's 2-core CPU virtual machine, whose speed varies from run to run: read the ratios, not the absolute times. With only the wheel, `python -m mhattn.course.scaling --d-model 512 --attention tiled` and the same with `--attention plain` time the two paths on your machine (no torch column, no memory).

# %%
record = json.loads((Path(mhattn.__file__).parent / "data" / "attention_tiled_numpy.json").read_text())
print(f"device {record['device']}, NumPy {record['numpy']}, d_model {record['d_model']}, h {record['num_heads']}")
print("note:", record["note"].replace("see benchmarks/", "see, in a clone of the repository, benchmarks/"))
for r in record["speed"]:
    print(
        f"B {r['B']}, T {r['T']:5d}:  tiled/torch {r['tiled_s'] / r['torch_s']:.2f}   plain/torch {r['plain_s'] / r['torch_s']:.2f}"
    )
for r in record["memory"]:
    plain = f"{r['plain_bytes'] / 2**20:8.1f} MiB" if r["plain_bytes"] else "  not run (too large for this machine)"
    print(f"T {r['T']:5d}: tiled peak {r['tiled_bytes'] / 2**20:7.1f} MiB   plain peak {plain}")
show(tiled_record_figure(record))

# %% [markdown]
# What the record shows, each claim checked below: in this record the tiled path is faster than the plain path at every length. The record's note gives the run-to-run spread of one time ratio: at $T = 1024$ the gap between the two paths' ratios is within twice that spread, so one record cannot say the tiled path is faster there, while at $T \ge 2048$ the gap is larger than twice the spread. The tiled path's memory grows about linearly in $T$ (about $\times 2$ per doubling), the plain path's about quadratically (towards $\times 4$); and at the largest length the tiled peak is under an eighth of the plain peak at the largest length the plain path was run (a lower bound for the plain path at the larger $T$, since it only grows).

# %%
spread = float(re.search(r"ratios \+-([0-9.]+)", record["note"]).group(1))  # run-to-run spread of one ratio
gaps = {r["T"]: (r["plain_s"] - r["tiled_s"]) / r["torch_s"] for r in record["speed"]}  # plain/torch - tiled/torch
print("plain/torch - tiled/torch:", {T: round(g, 2) for T, g in gaps.items()}, f"  spread of one ratio: +-{spread}")
assert all(g > 0 for g in gaps.values())  # tiled faster at every length, in this record
assert gaps[1024] < 2 * spread and all(g > 2 * spread for T, g in gaps.items() if T >= 2048)
mem = record["memory"]
tiled_growth = [b["tiled_bytes"] / a["tiled_bytes"] for a, b in zip(mem, mem[1:], strict=False)]
plain_rows = [r for r in mem if r["plain_bytes"]]
plain_growth = [b["plain_bytes"] / a["plain_bytes"] for a, b in zip(plain_rows, plain_rows[1:], strict=False)]
print("tiled growth per doubling:", np.round(tiled_growth, 2), "  plain:", np.round(plain_growth, 2))
assert all(g < 2.5 for g in tiled_growth) and plain_growth[-1] > 3
assert mem[-1]["tiled_bytes"] <= plain_rows[-1]["plain_bytes"] / 8

# %% [markdown]
# ## 7. In `MultiHeadAttention`
#
# `MultiHeadAttention(..., attention="auto")` (the default) takes the tiled path when the weights are not asked for (`need_weights=False`), there is no dropout, and `B·h·T·S` is at least `MultiHeadAttention.TILED_MIN_SCORES`; `attention="tiled"` or `"plain"` forces a path. mhattn's dropout draws the whole `(B, h, T, S)` keep-mask and keeps it for the backward pass, so dropout stays on the plain path. That is this code's choice, not a necessity: FlashAttention (Dao et al. 2022, Appendix B, Algorithms 2 and 4) saves only the random generator's state in the forward pass and regenerates each tile's mask from it in the backward pass, so the whole mask is never stored. The switch changes nothing in the numbers:

# %%
x = rng.standard_normal((2, 40, 16))
results = []
for path in ("plain", "tiled"):
    mod = mhattn.MultiHeadAttention(16, 4, dtype="float64", seed=0, attention=path)
    y, _ = mod.forward(x, need_weights=False, is_causal=True)
    dx = mod.backward(np.ones_like(y))[0]
    results.append((y, dx, mod.grads["W_q"]))
print("output, dx, dW_q relative differences:", [f"{rel_error(a, b):.0e}" for a, b in zip(*results, strict=True)])
assert all(rel_error(a, b) < 1e-12 for a, b in zip(*results, strict=True))

# %% [markdown]
# ## Exercises
#
# * **Exercise 11** (`exercises/ex11_online_softmax.py`): write `online_attention_forward(q, k, v, block_k, mask)`, the forward of section 2 for whole arrays, returning the output and the log-sum-exp. Run `python -m pytest exercises/test_visible.py -m ex11`, then `mhattn grade --only ex11`.
#
# To try: time `tiled_attention_forward` with `block_k` from 64 up to `S` on your machine; where does the extra work of the rescaling stop mattering? And on a GPU, `python -m mhattn.course.scaling --backend cupy --attention tiled` times the tiled path; in a clone of the repository, `benchmarks/gpu_check.sh` compares both paths with torch's CUDA kernels (notebook 08 shows its record).
