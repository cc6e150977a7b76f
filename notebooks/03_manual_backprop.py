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
# # 03 · Manual backprop
#
# **Learning objectives.** After this notebook you can
#
# 1. derive the backward pass of each step of multi-head attention, next to its forward step, in the order the code runs;
# 2. check a backward pass against centred differences, and read a relative error;
# 3. recognise a wrong backward from its gradient check, and say which term it lost.

# %% [markdown]
# ## The forward steps, and the plan
#
# `mhattn.functional.mha` numbers the forward steps; its backward walks them in reverse and says which step it undoes:
#
# | step | forward | shape |
# |---|---|---|
# | 1 | $Q = XW_q + b_q$, $K = \ldots$, $V = \ldots$ | `(B, T, d_model)` |
# | 2 | split into heads | `(B, h, T, d_k)` |
# | 3 | scaled dot-product attention (scores, scale, softmax, weighted sum) | `(B, h, T, d_k)` |
# | 4 | head mask $\xi$: head $i$ times $\xi_i$ | `(B, h, T, d_k)` |
# | 5 | concat | `(B, T, d_model)` |
# | 6 | $\mathrm{out} = \mathrm{concat}\,W_o + b_o$ | `(B, T, d_model)` |
#
# For each step below: the forward, the backward derived from it, and a **gradient check**. `mhattn.gradcheck.check_backward` draws a random upstream gradient `dout`, runs the backward, and compares each input's gradient with centred differences
# $\frac{\partial}{\partial x_i}\langle f(x), \mathrm{dout}\rangle \approx \frac{\langle f(x + \epsilon e_i) - f(x - \epsilon e_i), \mathrm{dout}\rangle}{2\epsilon}$,
# reporting $\|a - n\| / (\|a\| + \|n\|)$ for the analytic gradient $a$ and the numerical one $n$. Below, a check passes when every input's relative error is under $10^{-7}$ (float64); each `report` call also asserts the verdict the text gives, so a re-run that disagrees fails.

# %%
import inspect

import numpy as np

from mhattn import functional as F
from mhattn.course import lessons
from mhattn.gradcheck import check_backward

rng = np.random.default_rng(0)
B, h, T, S, d_k = 2, 2, 3, 4, 3
d_model = h * d_k


def report(name, errors, inputs, expect_ok=True):
    """Print one gradient check; fail the cell (and nbval) if it does not come out as the prose says."""
    ok = all(e < 1e-7 for e in errors)
    print(
        f"{name:<32} {'OK' if ok else 'WRONG'}   ("
        + ", ".join(f"d{n}" for n in inputs)
        + f": max rel error {'< 1e-7' if ok else f'{max(errors):.2f}'})"
    )
    assert ok == expect_ok, f"{name}: expected {'a passing' if expect_ok else 'a failing'} check"


# %% [markdown]
# ## Step 1 and step 6: the linear maps
#
# Forward: $\mathrm{out} = xW + b$ on the last axis, with `W` stored `(d_in, d_out)`.
# Each output entry $\mathrm{out}_{nj} = \sum_i x_{ni} W_{ij} + b_j$, so
#
# * $\partial L/\partial x = \mathrm{dout}\, W^\top$ (each input feeds every output through $W_{ij}$),
# * $\partial L/\partial W = x^\top \mathrm{dout}$ summed over all positions $n$,
# * $\partial L/\partial b = \sum_n \mathrm{dout}_n$ (the bias is added at every position).

# %%
x, W, b = rng.standard_normal((B, T, d_model)), rng.standard_normal((d_model, d_model)), rng.standard_normal(d_model)
report("linear (steps 1 and 6)", check_backward(F.linear_forward, F.linear_backward, [x, W, b]), ["x", "W", "b"])

# %% [markdown]
# ## Steps 2 and 5: split and concat
#
# Both only move numbers: entry $(b, t, i d_k + j)$ of the input becomes entry $(b, i, t, j)$ of the output. A gradient flows back along the same move, reversed, so **the backward of split is concat, and the backward of concat is split**. No arithmetic at all.

# %%
split = lambda x: F.split_heads_forward(x, h)
report("split heads (step 2)", check_backward(split, F.split_heads_backward, [x]), ["x"])
heads = rng.standard_normal((B, h, T, d_k))
report("combine heads (step 5)", check_backward(F.combine_heads_forward, F.combine_heads_backward, [heads]), ["heads"])

# %% [markdown]
# ## Step 3: scaled dot-product attention, sub-steps 0 to 5
#
# Inside step 3, `scaled_dot_product_attention_forward` numbers its own sub-steps 0 to 5 in its comments, and the backward's comments ("step 5 was: ...") walk them in reverse. The table uses the same numbers, as 3.0 to 3.5:
#
# | forward (code comment "# n.") | backward (code comment "step n was") |
# |---|---|
# | 3.0 zero the keys that every query is masked from (so NaN or inf there cannot leak) | nothing to undo: their weights are 0, so `dk` and `dv` are 0 there |
# | 3.1 `scores = q @ k^T` | `dq = dscores @ k`, `dk = dscores^T @ q` |
# | 3.2 `scores *= 1/sqrt(d_k)` | `dscores *= 1/sqrt(d_k)` |
# | 3.3 mask, then `weights = softmax(scores)` | `dscores = p * (dweights - sum(dweights * p))` |
# | 3.4 dropout on the weights (none here: `dropout_p = 0`) | the same kept entries and rescaling |
# | 3.5 `out = dropped @ v` (`dropped` = weights after dropout) | `dweights = dout @ v^T`, `dv = dropped^T @ dout` |
#
# **The softmax row.** With $p_i = e^{s_i} / \sum_j e^{s_j}$, the Jacobian is $\partial p_i / \partial s_j = p_i(\delta_{ij} - p_j)$, i.e. $J = \mathrm{diag}(p) - pp^\top$. It is symmetric, so $\mathrm{dscores} = J\,\mathrm{dp} = p \odot (\mathrm{dp} - \langle \mathrm{dp}, p\rangle)$: one dot product per row, never the $S \times S$ matrix. A masked entry has $p_i = 0$, so its gradient is 0, as it should be.
#
# The softmax's own forward has four numbered steps (mask, subtract the row maximum, exponentiate, normalise); its backward undoes all four with that one formula:

# %%
print(inspect.getsource(F.softmax_backward))

# %%
scores = rng.standard_normal((B, h, T, S))
report("softmax (step 3.3)", check_backward(F.softmax_forward, F.softmax_backward, [scores]), ["scores"])
q, k, v = rng.standard_normal((B, h, T, d_k)), rng.standard_normal((B, h, S, d_k)), rng.standard_normal((B, h, S, d_k))
attention = lambda q, k, v: F.scaled_dot_product_attention_forward(q, k, v, F.causal_mask(T, S, xp=np))
report("attention, causal (step 3)", check_backward(attention, F.scaled_dot_product_attention_backward, [q, k, v]), "qkv")

# %% [markdown]
# The attention backward: read its comments bottom-up against the table, from "step 5 was" to "step 0 was".

# %%
print(inspect.getsource(F.scaled_dot_product_attention_backward))

# %% [markdown]
# ## Step 4: the head mask
#
# Forward: $\tilde h_i = \xi_i h_i$. Backward: $\partial L/\partial h_i = \xi_i\, \partial L/\partial \tilde h_i$ and $\partial L/\partial \xi_i = \langle h_i, \partial L/\partial \tilde h_i \rangle$, summed over positions and features. Michel et al. (2019, §4.1, "Head Importance Score for Pruning") rank heads by the *absolute* value of that number averaged over the data, $I_h = \mathbb{E}_x |\partial L(x)/\partial \xi_h|$, and normalise the scores within each layer by their ℓ2 norm; the signed $\partial L/\partial \xi_i$ here is the ingredient, computed per example: exercise 9.
#
# ## All six steps together
#
# `multi_head_attention_backward` chains the steps above in reverse. Checked against centred differences for the three inputs, with fixed random parameters (cross-attention: `T = 3` queries, `S = 4` keys):

# %%
params = {n: rng.standard_normal((d_model, d_model)) / np.sqrt(d_model) for n in ("W_q", "W_k", "W_v", "W_o")}
params.update({n: 0.1 * rng.standard_normal(d_model) for n in ("b_q", "b_k", "b_v", "b_o")})
query, key, value = (
    rng.standard_normal((B, T, d_model)),
    rng.standard_normal((B, S, d_model)),
    rng.standard_normal((B, S, d_model)),
)
mha_fwd = lambda q, k, v: F.multi_head_attention_forward(q, k, v, params, h)
mha_bwd = lambda dout, cache: F.multi_head_attention_backward(dout, cache)[:3]
report("multi-head attention (all)", check_backward(mha_fwd, mha_bwd, [query, key, value]), ["query", "key", "value"])

# %% [markdown]
# ## A wrong backward, caught
#
# A tempting shortcut treats each softmax output as if it depended only on its own score: it keeps the diagonal $p_i(1 - p_i)$ of the Jacobian and drops the off-diagonal $-p_i p_j$ ($j \ne i$). Shapes still fit and nothing crashes; only the gradient check can tell.

# %%
print(inspect.getsource(lessons.softmax_backward_diagonal_only))
report(
    "softmax, diagonal-only backward",
    check_backward(F.softmax_forward, lessons.softmax_backward_diagonal_only, [scores]),
    ["scores"],
    expect_ok=False,
)

# %% [markdown]
# Write the correct row out: $\mathrm{dscores}_i = p_i\big(\mathrm{dp}_i - \sum_j p_j \mathrm{dp}_j\big) = \underbrace{p_i(1 - p_i)\,\mathrm{dp}_i}_{\text{kept}} \; \underbrace{-\, p_i \sum_{j \ne i} p_j \mathrm{dp}_j}_{\text{dropped}}$.
# The dropped term sums over the *other* keys $j \ne i$ (the $j = i$ part of $\sum_j$ is what turns $p_i$ into $p_i(1 - p_i)$ in the kept term). How large is it? On the same scores, with a random upstream gradient:

# %%
p, sm_cache = F.softmax_forward(scores)
dp = rng.standard_normal(scores.shape)
kept = p * (1 - p) * dp
dropped = -p * ((p * dp).sum(-1, keepdims=True) - p * dp)  # -p_i * sum over j != i of p_j dp_j
print(f"||kept|| = {np.linalg.norm(kept):.3f}   ||dropped|| = {np.linalg.norm(dropped):.3f}")
print("kept + dropped equals mhattn's softmax_backward:", np.allclose(kept + dropped, F.softmax_backward(dp, sm_cache)))
assert np.allclose(kept + dropped, F.softmax_backward(dp, sm_cache))
assert np.linalg.norm(dropped) > 0.3 * np.linalg.norm(kept)  # not a small correction

# %% [markdown]
# The dropped term is of the same order as the kept one (both norms are printed above, and the cell asserts that the dropped one is more than 0.3 times the kept one), so the check fails by far more than rounding. In a training run this bug would not crash: the optimiser would follow a direction that is not the gradient, and nothing would report it. Only a check like this one does, which is why every backward in mhattn is gradient-checked in the test suite.
#
# ## Exercises
#
# * **Exercise 2** (`ex02_softmax.py`): softmax forward and backward (the diagonal-only backward above scores none of the backward's points).
# * **Exercise 4** (`ex04_attention_backward.py`): attention backward, steps 3.5 to 3.1 (without dropout).
# * **Exercise 7** (`ex07_mha_backward.py`): the whole chain, every parameter's gradient.
#
# Use `mhattn.gradcheck.check_backward` on your own functions before you run `mhattn grade`.
