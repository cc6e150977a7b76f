"""Checks for exercise 11: attention over key tiles with the online softmax.

``visible_ex11(mod, box)`` uses fixed small inputs a learner can read;
``hidden_ex11(mod, box, rng)`` draws fresh shapes, tile sizes and masks and compares
with mhattn's plain attention (the output) and the log-sum-exp of the scores.
Both raise :class:`GradeFailure` with a one-line reason.
"""

from __future__ import annotations

import numpy as np

from mhattn.functional import scaled_dot_product_attention_forward
from mhattn.grade.harness import GradeFailure, check_array, tol_for


def _reference(q, k, v, mask):
    """Plain attention's output and each row's log-sum-exp (-inf where no key is allowed)."""
    out, _, _ = scaled_dot_product_attention_forward(q, k, v, mask)
    scores = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    total = np.exp(scores - top).sum(axis=-1)
    with np.errstate(divide="ignore"):
        lse = np.where(total > 0, top[..., 0] + np.log(np.where(total > 0, total, 1.0)), -np.inf)
    return out, lse.astype(q.dtype)


def _check(mod, box, q, k, v, block_k, mask, what, atol):
    res = box.call(mod.online_attention_forward, q, k, v, block_k, mask)
    if not isinstance(res, tuple) or len(res) != 2:
        raise GradeFailure(f"online_attention_forward ({what}): must return a tuple (out, lse)")
    out, lse = _reference(q, k, v, mask)
    check_array(f"online_attention_forward ({what}): out", res[0], out, atol)
    got_lse = res[1]
    if isinstance(got_lse, np.ndarray) and got_lse.shape == lse.shape:
        empty = np.isneginf(lse)
        if not np.array_equal(np.isneginf(got_lse), empty):
            raise GradeFailure(f"online_attention_forward ({what}): lse must be -inf exactly where a row has no allowed key")
        got_lse = np.where(empty, 0, got_lse).astype(lse.dtype)
        lse = np.where(empty, 0, lse).astype(lse.dtype)
    check_array(f"online_attention_forward ({what}): lse", got_lse, lse, atol, rtol=atol)


def visible_ex11(mod, box):
    q = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]])  # (1, 1, 3, 2)
    v = np.array([[[[1.0], [2.0], [3.0]]]])  # (1, 1, 3, 1)
    for block_k in (3, 2, 1):
        _check(mod, box, q, q.copy(), v, block_k, None, f"visible example, block_k={block_k}", 1e-12)
    mask = np.array([[False, True, True], [True, True, True], [False, False, False]])  # query 1 sees nothing
    _check(mod, box, q, q.copy(), v, 2, mask, "visible example with a mask, block_k=2", 1e-12)


def hidden_ex11(mod, box, rng):
    for i in range(4):
        dtype = np.float64 if i % 2 == 0 else np.float32
        B, h, T, S, d_k = (int(n) for n in rng.integers([1, 1, 2, 3, 2], [3, 4, 9, 12, 7]))
        q, k, v = (rng.standard_normal((B, h, n, d_k)).astype(dtype) * 2 for n in (T, S, S))
        block_k = int(rng.choice([1, 2, 3, S]))
        mask = None
        if i >= 2:
            mask = rng.random((B, 1, T, S)) < 0.4
            mask[0, 0, -1, :] = True  # one query with no allowed key
        what = f"q {q.shape} {np.dtype(dtype)}, S={S}, block_k={block_k}, {'a mask' if i >= 2 else 'no mask'}"
        _check(mod, box, q, k, v, block_k, mask, what, tol_for(dtype))
