# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex03_attention_forward.py by scripts/make_exercises.py; change the source, not this copy.)
"""Exercise 3: scaled dot-product attention, forward (Vaswani et al. 2017, §3.2.1, eq. 1).

Read exercises/README.md, section "3. Scaled dot-product attention, forward", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex03``.
You may use ``mhattn.functional.softmax_forward`` (exercise 2's reference), but
not mhattn's attention or causal-mask functions: that is this exercise.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.functional import softmax_forward


def make_causal_mask(T, S=None):
    """Bool mask for causal (left-to-right) attention.

    Args:
        T: number of queries; S: number of keys (default ``T``).

    Returns:
        ``(T, S)`` bool array, True = not allowed: query ``t`` may see keys ``0..t``
        (its own position included) and nothing after.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex03_attention_forward: not written yet")


def attention_forward(q, k, v, mask=None, causal=False):
    """``softmax(q k^T / sqrt(d_k)) v`` for every batch element and head at once.

    Args:
        q: ``(B, h, T, d_k)`` float32/float64 queries.
        k: ``(B, h, S, d_k)`` keys, same dtype.
        v: ``(B, h, S, d_v)`` values, same dtype.
        mask: ``None`` or bool broadcastable to ``(B, h, T, S)``, True = not allowed
            (e.g. a key-padding mask of shape ``(B, 1, 1, S)``).
        causal: also hide the keys after each query (:func:`make_causal_mask`).
    None of the inputs may be modified.

    Returns:
        ``(out, weights)``: ``out`` ``(B, h, T, d_v)`` and ``weights`` ``(B, h, T, S)``,
        both of ``q``'s dtype. Each row of ``weights`` sums to 1, or is all 0 when
        every key is hidden from that query.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex03_attention_forward: not written yet")
