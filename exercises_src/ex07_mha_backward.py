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
    ### BEGIN SOLUTION
    p = params
    Q, cq = linear_forward(query, p["W_q"], p["b_q"])  # (B, T, d_model)
    K, ck = linear_forward(key, p["W_k"], p["b_k"])  # (B, S, d_model)
    V, cv = linear_forward(value, p["W_v"], p["b_v"])  # (B, S, d_model)
    q, cs = split_heads_forward(Q, num_heads)  # (B, h, T, d_k)
    k, _ = split_heads_forward(K, num_heads)
    v, _ = split_heads_forward(V, num_heads)
    heads, _, ca = scaled_dot_product_attention_forward(q, k, v, attn_mask)  # (B, h, T, d_k)
    concat, cc = combine_heads_forward(heads)  # (B, T, d_model)
    _, co = linear_forward(concat, p["W_o"], p["b_o"])
    grads = {}
    dconcat, grads["W_o"], grads["b_o"] = linear_backward(dout, co)  # (B, T, d_model)
    dheads = combine_heads_backward(dconcat, cc)  # (B, h, T, d_k)
    dq, dk, dv = scaled_dot_product_attention_backward(dheads, ca)
    dQ, dK, dV = (split_heads_backward(d, cs) for d in (dq, dk, dv))  # (B, T|S, d_model)
    dquery, grads["W_q"], grads["b_q"] = linear_backward(dQ, cq)
    dkey, grads["W_k"], grads["b_k"] = linear_backward(dK, ck)
    dvalue, grads["W_v"], grads["b_v"] = linear_backward(dV, cv)
    return dquery, dkey, dvalue, grads
    ### END SOLUTION
