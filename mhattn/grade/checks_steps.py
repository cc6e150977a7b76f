"""Checks for exercises 1-5: split heads, softmax, attention forward/backward, combine heads.

Each exercise has ``visible(mod, box)`` (fixed small inputs a learner can read) and
``hidden(mod, box, rng)`` (fresh random shapes and values, compared with mhattn's own
functions). Both raise :class:`GradeFailure` with a one-line reason.
"""

from __future__ import annotations

import numpy as np

from mhattn.functional import (
    causal_mask,
    combine_heads_forward,
    scaled_dot_product_attention_backward,
    scaled_dot_product_attention_forward,
    softmax_backward,
    softmax_forward,
    split_heads_forward,
)
from mhattn.grade.harness import GradeFailure, check_array, expect_raises, tol_for


def random_dims(rng):
    """B, h, T, S, d_k for one hidden trial: h >= 2 and T != h, so a swapped axis shows."""
    h = int(rng.integers(2, 6))
    T = int(rng.choice([t for t in range(2, 9) if t != h]))
    return int(rng.integers(1, 4)), h, T, int(rng.integers(2, 9)), int(rng.integers(2, 7))


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def trials(rng, n=3):
    """(dims, dtype) for n hidden trials, both float64 and float32 among them."""
    return [(random_dims(rng), np.float64 if i % 2 == 0 else np.float32) for i in range(n)]


# ---- exercise 1: split heads --------------------------------------------------------------
def visible_ex01(mod, box):
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)  # B=2, T=3, d_model=4
    got = box.call(mod.split_heads, x, 2)
    check_array("split_heads(x (2, 3, 4), num_heads=2)", got, split_heads_forward(x, 2)[0], 0.0)
    if got[0, 1, 0].tolist() != [2.0, 3.0]:
        raise GradeFailure("split_heads: head 1 of position 0 must hold features 2:4 of position 0")
    expect_raises(box, ValueError, mod.split_heads, x, 3, what="split_heads with d_model=4, num_heads=3")


def hidden_ex01(mod, box, rng):
    for (B, h, T, _S, d_k), dtype in trials(rng):
        x = randn(rng, (B, T, h * d_k), dtype)
        got = box.call(mod.split_heads, x, h)
        check_array(f"split_heads(x {x.shape} {np.dtype(dtype)}, num_heads={h})", got, split_heads_forward(x, h)[0], 0.0)


# ---- exercise 2: softmax forward and backward ---------------------------------------------
def visible_ex02(mod, box):
    s = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, 1002.0]])
    got = box.call(mod.softmax_forward, s)
    check_array("softmax_forward of [[1, 2, 3], [1000, 1001, 1002]] (stable?)", got, softmax_forward(s)[0], 1e-12)
    mask = np.array([[False, False, True], [True, True, True]])
    got = box.call(mod.softmax_forward, s, mask)
    check_array("softmax_forward with a mask (row 1 fully masked -> zeros)", got, softmax_forward(s, mask)[0], 1e-12)
    p = softmax_forward(s[:1])[0]
    dp = np.array([[1.0, 0.0, -1.0]])
    got = box.call(mod.softmax_backward, dp, p)
    check_array("softmax_backward of softmax([1, 2, 3])", got, softmax_backward(dp, softmax_forward(s[:1])[1]), 1e-12)


def hidden_ex02(mod, box, rng):
    for (B, h, T, S, _d_k), dtype in trials(rng):
        scores = randn(rng, (B, h, T, S), dtype) * 3
        mask = rng.random((B, 1, T, S)) < 0.3
        mask[0, 0, -1, :] = True  # one fully masked row
        ref, cache = softmax_forward(scores, mask)
        shape = f"scores {scores.shape} {np.dtype(dtype)}"
        check_array(f"softmax_forward({shape}, mask)", box.call(mod.softmax_forward, scores, mask), ref, tol_for(dtype))
        plain = softmax_forward(scores)[0]
        check_array(f"softmax_forward({shape}) without mask", box.call(mod.softmax_forward, scores), plain, tol_for(dtype))
        dp = randn(rng, scores.shape, dtype)
        got = box.call(mod.softmax_backward, dp, ref)
        check_array(f"softmax_backward(dprobs {dp.shape} {np.dtype(dtype)})", got, softmax_backward(dp, cache), tol_for(dtype))


# ---- exercise 3: attention forward, with a causal mask ------------------------------------
def visible_ex03(mod, box):
    got = box.call(mod.make_causal_mask, 3)
    check_array("make_causal_mask(3)", got, causal_mask(3, xp=np), 0)
    q = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])  # (1, 1, 3, 2)
    v = np.array([[[[1.0], [2.0], [3.0]]]])  # (1, 1, 3, 1)
    out, w, _ = scaled_dot_product_attention_forward(q, q, v)
    res = box.call(mod.attention_forward, q, q, v)
    _check_pair("attention_forward(q (1, 1, 3, 2), k=q, v (1, 1, 3, 1))", res, out, w, 1e-12)
    out, w, _ = scaled_dot_product_attention_forward(q, q, v, causal_mask(3, xp=np))
    res = box.call(mod.attention_forward, q, q, v, None, True)
    _check_pair("attention_forward(..., causal=True)", res, out, w, 1e-12)


def _check_pair(what, res, out, w, atol):
    if not isinstance(res, tuple) or len(res) != 2:
        raise GradeFailure(f"{what}: must return a tuple (out, weights)")
    check_array(f"{what}: weights", res[1], w, atol)
    check_array(f"{what}: out", res[0], out, atol)


def hidden_ex03(mod, box, rng):
    for (B, h, T, S, d_k), dtype in trials(rng):
        check_array(f"make_causal_mask({T}, {S})", box.call(mod.make_causal_mask, T, S), causal_mask(T, S, xp=np), 0)
        q, k, v = randn(rng, (B, h, T, d_k), dtype), randn(rng, (B, h, S, d_k), dtype), randn(rng, (B, h, S, d_k), dtype)
        out, w, _ = scaled_dot_product_attention_forward(q, k, v)
        res = box.call(mod.attention_forward, q, k, v)
        _check_pair(f"attention_forward(q {q.shape}, k {k.shape})", res, out, w, tol_for(dtype))
        pad = rng.random((B, 1, 1, S)) < 0.3
        pad[..., 0] = False  # key 0 stays visible, so a causal row is never empty
        out, w, _ = scaled_dot_product_attention_forward(q, k, v, pad | causal_mask(T, S, xp=np))
        res = box.call(mod.attention_forward, q, k, v, pad, True)
        _check_pair(f"attention_forward(q {q.shape}, k {k.shape}, padding mask, causal=True)", res, out, w, tol_for(dtype))


# ---- exercise 4: attention backward -------------------------------------------------------
def visible_ex04(mod, box):
    q = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])  # (1, 1, 3, 2)
    v = np.array([[[[1.0], [2.0], [3.0]]]])
    _check_backward(mod, box, q, q.copy(), v, causal_mask(3, xp=np), np.ones((1, 1, 3, 1)), "visible example", 1e-12)


def _check_backward(mod, box, q, k, v, mask, dout, what, atol):
    _, w, cache = scaled_dot_product_attention_forward(q, k, v, mask)
    ref = scaled_dot_product_attention_backward(dout, cache)
    res = box.call(mod.attention_backward, dout, q, k, v, w)
    if not isinstance(res, tuple) or len(res) != 3:
        raise GradeFailure(f"attention_backward ({what}): must return a tuple (dq, dk, dv)")
    for name, got, exp in zip(("dv", "dq", "dk"), (res[2], res[0], res[1]), (ref[2], ref[0], ref[1]), strict=True):
        check_array(f"attention_backward ({what}): {name}", got, exp, atol)


def hidden_ex04(mod, box, rng):
    for (B, h, T, S, d_k), dtype in trials(rng):
        q, k, v = randn(rng, (B, h, T, d_k), dtype), randn(rng, (B, h, S, d_k), dtype), randn(rng, (B, h, S, d_k), dtype)
        mask = rng.random((B, 1, T, S)) < 0.3
        mask[..., 0] = False
        dout = randn(rng, (B, h, T, d_k), dtype)
        _check_backward(mod, box, q, k, v, mask, dout, f"q {q.shape}, k {k.shape}, {np.dtype(dtype)}", tol_for(dtype))


# ---- exercise 5: combine heads ------------------------------------------------------------
def visible_ex05(mod, box):
    x = np.arange(2 * 2 * 3 * 2, dtype=np.float64).reshape(2, 2, 3, 2)  # B=2, h=2, T=3, d_k=2
    check_array("combine_heads(x (2, 2, 3, 2))", box.call(mod.combine_heads, x), combine_heads_forward(x)[0], 0.0)
    expect_raises(box, ValueError, mod.combine_heads, x[0], what="combine_heads of a 3-D array")


def hidden_ex05(mod, box, rng):
    for (B, h, T, _S, d_k), dtype in trials(rng):
        x = randn(rng, (B, h, T, d_k), dtype)
        got = box.call(mod.combine_heads, x)
        check_array(f"combine_heads(x {x.shape} {np.dtype(dtype)})", got, combine_heads_forward(x)[0], 0.0)
