"""Exercise 5: concatenate the heads back into d_model features (Vaswani et al. 2017, §3.2.2).

Read exercises/README.md, section "5. Combine heads", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex05``.
"""

from __future__ import annotations

import numpy as np


def combine_heads(x):
    """The concat in ``Concat(head_1, ..., head_h)``: the inverse of split heads.

    Args:
        x: ``(B, h, T, d_k)`` float32/float64 per-head outputs; do not modify it.

    Returns:
        ``(B, T, h*d_k)`` array, same dtype, heads side by side in order:
        ``out[b, t, i*d_k + j] == x[b, i, t, j]``.

    Raises:
        ValueError: ``x`` is not 4-D.
    """
    ### BEGIN SOLUTION
    if x.ndim != 4:
        raise ValueError(f"combine_heads: x must be (B, h, T, d_k), got shape {x.shape}")
    B, h, T, d_k = x.shape
    out = x.transpose(0, 2, 1, 3)  # (B, T, h, d_k)
    return np.ascontiguousarray(out).reshape(B, T, h * d_k)  # (B, T, d_model)
    ### END SOLUTION
