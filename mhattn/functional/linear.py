"""Steps 1 and 6 of multi-head attention (numbered as in :mod:`~mhattn.functional.mha`): the affine maps ``x @ W + b``.

Vaswani et al. 2017, §3.2.2: ``Q = X W^Q``, ``K = X W^K``, ``V = X W^V`` and
the output projection ``Concat(head_1..head_h) W^O``. Weights are stored
``(d_in, d_out)`` so the code reads like the paper (torch stores ``(d_out, d_in)``).
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace


class LinearCache(NamedTuple):
    x: object  # (..., d_in) the input, kept for dW
    W: object  # (d_in, d_out) kept for dx
    has_bias: bool


def linear_forward(x, W, b=None):
    """``out = x @ W + b`` on the last axis.

    Args:
        x: ``(..., d_in)`` float32/float64, any array-API array (NumPy, CuPy, torch, array-api-strict).
        W: ``(d_in, d_out)``, same dtype as ``x``.
        b: ``(d_out,)`` or ``None``.

    Returns:
        ``(out, cache)``; ``out`` is ``(..., d_out)``, dtype, namespace and device of ``x``, a fresh array
        (not in the cache).

    Raises:
        ValueError: ``x.shape[-1] != W.shape[0]`` or ``b`` is not ``(d_out,)``; arrays on two devices.
        TypeError: arrays of two libraries.
    """
    if x.shape[-1] != W.shape[0]:
        raise ValueError(f"linear: x has trailing dimension {x.shape[-1]} but W is {W.shape}")
    if b is not None and b.shape != (W.shape[1],):
        raise ValueError(f"linear: b must have shape ({W.shape[1]},), got {b.shape}")
    xp = array_namespace(x, W, b)  # refuses two libraries or two devices
    # 1. one 2-D GEMM over all positions: (N, d_in) @ (d_in, d_out)
    out = xp.matmul(xp.reshape(x, (-1, x.shape[-1])), W)  # (N, d_in) @ (d_in, d_out) -> (N, d_out)
    # 2. add the bias in place on the fresh GEMM result
    if b is not None:
        out += b
    return xp.reshape(out, (*x.shape[:-1], W.shape[1])), LinearCache(x, W, b is not None)  # (..., d_out)


def linear_backward(dout, cache: LinearCache):
    """Gradients of :func:`linear_forward`.

    Args:
        dout: ``(..., d_out)``, upstream gradient.
        cache: from :func:`linear_forward`.

    Returns:
        ``(dx, dW, db)``: ``(..., d_in)``, ``(d_in, d_out)``, ``(d_out,)``
        (``db`` is ``None`` when the forward had no bias).
    """
    x, W, has_bias = cache
    xp = array_namespace(dout, W)
    dout2 = xp.reshape(dout, (-1, dout.shape[-1]))  # (N, d_out)
    # step 2 was: + b  -> db sums over every position
    db = xp.sum(dout2, axis=0) if has_bias else None  # (d_out,)
    # step 1 was: x @ W -> dx = dout W^T, dW = x^T dout
    dx = xp.reshape(xp.matmul(dout2, W.mT), x.shape)  # (N, d_out) @ (d_out, d_in) -> (..., d_in)
    dW = xp.matmul(xp.reshape(x, (-1, x.shape[-1])).mT, dout2)  # (d_in, N) @ (N, d_out) -> (d_in, d_out)
    return dx, dW, db
