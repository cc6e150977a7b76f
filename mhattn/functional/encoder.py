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

from mhattn.backend import array_namespace
from mhattn.functional.dropout import DropoutCache, dropout_backward, dropout_forward
from mhattn.functional.feedforward import FeedForwardCache, feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import LayerNormCache, layernorm_backward, layernorm_forward
from mhattn.functional.linear import LinearCache, linear_backward, linear_forward
from mhattn.functional.mha import MHA_STEPS, PARAM_NAMES, MHACache
from mhattn.functional.split_heads import HeadsCache, combine_heads_backward, combine_heads_forward

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


def encoder_block_forward(x, params, num_heads, *, attn_mask=None, head_mask=None, dropout_p=0.0, rng=None, attention=MHA_STEPS):
    """Pre-LN encoder block.

    Args:
        x: ``(B, T, d_model)`` float32/float64, any array-API library (B = 0, an empty batch, is allowed).
        params: mapping with every name in ``BLOCK_PARAM_NAMES`` (see module docstring).
        num_heads: h.
        attn_mask: e.g. :func:`mhattn.causal_mask` ``(T, T)`` for a language model.
        head_mask: ``(h,)`` or ``(B, h)`` multipliers ξ on the heads (Michel et al. 2019).
        dropout_p, rng: dropout on both sub-layer outputs (not on the attention weights).
        attention: the ``(forward, backward)`` pair of step 2: the reference :data:`~mhattn.functional.mha.MHA_STEPS`
            (default), or a drop-in twin with its signatures and cache (:mod:`mhattn.nn` passes the speed engine's);
            the backward must be given the same pair.

    Returns:
        ``(out, weights, cache)``: ``out`` ``(B, T, d_model)``, a fresh array; ``weights`` ``(B, h, T, T)``,
        read-only (a view of the cached weights on NumPy, a copy elsewhere); all of ``x``'s namespace and device.
    """
    attn_params = {n: params[f"attn.{n}"] for n in PARAM_NAMES}
    # 1. normalise before attention
    a, ln1 = layernorm_forward(x, params["ln1.gamma"], params["ln1.beta"])  # (B, T, d_model)
    # 2. self-attention
    m, weights, attn = attention[0](a, a, a, attn_params, num_heads, attn_mask=attn_mask, head_mask=head_mask)
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


def encoder_block_backward(dout, cache: EncoderBlockCache, attention=MHA_STEPS):
    """Gradients of :func:`encoder_block_forward` (``attention``: the pair the forward ran).

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
    dq, dk, dv, attn_grads, dhead_mask = attention[1](dm, cache.attn)
    g.update({f"attn.{n}": v for n, v in attn_grads.items()})
    # step 1 was: LN1
    da = dq + dk + dv
    dx_ln, g["ln1.gamma"], g["ln1.beta"] = layernorm_backward(da, cache.ln1)
    return dx1 + dx_ln, g, dhead_mask


class BlockTailCache(NamedTuple):
    heads: object  # (B, h, T, d_k) the unmasked head outputs
    head_mask: object  # (h,) or (B, h), or None
    split: HeadsCache  # MHA step 5
    out_proj: LinearCache  # MHA step 6
    ln2: LayerNormCache  # block step 4
    ff: FeedForwardCache  # block step 5


def block_tail_forward(x, heads, head_mask, params):
    """The block from its head mask on: MHA steps 4-6 (``heads * ξ``, concat, ``W_o``), then block steps 3-6
    (residual, LN2, feed-forward, residual), without dropout. What the head analysis reruns when only ξ changes
    (:mod:`mhattn.heads.mask_eval`): :func:`encoder_block_forward` equals its attention's heads followed by this.

    Args:
        x: ``(B, T, d_model)`` the block's input; heads: ``(B, h, T, d_k)`` the unmasked head outputs (an MHA
            cache's ``heads``); head_mask: ``(h,)``, ``(B, h)`` or ``None``; params: the block's flat parameters.

    Returns:
        ``(out, cache)``: ``out`` ``(B, T, d_model)`` and a :class:`BlockTailCache`.

    Source: Vaswani et al. 2017, §3.2.2 (concat, ``W^O``); Michel et al. 2019, §2 (ξ); Xiong et al. 2020 (pre-LN).
    """
    xp = array_namespace(x, heads)
    # MHA 4. the head mask ξ scales each head's output
    masked = heads if head_mask is None else heads * xp.reshape(head_mask, (*head_mask.shape, 1, 1))  # (B, h, T, d_k)
    # MHA 5-6. concat and the output projection
    concat, split = combine_heads_forward(masked)  # (B, T, d_model)
    m, out_proj = linear_forward(concat, params["attn.W_o"], params["attn.b_o"])  # (B, T, d_model)
    # 3-6. residual, LN2, FFN, residual
    x1 = x + m
    f, ln2 = layernorm_forward(x1, params["ln2.gamma"], params["ln2.beta"])
    g, ff = feedforward_forward(f, params["ff.W1"], params["ff.b1"], params["ff.W2"], params["ff.b2"])
    return x1 + g, BlockTailCache(heads, head_mask, split, out_proj, ln2, ff)


def block_tail_backward(dout, cache: BlockTailCache):
    """Gradients of :func:`block_tail_forward` with respect to its input and the head mask.

    Returns:
        ``(dx, dhead_mask)``: ``(B, T, d_model)``, and ξ's shape (``None`` without a head mask).
    """
    # 6-3 were: out = x1 + FFN(LN2(x1)), x1 = x + m
    dx1 = dout + layernorm_backward(feedforward_backward(dout, cache.ff)[0], cache.ln2)[0]  # (B, T, d_model)
    # MHA 6-5 were: W_o, concat
    dmasked = combine_heads_backward(linear_backward(dx1, cache.out_proj)[0], cache.split)  # (B, h, T, d_k)
    # MHA 4 was: heads * ξ -> dξ = <dmasked, heads> per head
    dhead_mask = None
    if cache.head_mask is not None:
        xp = array_namespace(dmasked, cache.heads)
        dhead_mask = xp.sum(dmasked * cache.heads, axis=(2, 3))  # (B, h)
        dhead_mask = xp.sum(dhead_mask, axis=0) if cache.head_mask.ndim == 1 else dhead_mask  # (h,)
    return dx1, dhead_mask
