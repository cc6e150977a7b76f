"""Sinusoidal positional encoding, Vaswani et al. 2017, §3.5.

``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))`` and
``PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))``. It has no parameters and is
added to the token embeddings, so its backward passes the gradient through.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, device_of


class PositionalCache(NamedTuple):
    T: int  # sequence length that was encoded


def sinusoidal_encoding(T, d_model, like):
    """The ``(T, d_model)`` table, in the namespace, on the device and in the dtype of ``like``.

    Computed in float64, then cast to ``like``'s dtype.

    Raises:
        ValueError: ``d_model`` is odd (sin/cos come in pairs).
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal encoding needs an even d_model, got {d_model}")
    xp, device = array_namespace(like), device_of(like)
    pos = xp.arange(T, dtype=xp.float64, device=device)[:, None]  # (T, 1)
    freq = 10000.0 ** (-xp.arange(0, d_model, 2, dtype=xp.float64, device=device) / d_model)  # (d_model/2,)
    pe = xp.zeros((T, d_model), dtype=xp.float64, device=device)
    pe[:, 0::2] = xp.sin(pos * freq)  # (T, d_model/2)
    pe[:, 1::2] = xp.cos(pos * freq)
    return xp.astype(pe, like.dtype)


def positional_encoding_forward(x):
    """``x + PE[:T]``.

    Args:
        x: ``(B, T, d_model)`` float32/float64 (``d_model`` even; B = 0 allowed).

    Returns:
        ``(out, cache)``; ``out`` ``(B, T, d_model)``, dtype and device of ``x``, a fresh array.

    Raises:
        ValueError: ``x`` is not 3-D, or ``d_model`` is odd.
    """
    if x.ndim != 3:
        raise ValueError(f"positional encoding: x must be (B, T, d_model), got shape {x.shape}")
    # 1. add the fixed table, broadcast over the batch
    out = x + sinusoidal_encoding(x.shape[1], x.shape[2], x)[None, ...]  # (B, T, d_model)
    return out, PositionalCache(x.shape[1])


def positional_encoding_backward(dout, cache: PositionalCache):
    """Step 1 was ``x + PE``: the table is constant, so ``dx = dout``."""
    return dout
