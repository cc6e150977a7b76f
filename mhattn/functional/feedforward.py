"""Position-wise feed-forward network, Vaswani et al. 2017, §3.3, eq. (2).

``FFN(x) = max(0, x W1 + b1) W2 + b2``, the same two affine maps at every position.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, is_numpy
from mhattn.functional.linear import LinearCache, linear_backward, linear_forward


class FeedForwardCache(NamedTuple):
    fc1: LinearCache
    fc2: LinearCache


def _relu_in_place(xp, hidden):
    """``max(0, hidden)`` written into ``hidden`` (a fresh GEMM result the caller owns); returns it.

    NumPy: ``maximum(out=)``, no temporary; elsewhere the standard's boolean-mask assignment.
    """
    if is_numpy(xp):
        return xp.maximum(hidden, 0, out=hidden)
    hidden[hidden < 0] = 0.0
    return hidden


def _relu_backward(xp, drelu, relu):
    """``drelu`` where the ReLU's output ``relu`` is positive, 0 elsewhere.

    NumPy: a product with the bool mask (``where`` with a scalar is several times slower there); elsewhere
    the standard's ``where`` (a float times a bool array is not in the standard).
    """
    return drelu * (relu > 0) if is_numpy(xp) else xp.where(relu > 0, drelu, 0.0)


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
    # 2. ReLU, in place on the fresh GEMM result
    relu = _relu_in_place(xp, hidden)  # (..., d_ff)
    # 3. project back
    out, fc2 = linear_forward(relu, W2, b2)  # (..., d_model)
    return out, FeedForwardCache(fc1, fc2)


def feedforward_backward(dout, cache: FeedForwardCache):
    """Gradients of :func:`feedforward_forward`: ``(dx, dW1, db1, dW2, db2)``, ``dout``'s namespace and device."""
    xp = array_namespace(dout)
    # step 3 was: relu W2 + b2
    drelu, dW2, db2 = linear_backward(dout, cache.fc2)  # (..., d_ff)
    # step 2 was: ReLU -> pass the gradient where the input was positive (where the output is)
    dhidden = _relu_backward(xp, drelu, cache.fc2.x)  # fc2.x is the ReLU's output
    # step 1 was: x W1 + b1
    dx, dW1, db1 = linear_backward(dhidden, cache.fc1)  # (..., d_model)
    return dx, dW1, db1, dW2, db2
