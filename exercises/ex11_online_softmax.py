# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex11_online_softmax.py by scripts/make_exercises.py; change the source, not this copy.)
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
    # YOUR CODE HERE
    raise NotImplementedError("ex11_online_softmax: not written yet")
