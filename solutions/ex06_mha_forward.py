# Generated from exercises_src/ex06_mha_forward.py by scripts/make_exercises.py: edit the source, not this file.
"""Exercise 6: the output projection and the full multi-head forward (Vaswani et al. 2017, §3.2.2).

Read exercises/README.md, section "6. Output projection and the full forward", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex06``.
For the earlier steps you may use mhattn's references (imported below), but not
``linear_forward``, ``multi_head_attention_forward`` or ``MultiHeadAttention``.
"""

from __future__ import annotations

import numpy as np

from mhattn.functional import combine_heads_forward, scaled_dot_product_attention_forward, split_heads_forward


def output_projection(concat, W_o, b_o=None):
    """``concat @ W_o + b_o``: mix the concatenated heads back into d_model features.

    Args:
        concat: ``(B, T, d_model)`` float32/float64, the heads side by side.
        W_o: ``(d_model, d_model)`` same dtype (stored ``(d_in, d_out)``).
        b_o: ``(d_model,)`` or ``None``.
    None of the inputs may be modified.

    Returns:
        ``(B, T, d_model)``, dtype of ``concat``.
    """
    out = concat @ W_o  # (B, T, d_model)
    return out if b_o is None else out + b_o


def mha_forward(query, key, value, params, num_heads, attn_mask=None):
    """``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``, ``head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)``.

    Args:
        query: ``(B, T, d_model)`` float32/float64.
        key: ``(B, S, d_model)``; value: ``(B, S, d_model)``; same dtype.
        params: dict with ``W_q, W_k, W_v, W_o`` each ``(d_model, d_model)`` and
            ``b_q, b_k, b_v, b_o`` each ``(d_model,)``; same dtype. Weights are ``(d_in, d_out)``.
        num_heads: h, divides d_model; ``d_k = d_model // h``.
        attn_mask: ``None`` or bool broadcastable to ``(B, h, T, S)``, True = not allowed.
    None of the inputs (nor ``params``) may be modified.

    Returns:
        ``(out, weights)``: ``out`` ``(B, T, d_model)``, ``weights`` ``(B, h, T, S)``, the inputs' dtype.
    """
    p = params
    Q = query @ p["W_q"] + p["b_q"]  # (B, T, d_model)
    K = key @ p["W_k"] + p["b_k"]  # (B, S, d_model)
    V = value @ p["W_v"] + p["b_v"]  # (B, S, d_model)
    q, _ = split_heads_forward(Q, num_heads)  # (B, h, T, d_k)
    k, _ = split_heads_forward(K, num_heads)  # (B, h, S, d_k)
    v, _ = split_heads_forward(V, num_heads)  # (B, h, S, d_k)
    heads, weights, _ = scaled_dot_product_attention_forward(q, k, v, attn_mask)  # (B, h, T, d_k)
    concat, _ = combine_heads_forward(heads)  # (B, T, d_model)
    return output_projection(concat, p["W_o"], p["b_o"]), weights
