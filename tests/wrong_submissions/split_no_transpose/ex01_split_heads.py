# Wrong on purpose (reshape without the transpose):
# a copy of solutions/ex01_split_heads.py with one bug. Used by tests/test_grade.py.
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
    if x.ndim != 3:
        raise ValueError(f"split_heads: x must be (B, T, d_model), got shape {x.shape}")
    B, T, d_model = x.shape
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"split_heads: d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return x.reshape(B, num_heads, T, d_k)  # BUG: right shape, but the numbers of different positions mix
