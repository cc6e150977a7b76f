"""Token embedding: a table lookup whose backward is a scatter-add.

Vaswani et al. 2017, §3.4: learned embeddings map token ids to vectors of
size d_model. Forward gathers rows ``W[ids]``; the same id may appear many
times in a batch, so backward must *accumulate* every position's gradient
into that id's row. :func:`mhattn.backend.scatter_add` does the unbuffered add
(``np.add.at`` on NumPy, the library's own elsewhere); ``dW[ids] += dout`` would
keep only one of the repeated updates.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from mhattn.backend import array_namespace, device_of, scatter_add


class EmbeddingCache(NamedTuple):
    ids: object  # (B, T) integer token ids
    W_shape: tuple  # (V, d_model)
    dtype: object  # dtype of W


def embedding_forward(ids, W):
    """Look up ``W[ids]``.

    Args:
        ids: ``(B, T)`` integer array of any integer dtype (uint8 to int64), values in ``[0, V)``, on ``W``'s
            device (B = 0 gives an empty output).
        W: ``(V, d_model)`` float32/float64 embedding table.

    Returns:
        ``(out, cache)``; ``out`` is ``(B, T, d_model)`` with ``W``'s dtype, a fresh array (a gather copies).

    Raises:
        TypeError: ``ids`` is not an integer array; ``ids`` and ``W`` of two libraries.
        ValueError: an id is outside ``[0, V)``; ``ids`` and ``W`` on two devices.
    """
    xp = array_namespace(ids, W)
    if not hasattr(ids, "dtype") or not xp.isdtype(ids.dtype, "integral"):
        raise TypeError(f"embedding: ids must be an integer array, got {getattr(ids, 'dtype', type(ids).__name__)}")
    V, d_model = W.shape
    # as int64: torch's index_select takes int32/int64 only (pytorch/pytorch#17346), and uint8 < V may not compare
    flat = xp.astype(xp.reshape(ids, (-1,)), xp.int64)  # (B*T,)
    if math.prod(ids.shape) and bool(xp.any((flat < 0) | (flat >= V))):  # one device read, at the model's entry
        raise ValueError(f"embedding: ids must lie in [0, {V}), got values in [{int(xp.min(flat))}, {int(xp.max(flat))}]")
    # 1. gather one row per token
    out = xp.take(W, flat, axis=0)  # (B*T, d_model)
    return xp.reshape(out, (*ids.shape, d_model)), EmbeddingCache(ids, W.shape, W.dtype)  # (B, T, d_model)


def embedding_backward(dout, cache: EmbeddingCache):
    """Gradient of :func:`embedding_forward` with respect to ``W``.

    Args:
        dout: ``(B, T, d_model)`` upstream gradient.

    Returns:
        ``dW`` ``(V, d_model)``, on ``dout``'s device: row v is the sum of ``dout`` over every position holding id v
        (zeros when B = 0).
    """
    xp = array_namespace(dout, cache.ids)
    dW = xp.zeros(cache.W_shape, dtype=cache.dtype, device=device_of(dout))  # (V, d_model)
    # step 1 was: gather rows -> scatter-add them back; repeated ids accumulate
    ids = xp.astype(xp.reshape(cache.ids, (-1,)), xp.int64)  # (B*T,); any integer dtype (uint8 too)
    return scatter_add(xp, dW, ids, xp.reshape(dout, (-1, cache.W_shape[1])))  # (B*T, d_model) added into (V, d_model)
