"""Steps 2 and 5 (numbered as in :mod:`~mhattn.functional.mha`): split d_model into h heads of d_k; the concat back.

Vaswani et al. 2017, §3.2.2: each head works on ``d_k = d_model / h``
dimensions; ``MultiHead = Concat(head_1, ..., head_h) W^O``. Both ops only
move numbers, so each one's backward is the other one.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace


class HeadsCache(NamedTuple):
    num_heads: int  # h: all either op needs to undo itself


def split_heads_forward(x, num_heads: int):
    """``(B, T, d_model)`` -> ``(B, h, T, d_k)``, head i holding columns ``i*d_k:(i+1)*d_k``.

    ``x``: any array-API array (NumPy, CuPy, torch, array-api-strict). Returns a view where the
    library can (no copy); dtype, namespace and device are kept.

    Raises:
        ValueError: ``x`` is not 3-D, or ``d_model`` is not divisible by ``num_heads``.
    """
    if x.ndim != 3:
        raise ValueError(f"split_heads: x must be (B, T, d_model), got shape {x.shape}")
    B, T, d_model = x.shape
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"split_heads: d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    xp = array_namespace(x)
    # 1. cut the feature axis into h slices of d_k
    x = xp.reshape(x, (B, T, num_heads, d_k))  # (B, T, h, d_k)
    # 2. bring the head axis in front of the positions
    return xp.permute_dims(x, (0, 2, 1, 3)), HeadsCache(num_heads)  # (B, h, T, d_k)


def split_heads_backward(dout, cache: HeadsCache):
    """``(B, h, T, d_k)`` -> ``(B, T, d_model)``: gradient of :func:`split_heads_forward`."""
    return combine_heads_forward(dout)[0]


def combine_heads_forward(x):
    """The concat: ``(B, h, T, d_k)`` -> ``(B, T, h*d_k)``, heads side by side in order.

    The result is C-contiguous on NumPy (one copy; a view when h == 1), ready for a 2-D GEMM;
    namespace, device and dtype are ``x``'s.

    Raises:
        ValueError: ``x`` is not 4-D.
    """
    if x.ndim != 4:
        raise ValueError(f"combine_heads: x must be (B, h, T, d_k), got shape {x.shape}")
    B, h, T, d_k = x.shape
    xp = array_namespace(x)
    # 1. positions back in front of heads
    x = xp.permute_dims(x, (0, 2, 1, 3))  # (B, T, h, d_k)
    # 2. glue the heads' features together (copies: the view is not contiguous)
    return xp.reshape(x, (B, T, h * d_k)), HeadsCache(h)  # (B, T, d_model)


def combine_heads_backward(dout, cache: HeadsCache):
    """``(B, T, d_model)`` -> ``(B, h, T, d_k)``: gradient of :func:`combine_heads_forward`."""
    return split_heads_forward(dout, cache.num_heads)[0]
