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
# # 02 · Scaled dot-product attention
#
# Vaswani et al. (2017, §3.2.1, eq. 1):
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$
#
# **Learning objectives.** After this notebook you can
#
# 1. show with numbers why the scores are divided by $\sqrt{d_k}$: the variance of a dot product grows with $d_k$, and large scores saturate the softmax: in wide heads (here d_k = 1024, not yet at the usual 64) most queries then get almost no gradient and a few get large, spiky ones;
# 2. explain why a softmax subtracts the row maximum before `exp`, and see the overflow when it does not;
# 3. build and read causal and padding masks, including a query that may see no key at all;
# 4. draw attention weights as heatmaps.

# %%
import numpy as np
from matplotlib.figure import Figure

import mhattn
from mhattn.course import lessons
from mhattn.course.display import show
from mhattn.functional import (
    causal_mask,
    scaled_dot_product_attention_backward,
    scaled_dot_product_attention_forward,
    softmax_forward,
)
from mhattn.plots.attention import attention_heatmaps

np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## 1. The variance of a dot product grows like $d_k$
#
# Take $q, k \in \mathbb{R}^{d_k}$ with independent entries of mean 0 and variance 1. Each product $q_i k_i$ has mean 0 and variance 1, and the $d_k$ products are independent, so
# $\mathrm{Var}(q \cdot k) = d_k$ (Vaswani et al. 2017, §3.2.1, footnote 4). Dividing by $\sqrt{d_k}$ divides the variance by $d_k$, back to 1, whatever the head size. Sampled:

# %%
rows = lessons.dot_product_variance([1, 4, 16, 64, 256, 1024], n=20_000, seed=0)
print(f"{'d_k':>6} {'Var(q.k)':>10} {'Var(q.k)/d_k':>13} {'Var(q.k / sqrt(d_k))':>22}")
for r in rows:
    print(f"{r['d_k']:>6} {r['var_raw']:>10.1f} {r['var_raw'] / r['d_k']:>13.2f} {r['var_scaled']:>22.2f}")
# the claims above: Var(q.k) is about d_k, and the scaled variance is about 1, for every d_k (within 5%)
assert all(abs(r["var_raw"] / r["d_k"] - 1) < 0.05 and abs(r["var_scaled"] - 1) < 0.05 for r in rows)

# %% [markdown]
# ## 2. Why a large variance hurts: a saturated softmax
#
# With the unit-variance entries of section 1, unscaled scores of a wide head have a standard deviation of $\sqrt{d_k}$, so two scores of one row differ by many units, and `exp` turns a gap of $g$ into a factor $e^g$:

# %%
print(f"standard deviation of unscaled scores at d_k = 512: {np.sqrt(512):.1f}")
print(f"exp(20) = {np.exp(20):.2e}: the weight ratio of two keys whose scores differ by 20")

# %% [markdown]
# So nearly all the weight goes to one key. Such a row is almost one-hot, and the softmax Jacobian $J = \mathrm{diag}(p) - pp^\top$ is then almost zero. Below: one query over 16 random keys, averaged over 2000 draws; the columns are the mean largest weight and the mean Frobenius norm $\|J\|$ (the square root of the sum of its squared entries).

# %%
d_ks = [4, 16, 64, 256, 1024]
stats = {s: [lessons.softmax_saturation(d, S=16, scaled=s, seed=1) for d in d_ks] for s in (True, False)}
print(f"{'d_k':>6} | {'largest weight':^23} | {'||diag(p) - p p^T||':^27}")
print(f"{'':>6} | {'scaled':>10} {'unscaled':>12} | {'scaled':>10} {'unscaled':>16}")
for i, d in enumerate(d_ks):
    a, b = stats[True][i], stats[False][i]
    print(f"{d:>6} | {a['max_weight']:>10.2f} {b['max_weight']:>12.2f} | {a['grad_norm']:>10.3f} {b['grad_norm']:>16.3f}")
scaled_max = [r["max_weight"] for r in stats[True]]
unscaled_max, unscaled_jac = [r["max_weight"] for r in stats[False]], [r["grad_norm"] for r in stats[False]]
# claims: scaled rows stay equally peaked whatever d_k; unscaled rows get more one-hot and J shrinks as d_k grows
assert max(scaled_max) - min(scaled_max) < 0.05
assert unscaled_max == sorted(unscaled_max) and unscaled_max[-1] > 0.9
assert unscaled_jac == sorted(unscaled_jac, reverse=True)

# %% [markdown]
# ### What reaches $q$ is not $J$ alone
#
# $\|J\|$ is not the gradient. Going backwards through $s_j = q \cdot k_j$ (times $1/\sqrt{d_k}$ when scaled), the gradient reaching the query is $\partial L/\partial q = \sum_j \mathrm{dscores}_j\, k_j$ with $\mathrm{dscores} = J\,\mathrm{dweights}$: the Jacobian's output is **multiplied by the keys**, whose length grows like $\sqrt{d_k}$, and without the scaling nothing divides that growth away. So an unscaled wide head does two things at once: most rows are one-hot and pass almost nothing back, while the few rows where two scores nearly tie have a large $J$ times long keys, and pass back large, spiky gradients. `lessons.query_gradient_norms` measures $\|\partial L/\partial q\|$ per query with mhattn's own attention backward (random $q, k, v$ and upstream gradient); the table gives its median and upper percentiles over 2000 queries.

# %%
print(f"{'d_k':>6} {'':>9} {'median':>9} {'90th pct':>9} {'99th pct':>9} {'max':>9} {'rows < 1e-3':>12}")
norms = {}
for d in d_ks:
    for scaled in (True, False):
        g = norms[d, scaled] = lessons.query_gradient_norms(d, S=16, scaled=scaled, seed=2)
        pct = np.percentile(g, [50, 90, 99])
        label = "scaled" if scaled else "unscaled"
        print(f"{d:>6} {label:>9} {pct[0]:>9.3f} {pct[1]:>9.2f} {pct[2]:>9.1f} {g.max():>9.1f} {np.mean(g < 1e-3):>12.0%}")

# %% [markdown]
# At the widest head in the table, the unscaled median query gets a gradient many times smaller than the scaled one, while its largest gradients are many times larger. The cell below checks exactly that, with factors of 100 and 10. At d_k = 64, the head width of Vaswani et al.'s base model, the starving has not set in: the unscaled median query gets *more* gradient than the scaled one, and only its tail is spiky (also checked below):

# %%
wide = d_ks[-1]
sc, un = norms[wide, True], norms[wide, False]
print(f"d_k = {wide}: median unscaled / scaled = {np.median(un) / np.median(sc):.4f}")
print(f"d_k = {wide}: 99th percentile unscaled / scaled = {np.percentile(un, 99) / np.percentile(sc, 99):.1f}")
print(f"d_k = {wide}: share of unscaled queries with ||dq|| < 1e-3: {np.mean(un < 1e-3):.0%} (scaled: {np.mean(sc < 1e-3):.0%})")
assert np.median(un) < np.median(sc) / 100  # most rows get almost nothing
assert np.percentile(un, 99) > 10 * np.percentile(sc, 99)  # a few get large, spiky gradients
sc64, un64 = norms[64, True], norms[64, False]
print(f"d_k = 64: median unscaled / scaled = {np.median(un64) / np.median(sc64):.2f}; "
      f"99th percentile unscaled / scaled = {np.percentile(un64, 99) / np.percentile(sc64, 99):.1f}")  # fmt: skip
assert np.median(un64) > np.median(sc64)  # at d_k = 64 the typical unscaled query is not starved
assert np.percentile(un64, 99) > 5 * np.percentile(sc64, 99)  # but its tail is already spiky

# %%
fig = Figure(figsize=(9, 3.4), layout="constrained")  # no pyplot state; titles never overlap
axes = fig.subplots(1, 2)
for scaled, style in ((True, "o-"), (False, "s--")):
    label = "q.k / sqrt(d_k)" if scaled else "q.k (unscaled)"
    axes[0].plot(d_ks, [r["max_weight"] for r in stats[scaled]], style, label=label)
    axes[1].plot(d_ks, [np.median(norms[d, scaled]) for d in d_ks], style, label=f"median, {label}")
    axes[1].plot(d_ks, [np.percentile(norms[d, scaled], 99) for d in d_ks], style, alpha=0.4, label=f"99th pct, {label}")
axes[0].axhline(1 / 16, color="gray", lw=0.8, ls=":")
axes[0].set(xscale="log", xlabel="d_k", ylabel="mean largest weight (1/16 = flat)", title="weights")
axes[1].set(xscale="log", yscale="log", xlabel="d_k", ylabel="||dL/dq|| per query", title="gradient reaching q")
axes[0].legend(fontsize=8)
axes[1].legend(fontsize=7)
show(fig)
medians = [np.median(norms[d, True]) for d in d_ks]  # scaled: the median gradient reaching q, per d_k
assert medians == sorted(medians)

# %% [markdown]
# With the scaling, the weights stay equally peaked as $d_k$ grows, and the gradient reaching $q$ grows smoothly with the key length. Without it, and with unit-variance queries and keys as here, wide heads attend nearly one-hot: at d_k = 1024 a typical query learns almost nothing, and a rare one gets a kick. The condition matters: at d_k = 64 (16 keys, unit-variance inputs as here) the typical unscaled query is not starved, and what the scaling removes there is the spiky tail.
#
# ## 3. A softmax that does not overflow
#
# `exp(1000)` is `inf` in float64, and `inf / inf` is NaN. Since $\mathrm{softmax}(s) = \mathrm{softmax}(s - c)$ for any constant $c$, mhattn subtracts each row's maximum first: the largest exponent becomes $e^0 = 1$, and nothing can overflow.

# %%
s = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, 1002.0]])
naive, stable = lessons.naive_softmax(s), softmax_forward(s)[0]
print("naive exp(s) / sum exp(s):\n", naive)
print("mhattn softmax_forward:\n", stable)
assert np.isnan(naive[1]).all() and np.allclose(stable[0], stable[1])  # same row up to a shift: same weights

# %% [markdown]
# ## 4. Masks
#
# mhattn follows the convention of torch's `nn.MultiheadAttention` (its `attn_mask` and `key_padding_mask`): a boolean mask is **True where attention is not allowed**. A masked score is replaced by $-\infty$, so its weight is exactly 0. Beware: torch's `F.scaled_dot_product_attention` reads a boolean `attn_mask` the other way round, **True where attention is allowed** (its documentation says so), so a mask passed from one to the other must be inverted (`~mask`).
#
# * **Causal** (decoder self-attention): query $t$ may see keys $0..t$, its own position included. The mask is True strictly above the diagonal.
# * **Padding**: sequences in a batch are padded to one length; a `key_padding_mask` of shape `(B, S)` hides the padding keys from every query.

# %%
T = 5
print("causal_mask(5) as 0/1 (1 = hidden):\n", causal_mask(T).astype(int))
key_padding = np.array([[False, False, False, True, True]])  # the last two keys are padding
combined = causal_mask(T)[None, None] | key_padding[:, None, None, :]  # (1, 1, T, S)
print("causal | padding:\n", combined[0, 0].astype(int))

# %%
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 1, T, 4)) for _ in range(3))  # (B, h, T, d_k)
_, w_causal, _ = scaled_dot_product_attention_forward(q, k, v, causal_mask(T))
_, w_both, _ = scaled_dot_product_attention_forward(q, k, v, combined)
print("weights, causal:\n", w_causal[0, 0])
print("weights, causal + padding:\n", w_both[0, 0])
print("row sums:", w_both[0, 0].sum(axis=-1))
assert (w_both[0, 0][combined[0, 0]] == 0).all()  # every hidden entry is exactly 0
assert (w_both[0, 0, 3:, :3] > 0).all()  # rows 3 and 4 still see keys 0..2

# %% [markdown]
# ### A query that may see nothing
#
# Rows 3 and 4 above still see keys 0..2 (asserted). But if *every* key of a row is hidden (here: a sequence whose first keys are padding, under a causal mask, so queries 0 and 1 may see only keys 0 and 1, which are both padding), the softmax has nothing to normalise. Computing it naively gives $0/0$ = NaN, which then spreads to every gradient. torch answers differently by path: `nn.MultiheadAttention` returns NaN there on some of its paths (pytorch/pytorch#41508), while `F.scaled_dot_product_attention` returns zeros for such rows in recent versions (pytorch/pytorch#133882). mhattn's choice is the zeros: such a row gets **all-zero weights**, its output is zero, and it passes no gradient back (all three asserted below).

# %%
left_padded = np.array([[True, True, False, False, False]])  # keys 0 and 1 are padding
mask = causal_mask(T)[None, None] | left_padded[:, None, None, :]
out, w, cache = scaled_dot_product_attention_forward(q, k, v, mask)
print("weights:\n", w[0, 0])
print("row sums:", w[0, 0].sum(axis=-1), "  any NaN in out:", bool(np.isnan(out).any()))
assert (w[0, 0, :2] == 0).all() and (out[0, 0, :2] == 0).all() and not np.isnan(out).any()
dout = np.ones_like(out)
dq, dk, dv = scaled_dot_product_attention_backward(dout, cache)
dout_empty = dout.copy()
dout_empty[0, 0, :2] = 7.0  # another upstream gradient on the two empty rows only
_, dk_empty, dv_empty = scaled_dot_product_attention_backward(dout_empty, cache)
print("largest |dq| on the two empty rows:", float(np.abs(dq[0, 0, :2]).max()))
# no gradient through the empty rows: dq is 0 there, and their upstream gradient changes neither dk nor dv
assert (dq[0, 0, :2] == 0).all() and np.isfinite(dq).all()
assert np.array_equal(dk, dk_empty) and np.array_equal(dv, dv_empty)

# %% [markdown]
# ## 5. Heatmaps
#
# A `MultiHeadAttention(32, 4)` with random weights, on 8 tokens of which the last 2 are padding, with a causal mask. Each panel is one head: rows are queries, columns keys, brighter is more weight (the colour bar gives the scale). The upper triangle and the padding columns are dark in every head (asserted below the figure); inside the allowed region each head has its own pattern, because each head has its own $W^Q_i$ and $W^K_i$.

# %%
tokens = ["the", "cat", "sat", "on", "the", "mat", "<pad>", "<pad>"]
T = len(tokens)
mha = mhattn.MultiHeadAttention(32, 4, seed=0)
x = np.random.default_rng(1).standard_normal((1, T, 32)).astype(np.float32)
pad = np.array([[False] * 6 + [True] * 2])
_, w = mha(x, attn_mask=causal_mask(T), key_padding_mask=pad, average_attn_weights=False)
show(attention_heatmaps(w[0], tokens, title="4 heads, causal mask + padding"))

# %%
hidden = causal_mask(T) | pad[0][None, :]  # (T, S) True = hidden
print("largest weight on a hidden entry, any head:", float(np.abs(w[0][:, hidden]).max()))
print(f"heads differ: max |head 0 - head 1| = {float(np.abs(w[0, 0] - w[0, 1]).max()):.3f}")
assert (w[0][:, hidden] == 0).all() and np.abs(w[0, 0] - w[0, 1]).max() > 0.05

# %% [markdown]
# ## Exercises
#
# * **Exercise 2** (`exercises/ex02_softmax.py`): a stable, masked softmax and its backward.
# * **Exercise 3** (`exercises/ex03_attention_forward.py`): the causal mask and attention forward, with the $1/\sqrt{d_k}$ scaling.
#
# Read `exercises/README.md` (sections 2 and 3), then run `python -m pytest exercises/test_visible.py -m "ex02 or ex03"` and `mhattn grade --only ex02 ex03`.
