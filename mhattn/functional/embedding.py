"""Token embedding: a table lookup whose backward is a scatter-add.

Vaswani et al. 2017, §3.4: learned embeddings map token ids to vectors of
size d_model. Forward gathers rows ``W[ids]``; the same id may appear many
times in a batch, so backward must *accumulate* every position's gradient
into that id's row. ``xp.add.at`` does the unbuffered add on NumPy and CuPy;
``dW[ids] += dout`` would keep only one of the repeated updates.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import get_array_module


class EmbeddingCache(NamedTuple):
    ids: object  # (B, T) integer token ids
    W_shape: tuple  # (V, d_model)
    dtype: object  # dtype of W


def embedding_forward(ids, W):
    """Look up ``W[ids]``.

    Args:
        ids: ``(B, T)`` integer array, values in ``[0, V)``.
        W: ``(V, d_model)`` float32/float64 embedding table.

    Returns:
        ``(out, cache)``; ``out`` is ``(B, T, d_model)`` with ``W``'s dtype, a fresh array (a gather copies).

    Raises:
        TypeError: ``ids`` is not an integer array.
        ValueError: an id is outside ``[0, V)``.
    """
    get_array_module(ids, W)
    if not hasattr(ids, "dtype") or ids.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be an integer array, got {getattr(ids, 'dtype', type(ids).__name__)}")
    V = W.shape[0]
    if ids.size and bool(((ids < 0) | (ids >= V)).any()):  # one device read, at the model's entry
        raise ValueError(f"embedding: ids must lie in [0, {V}), got values in [{int(ids.min())}, {int(ids.max())}]")
    # 1. gather one row per token
    out = W[ids]  # (B, T, d_model)
    return out, EmbeddingCache(ids, W.shape, W.dtype)


def embedding_backward(dout, cache: EmbeddingCache):
    """Gradient of :func:`embedding_forward` with respect to ``W``.

    Args:
        dout: ``(B, T, d_model)`` upstream gradient.

    Returns:
        ``dW`` ``(V, d_model)``: row v is the sum of ``dout`` over every position holding id v.
    """
    xp = get_array_module(dout)
    dW = xp.zeros(cache.W_shape, dtype=cache.dtype)  # (V, d_model)
    # step 1 was: gather rows -> scatter-add them back; repeated ids accumulate
    xp.add.at(dW, cache.ids.reshape(-1), dout.reshape(-1, cache.W_shape[1]))  # (B*T,) , (B*T, d_model)
    return dW
