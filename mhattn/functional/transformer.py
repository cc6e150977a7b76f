"""A stack of pre-LN encoder blocks with one or more per-position classifiers.

Forward steps (numbered; the backward undoes them in reverse)::

    1. e = W_emb[ids]                 token embedding          (B, T, d_model)
    2. x = e + PE                     sinusoidal positions     (B, T, d_model)
    3. x = Dropout(x)
    4. x = Block_l(x), l = 0..L-1     (causal mask when causal) (B, T, d_model)
    5. z = LN_final(x)                                         (B, T, d_model)
    6. logits_k = z W_k + b_k         one classifier per output (B, T, C_k)

Parameter names: ``embed.W (V, d_model)``, ``blocks.{l}.<block name>`` (see
:mod:`mhattn.functional.encoder`), ``ln_f.gamma``, ``ln_f.beta``,
``out.{k}.W (d_model, C_k)``, ``out.{k}.b (C_k,)``.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, device_of
from mhattn.functional.dropout import DropoutCache, dropout_backward, dropout_forward
from mhattn.functional.embedding import EmbeddingCache, embedding_backward, embedding_forward
from mhattn.functional.encoder import BLOCK_PARAM_NAMES, encoder_block_backward, encoder_block_forward
from mhattn.functional.layernorm import LayerNormCache, layernorm_backward, layernorm_forward
from mhattn.functional.linear import linear_backward, linear_forward
from mhattn.functional.masks import causal_mask
from mhattn.functional.mha import MHA_STEPS
from mhattn.functional.positional import PositionalCache, positional_encoding_backward, positional_encoding_forward


class TransformerCache(NamedTuple):
    embed: EmbeddingCache  # step 1
    pos: PositionalCache  # step 2
    drop: DropoutCache  # step 3
    blocks: tuple  # step 4, one EncoderBlockCache per layer
    ln_f: LayerNormCache  # step 5
    heads: tuple  # step 6, one LinearCache per classifier


def block_params(params, layer):
    """The flat parameters of block ``layer`` with the ``blocks.{layer}.`` prefix removed."""
    return {n: params[f"blocks.{layer}.{n}"] for n in BLOCK_PARAM_NAMES}


def transformer_forward(
    ids,
    params,
    num_heads,
    num_layers,
    num_outputs,
    *,
    causal=False,
    head_mask=None,
    dropout_p=0.0,
    rng=None,
    attention=MHA_STEPS,
):
    """Run the model.

    Args:
        ids: ``(B, T)`` integer tokens (B = 0, an empty batch, gives empty logits and weights), on the
            parameters' device.
        params: the flat mapping described in the module docstring.
        num_heads, num_layers, num_outputs: h, L and the number of classifiers K.
        causal: mask future keys (language modelling).
        head_mask: ``(L, h)`` or ``(L, B, h)`` multipliers ξ, or ``None``.
        dropout_p, rng: dropout after the embedding and on each sub-layer output.
        attention: each block's multi-head attention pair (see :func:`~mhattn.functional.encoder.encoder_block_forward`).

    Returns:
        ``(logits, weights, cache)``: ``logits`` a tuple of K arrays ``(B, T, C_k)``;
        ``weights`` a tuple of L arrays ``(B, h, T, T)``, read-only (views of the cached weights on
        NumPy, copies elsewhere); the logits are fresh arrays, all of ``ids``' namespace and device.

    Raises:
        ValueError: ``head_mask`` has the wrong leading size.
    """
    if head_mask is not None and head_mask.shape[0] != num_layers:
        raise ValueError(f"head_mask must have one row per layer (L={num_layers}), got shape {head_mask.shape}")
    T = ids.shape[1]
    # 1-3. embed, add positions, dropout
    e, emb = embedding_forward(ids, params["embed.W"])  # (B, T, d_model)
    x, pos = positional_encoding_forward(e)
    x, drop = dropout_forward(x, dropout_p, rng)
    # 4. the blocks
    mask = causal_mask(T, xp=array_namespace(ids), device=device_of(ids)) if causal else None  # (T, T) bool, True = future
    blocks, weights = [], []
    for layer in range(num_layers):
        xi = None if head_mask is None else head_mask[layer, ...]
        x, w, c = encoder_block_forward(
            x,
            block_params(params, layer),
            num_heads,
            attn_mask=mask,
            head_mask=xi,
            dropout_p=dropout_p,
            rng=rng,
            attention=attention,
        )
        blocks.append(c)
        weights.append(w)
    # 5. final LayerNorm (pre-LN leaves the residual stream un-normalised)
    z, ln_f = layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])  # (B, T, d_model)
    # 6. the classifiers
    logits, heads = [], []
    for k in range(num_outputs):
        out, c = linear_forward(z, params[f"out.{k}.W"], params[f"out.{k}.b"])  # (B, T, C_k)
        logits.append(out)
        heads.append(c)
    return tuple(logits), tuple(weights), TransformerCache(emb, pos, drop, tuple(blocks), ln_f, tuple(heads))


def transformer_backward(dlogits, cache: TransformerCache, attention=MHA_STEPS):
    """Gradients of :func:`transformer_forward` (``attention``: the pair the forward ran).

    Args:
        dlogits: a sequence of K arrays ``(B, T, C_k)`` (``None`` for a classifier without loss).

    Returns:
        ``(grads, dhead_mask)``: ``grads`` maps every parameter name to its gradient;
        ``dhead_mask`` is a list of L per-layer gradients (``None`` without a head mask).
    """
    grads = {}
    # step 6 was: logits_k = z W_k + b_k -> the classifiers' gradients add up in dz
    dz = None
    for k, (d, c) in enumerate(zip(dlogits, cache.heads, strict=True)):
        if d is None:  # a classifier without loss: zero gradient
            shape = (*c.x.shape[:-1], c.W.shape[1])  # (B, T, C_k)
            d = array_namespace(c.x).zeros(shape, dtype=c.x.dtype, device=device_of(c.x))
        dzk, grads[f"out.{k}.W"], grads[f"out.{k}.b"] = linear_backward(d, c)
        dz = dzk if dz is None else dz + dzk
    # step 5 was: final LayerNorm
    dx, grads["ln_f.gamma"], grads["ln_f.beta"] = layernorm_backward(dz, cache.ln_f)
    # step 4 was: the blocks, last to first
    dhead_mask = [None] * len(cache.blocks)
    for layer in reversed(range(len(cache.blocks))):
        dx, g, dhead_mask[layer] = encoder_block_backward(dx, cache.blocks[layer], attention)
        grads.update({f"blocks.{layer}.{n}": v for n, v in g.items()})
    # steps 3-1 were: dropout, + PE, embedding lookup
    dx = dropout_backward(dx, cache.drop)
    dx = positional_encoding_backward(dx, cache.pos)
    grads["embed.W"] = embedding_backward(dx, cache.embed)
    return grads, dhead_mask
