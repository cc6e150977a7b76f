"""Exercise 11: attention over key tiles with the online softmax (Milakov & Gimelshein 2018).

Read exercises/README.md, section "11. Online softmax over key tiles", first; notebook 09 derives it.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex11``.
"""

from __future__ import annotations

import numpy as np


def online_attention_forward(q, k, v, block_k, mask=None):
    """``softmax(q k^T / sqrt(d_k)) v`` computed one tile of ``block_k`` keys at a time.

    Never form the full ``(..., T, S)`` scores (the grader runs this file under a memory cap smaller
    than them, measures the call's peak memory, and that it grows with ``block_k``): keep, for every query row, a running
    maximum ``m``, a running sum ``l`` and a running output ``acc``; for each key tile,
    rescale ``l`` and ``acc`` by ``exp(m_old - m_new)`` and add the tile's share
    (FlashAttention-2, Dao 2023, Algorithm 1, lines 8-10 and 12-13).

    Args:
        q: ``(..., T, d_k)`` float32/float64 queries (e.g. ``(B, h, T, d_k)``). Do not modify it.
        k: ``(..., S, d_k)`` keys; v: ``(..., S, d_v)`` values; same dtype as ``q``.
        block_k: keys per tile, a positive int (the last tile may be shorter).
        mask: ``None`` or a bool array broadcastable to ``(..., T, S)``; True = not allowed.

    Returns:
        ``(out, lse)``: ``out`` ``(..., T, d_v)``, equal to plain attention's output;
        ``lse`` ``(..., T)``, the log of the sum of ``exp(score)`` over the allowed keys of
        each row. A row with no allowed key gets ``out`` 0 and ``lse`` ``-inf`` (no NaN,
        and no floating-point warning on the way: the grader counts one as a fault).
        Both in the dtype of ``q``.
    """
    ### BEGIN SOLUTION
    S = k.shape[-2]
    scale = 1.0 / np.sqrt(q.shape[-1])
    m = np.full((*q.shape[:-1], 1), -np.inf, dtype=q.dtype)  # (..., T, 1) running max
    l_sum = np.zeros_like(m)  # (..., T, 1) running sum
    acc = np.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)  # (..., T, d_v)
    for k0 in range(0, S, block_k):
        s = (q @ k[..., k0 : k0 + block_k, :].swapaxes(-1, -2)) * q.dtype.type(scale)  # (..., T, bk)
        if mask is not None:
            tile = np.broadcast_to(mask, (*s.shape[:-1], S))[..., k0 : k0 + block_k]
            s = np.where(tile, -np.inf, s)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        m_safe = np.where(np.isfinite(m_new), m_new, 0.0)  # a row with nothing allowed yet
        p = np.exp(s - m_safe)  # (..., T, bk)
        alpha = np.exp(m - m_safe)  # (..., T, 1)
        l_sum = l_sum * alpha + p.sum(axis=-1, keepdims=True)
        acc = acc * alpha + p @ v[..., k0 : k0 + block_k, :]
        m = m_new
    empty = l_sum == 0
    out = acc / np.where(empty, 1.0, l_sum)
    lse = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, l_sum)))
    return out.astype(q.dtype), lse[..., 0].astype(q.dtype)
    ### END SOLUTION
