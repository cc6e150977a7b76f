"""The engine's scaled dot-product attention: the reference pair on NumPy, pooled by batch chunks.

:func:`mhattn.functional.attention.scaled_dot_product_attention_forward` is the textbook version (Vaswani et al.
2017, eq. (1)); this pair takes the same arguments, runs the same checks and returns the same cache
(:class:`~mhattn.functional.attention.AttentionCache`), equal to rounding (``tests/lib/test_engine.py``). Inside a
pooled call (:func:`mhattn.kernels.pool.pooled`) the batch is cut into one chunk per thread (softmax passes
included: :func:`mhattn.kernels.pool.by_batch`), each chunk writing its rows of one output and one weights array
(nothing joined after); the scores' GEMM writes into the weights array, and the scaling and the softmax run in that
memory with the engine's row reductions (:mod:`.rows`); the backward writes ``dq``, ``dk``, ``dv`` likewise.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import read_only, uniform
from mhattn.functional.attention import AttentionCache, check_attention_call, sum_to_shape
from mhattn.functional.masks import add_mask, cast_mask, causal_mask, dead_keys
from mhattn.functional.softmax import SoftmaxCache
from mhattn.kernels import pool
from mhattn.kernels.rows import softmax_backward, softmax_probs


def _attend(out, weights, q, k, v, mask, scale, dropout_p=0.0, rng=None):
    """Steps 1-5 on checked inputs for some rows of the batch: the scores, then the weights, written into
    ``weights``, the result into ``out``. Returns ``(keep, dropped)`` (dropout's multipliers and the weights after it)."""
    # 1-2. similarity of every query with every key, scaled in place
    scores = np.matmul(q, k.mT, out=weights)  # (B, h, T, d_k) @ (B, h, d_k, S) -> (B, h, T, S)
    scores *= scale
    # 3. a float mask is added; a bool mask is applied inside the softmax
    bool_mask = None
    if mask is not None and mask.dtype == np.bool_:
        bool_mask = mask
    elif mask is not None:
        np.copyto(scores, add_mask(scores, cast_mask(mask, scores.dtype)))  # without overflow
    probs = softmax_probs(scores, bool_mask, overwrite_input=True)  # (B, h, T, S), in weights' memory
    # 4. dropout on the weights, rescaled by 1/(1-p) so the expectation is kept
    keep, dropped = None, probs
    if dropout_p > 0.0:
        u = uniform(np, rng, probs.shape, probs)  # (B, h, T, S) float64, the seeded host draw
        keep = (u >= dropout_p).astype(probs.dtype) * (1.0 / (1.0 - dropout_p))  # 0 or 1/(1-p)
        dropped = probs * keep
    # 5. weighted sum of the values
    np.matmul(dropped, v, out=out)  # (B, h, T, S) @ (B, h, S, d_v) -> (B, h, T, d_v)
    return keep, dropped


def attend(q, k, v, mask=None, dropout_p: float = 0.0, rng=None, *, out=None, scale=None):
    """The forward's steps on checked inputs: ``(out, weights, cache)`` with ``weights`` the cached array itself (the
    caller hands out a read-only view). Inside a pooled call the batch's chunks run on the pool, each writing its rows
    of ``out`` and ``weights``; with dropout, or when ``q`` has no batch axis of its own, one call. ``out``: where to
    write the result, ``(..., T, d_v)`` of q's dtype, any strides BLAS takes (each matrix's rows evenly spaced, its
    columns adjacent), e.g. the heads' view of the concat ``(B, T, h d_v)``, so that no combine copy follows.
    ``scale``: the factor on the scores (``1/sqrt(d_k)`` when None)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)  # a Python float keeps float32 float32
    given = (q.shape, k.shape, v.shape)  # the shapes the gradients are summed back to
    if mask is not None:
        # 0. keys hidden from every query are zeroed: their weight is exactly 0, and 0 * NaN would still be NaN
        dead = dead_keys(mask)[..., None]  # (..., S, 1)
        k, v = np.where(dead, 0.0, k), np.where(dead, 0.0, v)  # (B, h, S, d_k), (B, h, S, d_v), the mask's lead too
    lead = q.shape[:-2]  # (B, h) (q, k, v: one dtype, checked)
    shapes = None
    if k.shape[:-2] != lead or v.shape[:-2] != lead or given[1:] != (k.shape, v.shape):  # broadcast leading
        lead, shapes = np.broadcast_shapes(lead, k.shape[:-2], v.shape[:-2]), given  # dimensions: summed back after
    if out is None:
        out = np.empty((*lead, q.shape[-2], v.shape[-1]), dtype=q.dtype)  # (B, h, T, d_v)
    weights = np.empty((*lead, q.shape[-2], k.shape[-2]), dtype=q.dtype)  # (B, h, T, S)
    if dropout_p > 0.0:
        keep, dropped = _attend(out, weights, q, k, v, mask, scale, dropout_p, rng)
    else:
        keep, dropped = None, weights
        if pool.workers() > 1 and q.ndim > 2 and q.shape[:-2] == lead:  # chunks of q's batch axis
            pool.by_batch(_attend, (out, weights), q, k, v, mask, scale)
        else:  # a small call (no test per chunk), or no batch axis of q's own
            _attend(out, weights, q, k, v, mask, scale)
    return out, weights, AttentionCache(q, k, v, scale, SoftmaxCache(weights), keep, dropped, shapes)


def scaled_dot_product_attention_forward(
    q, k, v, mask=None, dropout_p: float = 0.0, rng=None, *, scale=None, is_causal=False, causal="upper_left"
):
    """:func:`mhattn.functional.attention.scaled_dot_product_attention_forward` on NumPy: the same arguments
    (``scale``, ``is_causal``, ``causal`` included), checks and results (``weights`` read-only), chunked by batch
    inside a pooled call."""
    check_attention_call(q, k, v, mask, dropout_p, rng, scale, is_causal, causal)
    if is_causal:
        mask = causal_mask(q.shape[-2], k.shape[-2], np, lower_right=causal == "lower_right")  # (T, S)
    out, weights, cache = attend(q, k, v, mask, dropout_p, rng, scale=scale)
    return out, read_only(weights), cache


def _attend_backward(dq, dk, dv, dout, cache: AttentionCache):
    """The backward's steps for some rows of the batch, written into ``dq``, ``dk``, ``dv``."""
    q, k, v, scale, sm_cache, keep, dropped, _ = cache  # broadcast inputs are summed back by the caller
    # step 5 was: out = dropped @ v
    ddropped = dout @ v.mT  # (B, h, T, d_v) @ (B, h, d_v, S) -> (B, h, T, S), our own array
    np.matmul(dropped.mT, dout, out=dv)  # (B, h, S, T) @ (B, h, T, d_v) -> (B, h, S, d_v)
    # step 4 was: dropout -> the same kept entries, the same rescaling
    if keep is not None:
        ddropped *= keep
    # step 3 was: mask + softmax -> masked entries get zero gradient
    dscores = softmax_backward(ddropped, sm_cache, overwrite_input=True)  # (B, h, T, S)
    # step 2 was: * scale, in place
    dscores *= scale
    # step 1 was: q @ k^T
    np.matmul(dscores, k, out=dq)  # (B, h, T, S) @ (B, h, S, d_k) -> (B, h, T, d_k)
    np.matmul(dscores.mT, q, out=dk)  # (B, h, S, T) @ (B, h, T, d_k) -> (B, h, S, d_k)


def scaled_dot_product_attention_backward(dout, cache: AttentionCache, *, out=None):
    """:func:`mhattn.functional.attention.scaled_dot_product_attention_backward` on NumPy: ``(dq, dk, dv)``,
    chunked by batch inside a pooled call; a gradient of a broadcast input is summed back to its shape. ``out``:
    ``(dq, dk, dv)`` arrays to write into and return (q's, k's and v's shapes, the result dtype, strides as
    :func:`attend`'s ``out``), e.g. the heads' views of one ``(B, T, 3 d_model)`` array."""
    probs = cache.softmax.probs  # (B, h, T, S): the forward's whole shape
    lead, (T, S) = probs.shape[:-2], probs.shape[-2:]
    dtype = probs.dtype if dout.dtype == probs.dtype else np.promote_types(dout.dtype, probs.dtype)
    if out is not None and cache.shapes is None:
        dq, dk, dv = out
    else:
        dq, dk, dv = (np.empty((*lead, n, d), dtype) for n, d in ((T, cache.q.shape[-1]), (S, cache.k.shape[-1]),
                                                                    (S, cache.v.shape[-1])))  # fmt: skip
    if pool.workers() > 1 and dout.ndim > 2:
        pool.by_batch(_attend_backward, (dq, dk, dv), dout, cache)
    else:  # a small call: no test per chunk
        _attend_backward(dq, dk, dv, dout, cache)
    if cache.shapes is None:
        return dq, dk, dv
    grads = tuple(sum_to_shape(g, shape) for g, shape in zip((dq, dk, dv), cache.shapes, strict=True))
    if out is None:
        return grads
    for o, g in zip(out, grads, strict=True):
        np.copyto(o, g)
    return out
