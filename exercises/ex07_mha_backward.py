# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex07_mha_backward.py by scripts/make_exercises.py; change the source, not this copy.)
"""Exercise 7: the full multi-head backward, every parameter's gradient.

Read exercises/README.md, section "7. The full backward", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex07``.
You may use mhattn's forward functions and the backward of each *step* (imported
below), but not ``multi_head_attention_backward`` or ``MultiHeadAttention``.
"""

from __future__ import annotations

import numpy as np

from mhattn.functional import (
    combine_heads_backward,
    combine_heads_forward,
    linear_backward,
    linear_forward,
    scaled_dot_product_attention_backward,
    scaled_dot_product_attention_forward,
    split_heads_backward,
    split_heads_forward,
)


def mha_backward(dout, query, key, value, params, num_heads, attn_mask=None):
    """Gradients of exercise 6's ``mha_forward`` with respect to its inputs and parameters.

    Recompute the forward (keeping each step's cache), then walk the steps in reverse:
    output projection, concat, attention, split, the three input projections.

    Args:
        dout: ``(B, T, d_model)`` float32/float64 upstream gradient ``dL/dout``.
        query: ``(B, T, d_model)``; key, value: ``(B, S, d_model)``; same dtype.
        params: dict ``W_q, W_k, W_v, W_o`` ``(d_model, d_model)`` and ``b_q, b_k, b_v, b_o``
            ``(d_model,)``, weights stored ``(d_in, d_out)``.
        num_heads: h; attn_mask: ``None`` or bool broadcastable to ``(B, h, T, S)``.
    None of the inputs (nor ``params``) may be modified.

    Returns:
        ``(dquery, dkey, dvalue, grads)``: arrays shaped like ``query``, ``key``, ``value``,
        and a dict with the eight keys of ``params``, each gradient shaped like its parameter.
        All of the inputs' dtype. (For self-attention a caller adds the three input gradients.)
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex07_mha_backward: not written yet")
