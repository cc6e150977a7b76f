"""One Transformer encoder block, pre-LN (Xiong et al. 2020), on multi-head attention.

Vaswani et al. 2017 (§3.1) normalise *after* each residual add ("post-LN":
``x = LN(x + Sublayer(x))``). We normalise *before* each sub-layer ("pre-LN":
``x = x + Sublayer(LN(x))``), as GPT-2 and most current models do: the residual
path stays an identity, so small models train with a constant learning rate and
no warm-up. The model adds one final LayerNorm after the last block.

Forward steps (numbered; the backward undoes them in reverse)::

    1. a  = LN1(x)                                   (B, T, d_model)
    2. m  = MultiHead(a, a, a; head_mask ξ)           (B, T, d_model), weights (B, h, T, T)
    3. x1 = x + Dropout(m)        residual            (B, T, d_model)
    4. f  = LN2(x1)                                   (B, T, d_model)
    5. g  = FFN(f)                                    (B, T, d_model)
    6. out = x1 + Dropout(g)      residual            (B, T, d_model)

Parameters are a flat mapping: ``ln1.gamma, ln1.beta, attn.W_q ... attn.b_o,
ln2.gamma, ln2.beta, ff.W1, ff.b1, ff.W2, ff.b2``.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.functional.dropout import DropoutCache, dropout_backward, dropout_forward
from mhattn.functional.feedforward import FeedForwardCache, feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import LayerNormCache, layernorm_backward, layernorm_forward
from mhattn.functional.mha import PARAM_NAMES, MHACache, multi_head_attention_backward, multi_head_attention_forward

BLOCK_PARAM_NAMES = (
    "ln1.gamma", "ln1.beta", *(f"attn.{n}" for n in PARAM_NAMES), "ln2.gamma", "ln2.beta", "ff.W1", "ff.b1", "ff.W2", "ff.b2",
)  # fmt: skip


class EncoderBlockCache(NamedTuple):
    ln1: LayerNormCache  # step 1
    attn: MHACache  # step 2
    drop1: DropoutCache  # step 3
    ln2: LayerNormCache  # step 4
    ff: FeedForwardCache  # step 5
    drop2: DropoutCache  # step 6


def encoder_block_forward(x, params, num_heads, *, attn_mask=None, head_mask=None, dropout_p=0.0, rng=None):
    """Pre-LN encoder block.

    Args:
        x: ``(B, T, d_model)`` float32/float64, any array-API library (B = 0, an empty batch, is allowed).
        params: mapping with every name in ``BLOCK_PARAM_NAMES`` (see module docstring).
        num_heads: h.
        attn_mask: e.g. :func:`mhattn.causal_mask` ``(T, T)`` for a language model.
        head_mask: ``(h,)`` or ``(B, h)`` multipliers ξ on the heads (Michel et al. 2019).
        dropout_p, rng: dropout on both sub-layer outputs (not on the attention weights).

    Returns:
        ``(out, weights, cache)``: ``out`` ``(B, T, d_model)``, a fresh array; ``weights`` ``(B, h, T, T)``,
        read-only (a view of the cached weights on NumPy, a copy elsewhere); all of ``x``'s namespace and device.
    """
    attn_params = {n: params[f"attn.{n}"] for n in PARAM_NAMES}
    # 1. normalise before attention
    a, ln1 = layernorm_forward(x, params["ln1.gamma"], params["ln1.beta"])  # (B, T, d_model)
    # 2. self-attention
    m, weights, attn = multi_head_attention_forward(a, a, a, attn_params, num_heads, attn_mask=attn_mask, head_mask=head_mask)
    # 3. dropout + residual
    md, drop1 = dropout_forward(m, dropout_p, rng)
    x1 = x + md  # (B, T, d_model)
    # 4. normalise before the FFN
    f, ln2 = layernorm_forward(x1, params["ln2.gamma"], params["ln2.beta"])
    # 5. position-wise FFN
    g, ff = feedforward_forward(f, params["ff.W1"], params["ff.b1"], params["ff.W2"], params["ff.b2"])  # (B, T, d_model)
    # 6. dropout + residual
    gd, drop2 = dropout_forward(g, dropout_p, rng)
    out = x1 + gd  # (B, T, d_model)
    return out, weights, EncoderBlockCache(ln1, attn, drop1, ln2, ff, drop2)


def encoder_block_backward(dout, cache: EncoderBlockCache):
    """Gradients of :func:`encoder_block_forward`.

    Returns:
        ``(dx, grads, dhead_mask)``: ``dx`` ``(B, T, d_model)``; ``grads`` maps every
        name in ``BLOCK_PARAM_NAMES`` to its gradient; ``dhead_mask`` has the head
        mask's shape (``None`` without one).
    """
    g = {}
    # step 6 was: out = x1 + dropout(g) -> both branches receive dout
    dg = dropout_backward(dout, cache.drop2)
    # step 5 was: FFN
    df, g["ff.W1"], g["ff.b1"], g["ff.W2"], g["ff.b2"] = feedforward_backward(dg, cache.ff)
    # step 4 was: LN2
    dx1_ln, g["ln2.gamma"], g["ln2.beta"] = layernorm_backward(df, cache.ln2)
    dx1 = dout + dx1_ln  # (B, T, d_model)
    # step 3 was: x1 = x + dropout(m)
    dm = dropout_backward(dx1, cache.drop1)
    # step 2 was: self-attention -> the one input gets the sum of the three gradients
    dq, dk, dv, attn_grads, dhead_mask = multi_head_attention_backward(dm, cache.attn)
    g.update({f"attn.{n}": v for n, v in attn_grads.items()})
    # step 1 was: LN1
    da = dq + dk + dv
    dx_ln, g["ln1.gamma"], g["ln1.beta"] = layernorm_backward(da, cache.ln1)
    return dx1 + dx_ln, g, dhead_mask
