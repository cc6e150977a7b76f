"""Checks for exercises 1-5: split heads, softmax, attention forward/backward, combine heads.

Each exercise has ``visible_exNN()`` (fixed small inputs a learner can read) and
``hidden_exNN(rng)`` (fresh random shapes and values). Both return the list of
:class:`~mhattn.grade.harness.Call` to make, each judged against mhattn's own functions
in the grader's process.
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
from mhattn.functional.softmax import SoftmaxCache
from mhattn.grade.harness import Call, array, check_array, checked, expect_raises, pair, tol_for, tuple_of

# The named checks of each exercise (points in spec.EXERCISES): every call below counts for one of them.
F64, F32 = "float64, and the error for a bad shape", "float32"
SM_PLAIN, SM_MASK, SM_BACK = "forward without mask (also scores of 1000)", "forward with masks, a fully masked row", "backward"
CAUSAL, ATT, ATT_MASK = "causal mask", "attention without mask", "attention with padding and causal masks"
DQ, DK, DV = "dq", "dk", "dv"


def random_dims(rng):
    """B, h, T, S, d_k for one hidden trial: h >= 2 and T != h, so a swapped axis shows."""
    h = int(rng.integers(2, 6))
    T = int(rng.choice([t for t in range(2, 9) if t != h]))
    return int(rng.integers(1, 4)), h, T, int(rng.integers(2, 9)), int(rng.integers(2, 7))


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _dtype_check(dtype) -> str:
    return F32 if np.dtype(dtype) == np.float32 else F64


def trials(rng, n=3):
    """(dims, dtype) for n hidden trials, both float64 and float32 among them."""
    return [(random_dims(rng), np.float64 if i % 2 == 0 else np.float32) for i in range(n)]


# ---- exercise 1: split heads --------------------------------------------------------------
def visible_ex01():
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)  # B=2, T=3, d_model=4
    return checked(F64, [
        Call("split_heads", (x, 2), array("split_heads(x (2, 3, 4), num_heads=2)", split_heads_forward(x, 2)[0], 0.0)),
        expect_raises("ValueError", "split_heads", x, 3, what="split_heads with d_model=4, num_heads=3"),
    ])  # fmt: skip


def hidden_ex01(rng):
    calls = []
    for (B, h, T, _S, d_k), dtype in trials(rng):
        x = randn(rng, (B, T, h * d_k), dtype)
        what = f"split_heads(x {x.shape} {np.dtype(dtype)}, num_heads={h})"
        calls.append(Call("split_heads", (x, h), array(what, split_heads_forward(x, h)[0], 0.0), check=_dtype_check(dtype)))
    return calls


# ---- exercise 2: softmax forward and backward ---------------------------------------------
def softmax_hint(scores, mask):
    """A hint for a wrong softmax: which axis it ran over, or that exp overflowed."""

    def hint(got):
        with np.errstate(all="ignore"):
            return _softmax_fault(got, scores, mask)

    return hint


def _softmax_fault(got, scores, mask):
    if not np.all(np.isfinite(got)):
        big = np.abs(np.where(mask, 0, scores) if mask is not None else scores).max() > 80
        return "exp overflowed: subtract each row's maximum before exp (a stable softmax)" if big else None
    z = scores if mask is None else np.where(mask, -np.inf, scores)
    for axis in range(scores.ndim - 1):
        e = np.exp(z - z.max(axis=axis, keepdims=True))
        other = np.nan_to_num(e / e.sum(axis=axis, keepdims=True))
        if other.shape == got.shape and np.allclose(other, got, atol=1e-3):
            return f"this is a softmax over axis {axis - scores.ndim}; the softmax runs over the last axis (-1, the keys)"
    return None


def backward_hint(dprobs, probs):
    """A hint for a wrong softmax backward: whether it keeps only the Jacobian's diagonal, ``p (1 - p) dprobs``."""
    diagonal = probs.astype(np.float64) * (1 - probs.astype(np.float64)) * dprobs

    def hint(got):
        if got.shape == diagonal.shape and np.allclose(got, diagonal, atol=1e-4):
            return ("this keeps only the diagonal of the softmax Jacobian, p (1 - p) dprobs: each probability of a row "
                    "also depends on every other score of that row (the off-diagonal -p_i p_j)")  # fmt: skip
        return None

    return hint


def backward_call(what, dp, probs, atol):
    judge = array(what, softmax_backward(dp, SoftmaxCache(probs)), atol, hint=backward_hint(dp, probs))
    return Call("softmax_backward", (dp, probs), judge, check=SM_BACK)


def softmax_call(what, scores, mask=None):
    args = (scores,) if mask is None else (scores, mask)
    expected = softmax_forward(scores, mask)[0]
    judge = array(what, expected, tol_for(scores.dtype), hint=softmax_hint(scores, mask))
    return Call("softmax_forward", args, judge, check=SM_PLAIN if mask is None else SM_MASK)


def visible_ex02():
    s = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, 1002.0]])
    mask = np.array([[False, False, True], [True, True, True]])
    p = softmax_forward(s[:1])[0]
    dp = np.array([[1.0, 0.0, -1.0]])
    return [
        softmax_call("softmax_forward of [[1, 2, 3], [1000, 1001, 1002]]", s),
        softmax_call("softmax_forward with a mask (row 1 fully masked -> zeros)", s, mask),
        backward_call("softmax_backward of softmax([1, 2, 3])", dp, p, 1e-12),
    ]


def hidden_ex02(rng):
    calls = []
    for (B, h, T, S, _d_k), dtype in trials(rng):
        scores = randn(rng, (B, h, T, S), dtype) * 3
        mask = rng.random((B, 1, T, S)) < 0.3
        mask[0, 0, -1, :] = True  # one fully masked row
        probs = softmax_forward(randn(rng, scores.shape, dtype) * 3, mask)[0]  # not these scores': no answer in the inputs
        shape = f"scores {scores.shape} {np.dtype(dtype)}"
        dp = randn(rng, scores.shape, dtype)
        what = f"softmax_backward(dprobs {dp.shape} {np.dtype(dtype)})"
        calls += [
            softmax_call(f"softmax_forward({shape}, mask)", scores, mask),
            softmax_call(f"softmax_forward({shape}) without mask", scores),
            backward_call(what, dp, probs, tol_for(dtype)),
        ]
    return calls


# ---- exercise 3: attention forward, with a causal mask ------------------------------------
def visible_ex03():
    q = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])  # (1, 1, 3, 2)
    v = np.array([[[[1.0], [2.0], [3.0]]]])  # (1, 1, 3, 1)
    return [
        mask_call(3),
        _attention_call("attention_forward(q (1, 1, 3, 2), k=q, v (1, 1, 3, 1))", q, q, v, None, False, 1e-12),
        _attention_call("attention_forward(..., causal=True)", q, q, v, None, True, 1e-12),
    ]


def mask_call(T, S=None):
    """make_causal_mask(T[, S]), with a hint for the two usual slips."""
    expected = causal_mask(T, S, xp=np)
    slips = {"it also hides the diagonal: a position may attend to itself": np.triu(np.ones_like(expected), k=0),
             "True must mark the future keys (not allowed), False the allowed ones": ~expected}  # fmt: skip
    hint = lambda got: next((why for why, m in slips.items() if np.array_equal(got, m)), None)  # noqa: E731
    what = f"make_causal_mask({T})" if S is None else f"make_causal_mask({T}, {S})"
    return Call("make_causal_mask", (T,) if S is None else (T, S), array(what, expected, 0, hint=hint), check=CAUSAL)


def scale_hint(q, k, mask):
    """A hint for wrong attention weights: which scaling of ``q k^T`` they match, if a common wrong one."""
    d_k, h = q.shape[-1], q.shape[1]
    wrong = {"no scaling": 1.0, "a scaling by 1/d_k instead of 1/sqrt(d_k)": 1.0 / d_k}
    if h > 1:
        wrong["a scaling by 1/sqrt(h * d_k) = 1/sqrt(d_model) instead of 1/sqrt(d_k)"] = 1.0 / np.sqrt(h * d_k)

    def hint(got):
        scores = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2)  # (B, h, T, S)
        with np.errstate(all="ignore"):
            found = [name for name, c in wrong.items() if _close(softmax_forward(scores * c, mask)[0], got)]
        return f"these weights match {' or '.join(found)}" if found else None

    return hint


def _close(w, got):
    return w.shape == got.shape and np.allclose(w, got, atol=1e-4)


def _attention_call(what, q, k, v, mask_in, causal, atol):
    mask = mask_in if not causal else (causal_mask(q.shape[-2], k.shape[-2], xp=np) | (False if mask_in is None else mask_in))
    out, w, _ = scaled_dot_product_attention_forward(q, k, v, mask)
    args = (q, k, v) if mask_in is None and not causal else (q, k, v, mask_in, causal)
    check = ATT if mask_in is None and not causal else ATT_MASK
    return Call("attention_forward", args, pair(what, out, w, atol, hint=scale_hint(q, k, mask)), check=check)


def hidden_ex03(rng):
    calls = []
    for (B, h, T, S, d_k), dtype in trials(rng):
        calls.append(mask_call(T, S))
        q, k, v = randn(rng, (B, h, T, d_k), dtype), randn(rng, (B, h, S, d_k), dtype), randn(rng, (B, h, S, d_k), dtype)
        calls.append(_attention_call(f"attention_forward(q {q.shape}, k {k.shape})", q, k, v, None, False, tol_for(dtype)))
        pad = rng.random((B, 1, 1, S)) < 0.3
        pad[..., 0] = False  # key 0 stays visible, so a causal row is never empty
        what = f"attention_forward(q {q.shape}, k {k.shape}, padding mask, causal=True)"
        calls.append(_attention_call(what, q, k, v, pad, True, tol_for(dtype)))
    return calls


# ---- exercise 4: attention backward -------------------------------------------------------
def visible_ex04():
    q = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])  # (1, 1, 3, 2)
    v = np.array([[[[1.0], [2.0], [3.0]]]])
    return [_backward_call(q, q.copy(), v, causal_mask(3, xp=np), np.ones((1, 1, 3, 1)), "visible example", 1e-12)]


def _backward_call(q, k, v, mask, dout, what, atol):
    _, w, cache = scaled_dot_product_attention_forward(q, k, v, mask)
    ref = scaled_dot_product_attention_backward(dout, cache)

    def part(i):
        def judge(got):
            tuple_of(f"attention_backward ({what})", 3, "(dq, dk, dv)")(got)
            check_array(f"attention_backward ({what}): {('dq', 'dk', 'dv')[i]}", got[i], ref[i], atol,
                        hint=_unscaled_hint(ref[i], q.shape[-1]) if i < 2 else None)  # fmt: skip

        return (DQ, DK, DV)[i], judge

    return Call("attention_backward", (dout, q, k, v, w), parts=(part(2), part(0), part(1)))  # dv first


def _unscaled_hint(ref, d_k):
    """A hint for a dq or dk that is ``sqrt(d_k)`` times too large: the scaling left out on the way back."""
    unscaled = ref.astype(np.float64) * np.sqrt(d_k)

    def hint(got):
        if d_k > 1 and got.shape == ref.shape and np.allclose(got, unscaled, rtol=1e-3, atol=1e-4):
            return "this is sqrt(d_k) times the right gradient: the forward's 1/sqrt(d_k) is missing on the way back"
        return None

    return hint


def hidden_ex04(rng):
    calls = []
    for (B, h, T, S, d_k), dtype in trials(rng):
        q, k, v = randn(rng, (B, h, T, d_k), dtype), randn(rng, (B, h, S, d_k), dtype), randn(rng, (B, h, S, d_k), dtype)
        mask = rng.random((B, 1, T, S)) < 0.3
        mask[..., 0] = False
        dout = randn(rng, (B, h, T, d_k), dtype)
        calls.append(_backward_call(q, k, v, mask, dout, f"q {q.shape}, k {k.shape}, {np.dtype(dtype)}", tol_for(dtype)))
    return calls + [_large_backward_call(rng)]


LARGE = (1, 2, 64, 1024, 64)  # (B, h, T, S, d_k) of the large hidden case of exercise 4


def _large_backward_call(rng):
    """A case a written backward does in a few milliseconds, and a numerical or complex-step derivative of a forward
    cannot do within the time limit: dk and dv take ``S d_k`` = 65536 forward passes each even when every (example,
    head) is perturbed at once, about 2 * 10**12 floating-point operations each (dq takes ``d_k`` passes, as its rows
    are independent: every part of the call counts for each check). A numerical derivative costs ``S d_k`` forward
    passes per written backward, so the case has many keys of many dimensions, and few queries, examples and heads
    (a small request: a few MiB)."""
    B, h, T, S, d_k = LARGE
    q, k, v, dout = (randn(rng, (B, h, n, d_k), np.float64) for n in (T, S, S, T))
    mask = rng.random((B, 1, T, S)) < 0.3
    mask[..., 0] = False
    return _backward_call(q, k, v, mask, dout, f"q {q.shape}, k {k.shape}, float64 (large)", tol_for(np.float64))


# ---- exercise 5: combine heads ------------------------------------------------------------
def visible_ex05():
    x = np.arange(2 * 2 * 3 * 2, dtype=np.float64).reshape(2, 2, 3, 2)  # B=2, h=2, T=3, d_k=2
    return checked(F64, [
        Call("combine_heads", (x,), array("combine_heads(x (2, 2, 3, 2))", combine_heads_forward(x)[0], 0.0)),
        expect_raises("ValueError", "combine_heads", x[0], what="combine_heads of a 3-D array"),
    ])  # fmt: skip


def hidden_ex05(rng):
    calls = []
    for (B, h, T, _S, d_k), dtype in trials(rng):
        x = randn(rng, (B, h, T, d_k), dtype)
        what = f"combine_heads(x {x.shape} {np.dtype(dtype)})"
        calls.append(Call("combine_heads", (x,), array(what, combine_heads_forward(x)[0], 0.0), check=_dtype_check(dtype)))
    return calls
