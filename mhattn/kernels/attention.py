"""The engine's scaled dot-product attention: the reference pair on NumPy, pooled by batch chunks.

:func:`mhattn.functional.attention.scaled_dot_product_attention_forward` is the textbook version (Vaswani et al.
2017, eq. (1)); this pair takes the same arguments, runs the same checks and returns the same cache
(:class:`~mhattn.functional.attention.AttentionCache`), equal to rounding (``tests/lib/test_engine.py``). Inside a
pooled call (:func:`mhattn.kernels.pool.pooled`) the batch is cut into one chunk per thread (softmax passes
included: :func:`mhattn.kernels.pool.by_batch`); the scores are scaled in place on the fresh GEMM result and the
softmax runs in their memory with the engine's row reductions (:mod:`.rows`).
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import read_only, uniform
from mhattn.functional.attention import AttentionCache, check_attention_call
from mhattn.functional.masks import add_mask, cast_mask, dead_keys
from mhattn.functional.softmax import SoftmaxCache
from mhattn.kernels import pool
from mhattn.kernels.rows import softmax_backward, softmax_probs


def attend(q, k, v, mask=None, dropout_p: float = 0.0, rng=None):
    """The steps of the forward on checked inputs, one chunk of the batch: ``(out, weights, cache)`` with
    ``weights`` the cached array itself (the caller hands out a read-only view)."""
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32 as float32
    if mask is not None:
        # 0. keys hidden from every query are zeroed: their weight is exactly 0, and 0 * NaN would still be NaN
        dead = dead_keys(mask)[..., None]  # (..., S, 1)
        k, v = np.where(dead, 0.0, k), np.where(dead, 0.0, v)  # (B, h, S, d_k), (B, h, S, d_v)
    # 1-2. similarity of every query with every key, scaled in place on the fresh GEMM result
    scores = q @ k.mT  # (B, h, T, d_k) @ (B, h, d_k, S) -> (B, h, T, S)
    scores *= scale
    # 3. a float mask is added; a bool mask is applied inside the softmax
    bool_mask = None
    if mask is not None and mask.dtype == np.bool_:
        bool_mask = mask
    elif mask is not None:
        scores = add_mask(scores, cast_mask(mask, scores.dtype))  # without overflow
    weights = softmax_probs(scores, bool_mask, overwrite_input=True)  # (B, h, T, S)
    # 4. dropout on the weights, rescaled by 1/(1-p) so the expectation is kept
    keep, dropped = None, weights
    if dropout_p > 0.0:
        u = uniform(np, rng, weights.shape, weights)  # (B, h, T, S) float64, the seeded host draw
        keep = (u >= dropout_p).astype(weights.dtype) * (1.0 / (1.0 - dropout_p))  # 0 or 1/(1-p)
        dropped = weights * keep
    # 5. weighted sum of the values
    out = dropped @ v  # (B, h, T, S) @ (B, h, S, d_v) -> (B, h, T, d_v)
    return out, weights, AttentionCache(q, k, v, scale, SoftmaxCache(weights), keep, dropped)


def scaled_dot_product_attention_forward(q, k, v, mask=None, dropout_p: float = 0.0, rng=None):
    """:func:`mhattn.functional.attention.scaled_dot_product_attention_forward` on NumPy: the same arguments, checks
    and results (``weights`` read-only), chunked by batch inside a pooled call (one call with dropout: the draw
    stays one sequence)."""
    check_attention_call(q, k, v, mask, dropout_p, rng)
    out, weights, cache = pool.by_batch(attend, q, k, v, mask, dropout_p, rng, serial=dropout_p > 0)
    return out, read_only(weights), cache


def attend_backward(dout, cache: AttentionCache):
    """The steps of the backward on one chunk of the batch: ``(dq, dk, dv)``."""
    q, k, v, scale, sm_cache, keep, dropped, _ = cache  # the engine never broadcasts: no shapes to sum back to
    # step 5 was: out = dropped @ v
    ddropped = dout @ v.mT  # (B, h, T, d_v) @ (B, h, d_v, S) -> (B, h, T, S)
    dv = dropped.mT @ dout  # (B, h, S, T) @ (B, h, T, d_v) -> (B, h, S, d_v)
    # step 4 was: dropout -> the same kept entries, the same rescaling
    dweights = ddropped * keep if keep is not None else ddropped
    # step 3 was: mask + softmax -> masked entries get zero gradient
    dscores = softmax_backward(dweights, sm_cache)  # (B, h, T, S), our own array
    # step 2 was: * scale, in place
    dscores *= scale
    # step 1 was: q @ k^T
    dq = dscores @ k  # (B, h, T, S) @ (B, h, S, d_k) -> (B, h, T, d_k)
    dk = dscores.mT @ q  # (B, h, S, T) @ (B, h, T, d_k) -> (B, h, S, d_k)
    return dq, dk, dv


def scaled_dot_product_attention_backward(dout, cache: AttentionCache):
    """:func:`mhattn.functional.attention.scaled_dot_product_attention_backward` on NumPy: ``(dq, dk, dv)``,
    chunked by batch inside a pooled call."""
    return pool.by_batch(attend_backward, dout, cache)
