# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex02_softmax.py by scripts/make_exercises.py; change the source, not this copy.)
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
    # YOUR CODE HERE
    raise NotImplementedError("ex02_softmax: not written yet")


def softmax_backward(dprobs, probs):
    """Gradient of the loss with respect to the scores, given the softmax output.

    Applies the transposed softmax Jacobian of each row to ``dprobs`` (the formula is in the README's hint).

    Args:
        dprobs: ``(..., S)`` float32/float64 upstream gradient ``dL/dprobs``.
        probs: ``(..., S)`` the output of :func:`softmax_forward` (same shape and dtype).

    Returns:
        ``dscores``: ``(..., S)``, dtype of ``dprobs``; 0 where ``probs`` is 0 because of a mask.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex02_softmax: not written yet")
