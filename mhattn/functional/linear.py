"""Step 1 and step 5 of multi-head attention: the affine maps ``x @ W + b``.

Vaswani et al. 2017, §3.2.2: ``Q = X W^Q``, ``K = X W^K``, ``V = X W^V`` and
the output projection ``Concat(head_1..head_h) W^O``. Weights are stored
``(d_in, d_out)`` so the code reads like the paper (torch stores ``(d_out, d_in)``).
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import get_array_module


class LinearCache(NamedTuple):
    x: object  # (..., d_in) the input, kept for dW
    W: object  # (d_in, d_out) kept for dx
    has_bias: bool


def linear_forward(x, W, b=None):
    """``out = x @ W + b`` on the last axis.

    Args:
        x: ``(..., d_in)`` float32/float64.
        W: ``(d_in, d_out)``, same dtype as ``x``.
        b: ``(d_out,)`` or ``None``.

    Returns:
        ``(out, cache)``; ``out`` is ``(..., d_out)``, dtype of ``x``, a fresh array (not in the cache).

    Raises:
        ValueError: ``x.shape[-1] != W.shape[0]`` or ``b`` is not ``(d_out,)``.
    """
    if x.shape[-1] != W.shape[0]:
        raise ValueError(f"linear: x has trailing dimension {x.shape[-1]} but W is {W.shape}")
    if b is not None and b.shape != (W.shape[1],):
        raise ValueError(f"linear: b must have shape ({W.shape[1]},), got {b.shape}")
    get_array_module(x, W, b)  # refuses NumPy/CuPy mixtures
    # 1. one 2-D GEMM over all positions: (N, d_in) @ (d_in, d_out)
    out = x.reshape(-1, x.shape[-1]) @ W  # (N, d_out)
    # 2. add the bias in place on the fresh GEMM result
    if b is not None:
        out += b
    return out.reshape(*x.shape[:-1], W.shape[1]), LinearCache(x, W, b is not None)


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
    dout2 = dout.reshape(-1, dout.shape[-1])  # (N, d_out)
    # step 2 was: + b  -> db sums over every position
    db = dout2.sum(axis=0) if has_bias else None  # (d_out,)
    # step 1 was: x @ W -> dx = dout W^T, dW = x^T dout
    dx = (dout2 @ W.T).reshape(x.shape)  # (..., d_in)
    dW = x.reshape(-1, x.shape[-1]).T @ dout2  # (d_in, d_out)
    return dx, dW, db
