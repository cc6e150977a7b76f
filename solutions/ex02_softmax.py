# Generated from exercises_src/ex02_softmax.py by scripts/make_exercises.py: edit the source, not this file.
"""Exercise 2: the row-wise softmax, forward and backward (Vaswani et al. 2017, eq. 1).

Read exercises/README.md, section "2. Softmax", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex02``.
"""

from __future__ import annotations

import numpy as np


def softmax_forward(scores, mask=None):
    """Softmax over the last axis (the keys), numerically stable, with an optional mask.

    Args:
        scores: ``(..., S)`` float32/float64 array, e.g. ``(B, h, T, S)`` attention scores.
            Entries may be large (1000 must not overflow). Do not modify it.
        mask: ``None`` or a bool array broadcastable to ``scores.shape``;
            True = not allowed: that entry's probability is exactly 0.

    Returns:
        ``probs``: shape and dtype of ``scores``; every row sums to 1, except a row in
        which every entry is masked: that row is all zeros (not NaN).
    """
    z = scores if mask is None else np.where(mask, -np.inf, scores).astype(scores.dtype)
    m = z.max(axis=-1, keepdims=True)  # (..., 1)
    m = np.where(np.isfinite(m), m, 0)  # a fully masked row has max -inf
    e = np.exp(z - m)  # (..., S), masked entries are exp(-inf) = 0
    s = e.sum(axis=-1, keepdims=True)  # (..., 1)
    return (e / np.where(s == 0, 1, s)).astype(scores.dtype)


def softmax_backward(dprobs, probs):
    """Gradient of the loss with respect to the scores, given the softmax output.

    Applies the transposed softmax Jacobian of each row to ``dprobs`` (the formula is in the README's hint).

    Args:
        dprobs: ``(..., S)`` float32/float64 upstream gradient ``dL/dprobs``.
        probs: ``(..., S)`` the output of :func:`softmax_forward` (same shape and dtype).

    Returns:
        ``dscores``: ``(..., S)``, dtype of ``dprobs``; 0 where ``probs`` is 0 because of a mask.
    """
    dot = (dprobs * probs).sum(axis=-1, keepdims=True)  # (..., 1)
    return probs * (dprobs - dot)  # (..., S)
