# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · One sentence through multi-head attention: d_model = 512, h = 8, d_k = 64
#
# **Learning objectives.** After this notebook you can
# - name every array in a multi-head attention layer and give its shape, from the input `(B, T, 512)` to the output `(B, T, 512)`;
# - say where the split into 8 heads of 64 happens (after the projections, before the scores) and where the heads meet again (the concat, then `W_o`);
# - read a per-head attention heatmap;
# - count the layer's parameters, and explain why the count does not depend on h, and why a formula often quoted for it counts a different layer.
#
# Everything below calls `mhattn`; the maths lives in `mhattn/functional/` (Vaswani et al. 2017, §3.2).

# %%
import numpy as np

import mhattn
from mhattn.course import counting, lessons, walkthrough
from mhattn.course.display import show
from mhattn.plots.attention import attention_heatmaps

print("backend:", mhattn.get_backend())

# %% [markdown]
# ## The input
#
# A real sentence, split on whitespace. Each distinct word gets a row of a seeded random table (a stand-in for a learned embedding), so the input is `X` of shape `(B, T, d_model) = (1, 12, 512)`.

# %%
wt = walkthrough.run(walkthrough.SENTENCE, d_model=512, num_heads=8, seed=0)
print(len(wt.tokens), "tokens:", wt.tokens)

# %% [markdown]
# ## Every step and its shape
#
# `walkthrough.run` calls the textbook steps from `mhattn.functional` one at a time and keeps each intermediate:
#
# The steps carry the numbers `mhattn.functional.mha` uses, and each lives in the file of its name:
#
# 1. **Projections** (`linear.py`). `Q = X W_q + b_q`, and the same for `K` and `V`. Each `W` is `(512, 512)`: it is the eight per-head matrices `W^Q_i` of shape `(512, 64)` stored side by side.
# 2. **Split** (`split_heads.py`). The last axis of 512 is cut into 8 slices of 64 and the head axis is moved forward: `(1, 12, 512)` becomes `(1, 8, 12, 64)`. No numbers change; it is a reshape and a transpose.
# 3. **Attention in every head** (`attention.py`), in three parts:
#    - 3a. **Scores.** Every query is compared with every key: `q k^T / sqrt(64)`, shape `(1, 8, 12, 12)`.
#    - 3b. **Weights** (`softmax.py`). A softmax over the key axis turns each row of scores into a distribution.
#    - 3c. **Per-head outputs.** Each head takes a weighted sum of its values, `(1, 8, 12, 64)`.
# 4. **Head mask** (`mha.py`). Each head's output may be scaled by a gate ξ_i (notebook 03); here there is none, so nothing changes.
# 5. **Concat** (`split_heads.py`). The heads are put side by side again: `(1, 12, 512)`.
# 6. **Output projection** (`linear.py`). `concat W_o + b_o`, `(1, 12, 512)`.

# %%
print(walkthrough.format_steps(wt))

# %% [markdown]
# The step-by-step result is the same as one call of `MultiHeadAttention.forward` with the same weights (the module fuses the three projections into one matrix product for self-attention):

# %%
print(f"max |step-by-step - module| = {wt.max_diff_vs_module:.1e}")
assert wt.max_diff_vs_module < 1e-4  # float32 rounding only

# %% [markdown]
# ## What each head looks at
#
# One heatmap per head: row t shows how query token t spreads its attention over the 12 keys. The weights are untrained, so the patterns are random, but they already differ from head to head because each head has its own slice of `W_q` and `W_k`. Notebooks 05 and 06 show heads after training.

# %%
show(attention_heatmaps(wt.weights[0], wt.tokens, title="MultiHeadAttention(512, 8): weights per head (untrained)"))

# %%
w = mhattn.to_numpy(wt.weights[0])  # (h, T, S)
print("each row sums to 1:", np.allclose(w.sum(-1), 1.0))
print("largest weight per head:", np.round(w.max(axis=(1, 2)), 3))
assert np.allclose(w.sum(-1), 1.0) and np.ptp(w.max(axis=(1, 2))) > 0  # rows are distributions; heads differ

# %% [markdown]
# ## Counting parameters
#
# In the standard layer, head i has `W^Q_i`, `W^K_i` and `W^V_i` of shape `(d_model, d_k)`: each head reads **all** 512 input features and writes its own 64. Three such matrices per head over 8 heads are `3 · 8 · 512 · 64 = 3 · 512²`; `W_o` adds `512²`. So the layer has `4 · d_model²` weights (plus `4 · d_model` biases) for any h that divides d_model. The module agrees:

# %%
d = 512
for h in (1, 2, 8, 16):
    m = mhattn.MultiHeadAttention(d, h, seed=0)
    print(f"h={h:2d}  d_k={d // h:3d}  parameters={m.num_parameters():,}  (4*d^2 + 4*d = {4 * d * d + 4 * d:,})")
    assert m.num_parameters() == 4 * d * d + 4 * d

# %% [markdown]
# Eight heads of 64 have exactly as many parameters as one head of 512 (asserted in the loop above).
#
# ### And the same arithmetic
#
# Vaswani et al. (2017) give no formula for this count. What they state in §3.2.2 is a claim about cost: "due to the reduced dimension of each head, the total computational cost is similar to that of single-head attention with full dimensionality". Their Table 3 (§6.2) does list whole-model parameter counts: rows (A) vary h with d_k = d_v = d_model/h and leave the count blank, and the caption says that unlisted values are those of the base model, so the count is the same for every h there, as above. Count the floating-point operations of one forward pass at fixed d_model = 512 (`counting.attention_flops`; B = 1, T = S = 128):

# %%
flops = {h: counting.attention_flops(1, 128, 128, d, h) for h in (1, 2, 4, 8, 16)}
print(f"{'h':>3} {'d_k':>4} {'projections':>14} {'q k^T':>12} {'weights @ v':>12} {'softmax entries':>16}")
for h, f in flops.items():
    print(f"{h:>3} {d // h:>4} {f['projections']:>14,} {f['scores']:>12,} {f['weighted_sum']:>12,} {f['softmax_entries']:>16,}")
matmuls = {h: f["projections"] + f["scores"] + f["weighted_sum"] for h, f in flops.items()}
assert len(set(matmuls.values())) == 1  # every matrix product: the same FLOPs for every h
assert flops[16]["softmax_entries"] == 16 * flops[1]["softmax_entries"]  # only the softmax grows with h
assert flops[16]["softmax_entries"] < 0.01 * matmuls[16]  # and it is cheap next to the products

# %% [markdown]
# Every matrix product costs the same for every h (asserted); only the softmax has h times as many entries, and in this count they are few next to the products' operations (under 1%, asserted). Measured time need not follow this count: notebook 08 measures when it does (while T is small against 2 d_model, as here) and when it does not. The times below are printed, not checked (they depend on the machine and its load); compare them yourself:

# %%
# NBVAL_IGNORE_OUTPUT
x128 = np.random.default_rng(0).standard_normal((1, 128, d)).astype(np.float32)
for h in (1, 2, 4, 8, 16):
    t = lessons.time_attention(mhattn.MultiHeadAttention(d, h, seed=0), x128, repeats=5)
    print(f"h={h:2d}: forward {t['forward_s'] * 1e3:6.1f} ms   backward {t['backward_s'] * 1e3:6.1f} ms (best of 5)")

# %% [markdown]
# ### A formula often quoted for this count counts another layer
#
# Explanations of multi-head attention sometimes give the count as `h · 3 · (d_model/h)² + d_model²` and say it simplifies to `4 · d_model²`, "the same as single-head attention". The paper gives no such formula (what it says is the cost claim of §3.2.2 and the whole-model counts of Table 3, both cited above), and the formula does not simplify that way. With d_model = 512 and h = 8:

# %%
d, h = 512, 8
print(f"h*3*(d/h)^2 + d^2 = {counting.count_block_diagonal(d, h):,}")
print(f"4*d^2             = {4 * d * d:,}")
print(f"the formula at h=1: {counting.count_block_diagonal(d, 1):,}; at h=8: {counting.count_block_diagonal(d, h):,}")
assert counting.count_block_diagonal(d, 1) == 4 * d * d != counting.count_block_diagonal(d, h)

# %% [markdown]
# `h · 3 · (d/h)² + d² = 3d²/h + d²`, which equals `4d²` only when h = 1. The formula also contradicts the claim it comes with, that the count does not depend on h.
#
# What it does count is a layer where head i's projections are `(d_k, d_k)` matrices that read only the head's own 64-feature slice of the input. Stored side by side, those are **block-diagonal** `(512, 512)` matrices. `mhattn.course.counting.block_diagonal_mha` builds that layer; count its free entries:

# %%
block = counting.block_diagonal_mha(d, h, seed=0)
mask = counting.block_diagonal_mask(d, h)
free = counting.free_parameters(block, {"W_q": mask, "W_k": mask, "W_v": mask})
print(f"block-diagonal layer, weights only: {free - 4 * d:,}  (formula: {counting.count_block_diagonal(d, h):,})")
print(f"standard layer, weights only:       {counting.standard_count(d, h, bias=False):,}")
assert free - 4 * d == counting.count_block_diagonal(d, h)

# %% [markdown]
# The difference is not just bookkeeping. In the block-diagonal layer, changing input features 0–63 can only change head 0's query; in the standard layer it changes every head's query:

# %%
rng = np.random.default_rng(1)
x = rng.standard_normal((1, 4, d)).astype(np.float32)
x2 = x.copy()
x2[..., :64] += 1.0  # change only the first 64 input features
standard = mhattn.MultiHeadAttention(d, h, seed=0)
for name, layer in (("standard", standard), ("block-diagonal", block)):
    W = mhattn.to_numpy(layer.params["W_q"])
    dq = ((x2 - x) @ W).reshape(4, h, d // h)  # change in each head's query
    changed = [i for i in range(h) if np.abs(dq[:, i]).max() > 0]
    print(f"{name:15s}: heads whose query changed: {changed}")
    assert changed == (list(range(h)) if layer is standard else [0])

# %% [markdown]
# So the standard layer spends `4 d_model²` weights whatever h is, and each head sees the whole input; the block-diagonal layer is cheaper (`3 d_model²/h + d_model²`) but each head sees only its slice before attention.
#
# ## Exercises
#
# - **Exercise 1** (`exercises/ex01_split_heads.py`), **5** (`exercises/ex05_combine_heads.py`) and **6** (`exercises/ex06_mha_forward.py`) rebuild the steps of this notebook: split, combine, output projection and the full forward.
# - **Exercise 8** (`exercises/ex08_count_parameters.py`) asks you to count parameters for both layers.
#
# Read `exercises/README.md` (sections 1, 5, 6 and 8), then run `mhattn grade --only ex01 ex05 ex06 ex08`.
