"""The engine's row reductions and softmax pair: the reference's numbers, NumPy's fastest way to them.

NumPy reduces a short last axis one row at a time, so attention rows (a stack of ``(T, S)`` matrices, S often 16 to
128) are reduced otherwise: a row's sum is a GEMV against a column of ones (3x ``np.sum``, :func:`sum_last`), its
maximum is taken across rows (:func:`max_last`, 4x at S = 16), and the exponential is written into the array it
reads (:func:`exp_in_place`). :func:`softmax_forward` / :func:`softmax_backward` are the reference's pair
(:mod:`mhattn.functional.softmax`) built from them, same signatures, same cache.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import read_only
from mhattn.functional.softmax import SoftmaxCache, check_softmax_inputs

# rows up to this long take the maximum by halving (max_last); longer ones NumPy's own reduction
ROW_MAX_HALVING = 64
# rows up to this long are summed as a GEMV (sum_last)
ROW_SUM_GEMV = 128


def exp_in_place(s):
    """``np.exp(s)`` written into ``s`` (no second array); returns ``s``."""
    return np.exp(s, out=s)


def sum_last(x):
    """``np.sum(x, axis=-1, keepdims=True)`` ``(..., 1)``: a GEMV with a column of ones for a short last axis of a
    stack of matrices (NumPy sums those row by row, 3x slower); ``np.sum`` otherwise."""
    if x.ndim > 2 and 2 <= x.shape[-1] <= ROW_SUM_GEMV and x.dtype in (np.float32, np.float64):
        return x @ np.ones((x.shape[-1], 1), dtype=x.dtype)  # (..., S) @ (S, 1) -> (..., 1)
    return x.sum(axis=-1, keepdims=True)


def max_last(z):
    """``np.max(z, axis=-1, keepdims=True)``: the same values (a maximum does not depend on the order it is taken
    in; NaN wins as in ``max``), a fresh array. Rows of up to 32 entries are laid out as columns (one copy) and reduced
    across the rows at once (4x faster at S = 16); rows of up to ``ROW_MAX_HALVING`` are halved with elementwise
    maxima, ``log2(S)`` passes over ever smaller arrays (1.5x at S = 64); longer rows use ``max`` itself.
    """
    if not 2 <= z.shape[-1] <= ROW_MAX_HALVING:
        return np.max(z, axis=-1, keepdims=True)
    if z.shape[-1] <= 32:
        columns = np.ascontiguousarray(z.reshape(-1, z.shape[-1]).T)  # (S, rows)
        return columns.max(axis=0).reshape(*z.shape[:-1], 1)  # (..., 1)
    m = z  # (..., S)
    while m.shape[-1] > 1:
        n = m.shape[-1]
        half = n // 2
        top = np.maximum(m[..., :half], m[..., n - half :])  # (..., n//2); an odd middle entry is kept apart
        m = top if n % 2 == 0 else np.concatenate([top, m[..., half : half + 1]], axis=-1)  # (..., ceil(n/2))
    return m  # (..., 1)


def softmax_probs(scores, mask=None, *, overwrite_input=False):
    """The steps of :func:`softmax_forward` on checked inputs: ``probs`` ``(..., S)``, writable, in ``scores``'
    memory when ``overwrite_input`` (the caller owns it)."""
    # 1. masked entries are replaced by -inf, so exp gives exactly 0
    if mask is None:
        z = scores if overwrite_input else scores.copy()
    elif overwrite_input:
        z = scores
        np.copyto(z, -np.inf, where=mask)  # mask broadcasts to z
    else:
        z = np.where(mask, -np.inf, scores)  # one pass; a Python float keeps scores' dtype
    # 2. subtract the row maximum (a row that is all -inf uses 0 instead)
    m = max_last(z)  # (..., 1)
    z -= np.where(np.isfinite(m), m, 0.0)
    # 3. exponentiate in place
    z = exp_in_place(z)  # (..., S)
    # 4. normalise; an all-masked row has sum 0 and stays all 0
    s = sum_last(z)  # (..., 1)
    z /= np.where(s == 0, 1.0, s)
    return z


def softmax_forward(scores, mask=None):
    """:func:`mhattn.functional.softmax.softmax_forward` on NumPy: the same arguments, checks and results."""
    check_softmax_inputs(scores, mask)
    probs = softmax_probs(scores, mask)
    return read_only(probs), SoftmaxCache(probs)


def softmax_backward(dprobs, cache: SoftmaxCache, *, overwrite_input=False):
    """:func:`mhattn.functional.softmax.softmax_backward` on NumPy: ``dz = p * (dp - sum(dp * p))``, a fresh array,
    or ``dprobs`` itself when ``overwrite_input`` (the caller owns it)."""
    p = cache.probs
    dot = sum_last(dprobs * p)  # (..., 1)
    if overwrite_input:
        dprobs -= dot
        dz = dprobs
    else:
        dz = dprobs - dot
    dz *= p
    return dz
