# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex01_split_heads.py by scripts/make_exercises.py; change the source, not this copy.)
"""Exercise 1: split d_model into h heads of d_k (Vaswani et al. 2017, §3.2.2).

Read exercises/README.md, section "1. Split heads", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex01``.
Grade: ``mhattn grade`` (exercise ``ex01_split_heads``).
"""

from __future__ import annotations

import numpy as np


def split_heads(x, num_heads):
    """Cut the feature axis into ``num_heads`` slices and put the head axis first.

    Head ``i`` holds features ``i*d_k : (i+1)*d_k`` of every position.

    Args:
        x: ``(B, T, d_model)`` float32 or float64 NumPy array; do not modify it.
        num_heads: h, a positive int that divides ``d_model``.

    Returns:
        ``(B, h, T, d_k)`` array with ``d_k = d_model // h``, same dtype as ``x``;
        ``out[b, i, t, j] == x[b, t, i*d_k + j]``.

    Raises:
        ValueError: ``x`` is not 3-D, or ``d_model`` is not divisible by ``num_heads``.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex01_split_heads: not written yet")
