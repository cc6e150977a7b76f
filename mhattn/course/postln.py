"""A post-LN encoder block, for comparison with mhattn's pre-LN block (notebook 04).

Vaswani et al. 2017, §3.1, normalise *after* each residual add ("post-LN")::

    1. m   = MultiHead(x, x, x)                    (B, T, d_model)
    2. x1  = LN1(x + m)        residual, then LN   (B, T, d_model)
    3. g   = FFN(x1)                               (B, T, d_model)
    4. out = LN2(x1 + g)       residual, then LN   (B, T, d_model)

mhattn's models use the pre-LN block of :mod:`mhattn.functional.encoder` (``x + F(LN(x))``, Xiong et al.
2020); this one exists so that the course can put the two side by side. It is composed from the same
functional pairs and takes the same flat parameters (``BLOCK_PARAM_NAMES``); no dropout, no head mask.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.functional.feedforward import FeedForwardCache, feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import LayerNormCache, layernorm_backward, layernorm_forward
from mhattn.functional.mha import PARAM_NAMES, MHACache, multi_head_attention_backward, multi_head_attention_forward


class PostLNCache(NamedTuple):
    attn: MHACache  # step 1
    ln1: LayerNormCache  # step 2
    ff: FeedForwardCache  # step 3
    ln2: LayerNormCache  # step 4


def post_ln_block_forward(x, params, num_heads, *, attn_mask=None):
    """Post-LN encoder block.

    Args:
        x: ``(B, T, d_model)`` float32/float64.
        params: mapping with every name in :data:`mhattn.functional.encoder.BLOCK_PARAM_NAMES`.
        num_heads: h.
        attn_mask: optional, as for :func:`mhattn.functional.multi_head_attention_forward`.

    Returns:
        ``(out, weights, cache)``: ``out`` ``(B, T, d_model)``; ``weights`` ``(B, h, T, T)``.
    """
    attn_params = {n: params[f"attn.{n}"] for n in PARAM_NAMES}
    # 1. self-attention on the un-normalised input
    m, weights, attn = multi_head_attention_forward(x, x, x, attn_params, num_heads, attn_mask=attn_mask)
    # 2. residual, then normalise
    x1, ln1 = layernorm_forward(x + m, params["ln1.gamma"], params["ln1.beta"])  # (B, T, d_model)
    # 3. position-wise FFN
    g, ff = feedforward_forward(x1, params["ff.W1"], params["ff.b1"], params["ff.W2"], params["ff.b2"])
    # 4. residual, then normalise
    out, ln2 = layernorm_forward(x1 + g, params["ln2.gamma"], params["ln2.beta"])  # (B, T, d_model)
    return out, weights, PostLNCache(attn, ln1, ff, ln2)


def post_ln_block_backward(dout, cache: PostLNCache):
    """Gradients of :func:`post_ln_block_forward`.

    Returns:
        ``(dx, grads)``: ``dx`` ``(B, T, d_model)``; ``grads`` maps every block parameter name to its gradient.
    """
    g = {}
    # step 4 was: out = LN2(x1 + g) -> both branches of the sum get the LayerNorm's input gradient
    ds2, g["ln2.gamma"], g["ln2.beta"] = layernorm_backward(dout, cache.ln2)
    # step 3 was: g = FFN(x1)
    dx1_ff, g["ff.W1"], g["ff.b1"], g["ff.W2"], g["ff.b2"] = feedforward_backward(ds2, cache.ff)
    dx1 = ds2 + dx1_ff  # (B, T, d_model)
    # step 2 was: x1 = LN1(x + m)
    ds1, g["ln1.gamma"], g["ln1.beta"] = layernorm_backward(dx1, cache.ln1)
    # step 1 was: m = MultiHead(x, x, x) -> the one input gets the sum of the three gradients
    dq, dk, dv, attn_grads, _ = multi_head_attention_backward(ds1, cache.attn)
    g.update({f"attn.{n}": v for n, v in attn_grads.items()})
    return ds1 + dq + dk + dv, g
