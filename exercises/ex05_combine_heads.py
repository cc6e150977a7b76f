# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex05_combine_heads.py by scripts/make_exercises.py; change the source, not this copy.)
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
    # YOUR CODE HERE
    raise NotImplementedError("ex05_combine_heads: not written yet")
