# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex04_attention_backward.py by scripts/make_exercises.py; change the source, not this copy.)
"""Exercise 4: scaled dot-product attention, backward.

Read exercises/README.md, section "4. Scaled dot-product attention, backward", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex04``.
You may use ``mhattn.functional.softmax_backward`` (exercise 2's reference; its cache
is ``mhattn.functional.softmax.SoftmaxCache(probs)``), but not mhattn's attention backward.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.functional.softmax import SoftmaxCache, softmax_backward


def attention_backward(dout, q, k, v, weights):
    """Gradients of ``out = softmax(q k^T / sqrt(d_k) [+ mask]) v`` (no dropout).

    Forward steps, to undo in reverse: 1. ``scores = q k^T``; 2. ``scores *= 1/sqrt(d_k)``;
    3. ``weights = softmax(scores)`` (masked entries have weight 0); 4. ``out = weights v``.

    Args:
        dout: ``(B, h, T, d_v)`` float32/float64 upstream gradient ``dL/dout``.
        q: ``(B, h, T, d_k)``; k: ``(B, h, S, d_k)``; v: ``(B, h, S, d_v)``: the forward's inputs.
        weights: ``(B, h, T, S)`` the forward's attention weights (masks already applied).
    None of the inputs may be modified.

    Returns:
        ``(dq, dk, dv)`` with the shapes of ``q``, ``k``, ``v`` and ``dout``'s dtype.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex04_attention_backward: not written yet")
