"""Position-wise feed-forward network, Vaswani et al. 2017, §3.3, eq. (2).

``FFN(x) = max(0, x W1 + b1) W2 + b2``, the same two affine maps at every position.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace
from mhattn.functional.linear import LinearCache, linear_backward, linear_forward


class FeedForwardCache(NamedTuple):
    fc1: LinearCache
    fc2: LinearCache


def feedforward_forward(x, W1, b1, W2, b2):
    """Two linear maps with a ReLU between.

    Args:
        x: ``(..., d_model)`` (a leading size 0, an empty batch, is allowed); W1 ``(d_model, d_ff)``; b1 ``(d_ff,)``;
        W2 ``(d_ff, d_model)``; b2 ``(d_model,)``; one float dtype, one namespace and device.

    Returns:
        ``(out, cache)``, ``out`` ``(..., d_model)``, a fresh array (not in the cache).
    """
    xp = array_namespace(x, W1, b1, W2, b2)
    # 1. expand
    hidden, fc1 = linear_forward(x, W1, b1)  # (..., d_ff)
    # 2. ReLU: max(0, hidden)
    relu = xp.maximum(hidden, 0.0)  # (..., d_ff)
    # 3. project back
    out, fc2 = linear_forward(relu, W2, b2)  # (..., d_model)
    return out, FeedForwardCache(fc1, fc2)


def feedforward_backward(dout, cache: FeedForwardCache):
    """Gradients of :func:`feedforward_forward`: ``(dx, dW1, db1, dW2, db2)``, ``dout``'s namespace and device."""
    xp = array_namespace(dout)
    # step 3 was: relu W2 + b2
    drelu, dW2, db2 = linear_backward(dout, cache.fc2)  # (..., d_ff)
    # step 2 was: ReLU -> pass the gradient where the input was positive (where the output is)
    dhidden = xp.where(cache.fc2.x > 0, drelu, 0.0)  # (..., d_ff); fc2.x is the ReLU's output
    # step 1 was: x W1 + b1
    dx, dW1, db1 = linear_backward(dhidden, cache.fc1)  # (..., d_model)
    return dx, dW1, db1, dW2, db2
