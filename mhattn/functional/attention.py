"""Step 3 (numbered as in :mod:`~mhattn.functional.mha`): scaled dot-product attention, each head on its own.

Vaswani et al. 2017, §3.2.1, eq. (1):
``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``, with an optional mask
(torch's convention) and dropout on the weights (§5.4).

Masks, for T = 3 queries and S = 4 keys (``x`` = True = not allowed)::

    bool attn_mask        float attn_mask         key_padding_mask (B, S)
        k0 k1 k2 k3           k0   k1   k2   k3
    q0  .  x  x  x        q0  0  -inf -inf -inf    . . . x   <- key 3 is padding
    q1  .  .  x  x        q1  0    0  -inf -inf
    q2  .  .  .  x        q2  0    0    0  -inf

A bool mask replaces the masked scores (their weights are exactly 0); a float
mask is added to the scores (``-inf`` entries then also give 0). A key hidden from
every query is zeroed before use, so whatever it holds (NaN, inf) cannot reach an
output or a gradient; a key hidden from some queries only gets weight 0 from them,
which removes any finite value it holds (0 * NaN is still NaN in ``weights @ v``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from mhattn.backend import array_namespace, broadcasts_to, read_only, uniform
from mhattn.functional.masks import add_mask, cast_mask, check_mask_kind, dead_keys
from mhattn.functional.softmax import SoftmaxCache, softmax_backward, softmax_forward
from mhattn.functional.validate import check_attention_inputs, check_dropout


class AttentionCache(NamedTuple):
    q: object  # (B, h, T, d_k)
    k: object  # (B, h, S, d_k)
    v: object  # (B, h, S, d_v)
    scale: float  # 1 / sqrt(d_k)
    softmax: SoftmaxCache  # holds the weights before dropout, (B, h, T, S)
    keep: object  # (B, h, T, S) dropout multipliers (0 or 1/(1-p)), or None
    dropped: object  # (B, h, T, S) the weights after dropout (the same array without dropout)


def check_attention_call(q, k, v, mask, dropout_p, rng):
    """The checks of :func:`scaled_dot_product_attention_forward` (see its Raises), for it and the engine's twin."""
    check_attention_inputs(q, k, v)
    if mask is not None:
        check_mask_kind("mask", mask)
        array_namespace(q, mask)
        scores_shape = (*q.shape[:-1], k.shape[-2])
        if not broadcasts_to(mask.shape, scores_shape):
            raise ValueError(f"attention: mask of shape {mask.shape} does not broadcast to the scores {scores_shape}")
    check_dropout(dropout_p, rng)


def scaled_dot_product_attention_forward(q, k, v, mask=None, dropout_p: float = 0.0, rng=None):
    """Attention of every query over every key, per batch element and head.

    Args:
        q: ``(B, h, T, d_k)`` float queries (float32/float64; float16 works too: the queries are scaled before
            the product, so scores that fit after scaling never overflow), any array-API array (NumPy, CuPy, torch,
            array-api-strict).
        k: ``(B, h, S, d_k)`` keys, same dtype, namespace and device.
        v: ``(B, h, S, d_v)`` values, same dtype, namespace and device.
        mask: bool (True = not allowed) or float (added to the scores), broadcastable
            to ``(B, h, T, S)``; ``None`` for no mask. A constant: the backward returns no gradient for it.
            A key hidden from every query
            (True, or ``-inf``, in its whole column) has no influence on any output or
            gradient, whatever ``k`` and ``v`` hold there (NaN and inf included).
        dropout_p: probability of dropping a weight (0 disables dropout).
        rng: ``numpy.random.Generator`` for the dropout mask (drawn on the host, moved explicitly to
            ``q``'s device: the same seed drops the same weights on every library).

    Returns:
        ``(out, weights, cache)``, of ``q``'s namespace and device: ``out`` ``(B, h, T, d_v)``; ``weights``
        ``(B, h, T, S)`` *before* dropout (each row sums to 1, or 0 if fully masked),
        read-only (a view of the cached weights on NumPy, a copy elsewhere).

    Raises:
        TypeError: ``q``, ``k``, ``v`` are not float arrays of one dtype; ``mask`` is neither bool nor float;
            arrays of two libraries.
        ValueError: shapes disagree, the mask does not broadcast to ``(B, h, T, S)`` or holds
            NaN or +inf, ``dropout_p`` is outside [0, 1), dropout is asked for without ``rng``,
            or arrays on two devices.
    """
    check_attention_call(q, k, v, mask, dropout_p, rng)
    xp = array_namespace(q)
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32 as float32
    if mask is not None:
        # 0. keys hidden from every query are zeroed: their weight is exactly 0, and 0 * NaN would still be NaN
        dead = dead_keys(mask)[..., None]  # (..., S, 1)
        k, v = xp.where(dead, 0.0, k), xp.where(dead, 0.0, v)  # (B, h, S, d_k), (B, h, S, d_v)
    # 1. scale the queries by 1/sqrt(d_k) before the product (float16 scores could overflow before a later scaling)
    qs = q * scale  # (B, h, T, d_k)
    # 2. similarity of every query with every key
    scores = xp.matmul(qs, k.mT)  # (B, h, T, d_k) @ (B, h, d_k, S) -> (B, h, T, S)
    # 3. a float mask is added; a bool mask is applied inside the softmax
    bool_mask = None
    if mask is not None and mask.dtype == xp.bool:
        bool_mask = mask
    elif mask is not None:
        scores = add_mask(scores, cast_mask(mask, scores.dtype))  # without overflow
    _, sm_cache = softmax_forward(scores, bool_mask)
    weights = sm_cache.probs  # (B, h, T, S), the cached array (the caller gets a read-only view or a copy)
    # 4. dropout on the weights, rescaled by 1/(1-p) so the expectation is kept
    keep, dropped = None, weights
    if dropout_p > 0.0:
        u = uniform(xp, rng, weights.shape, weights)  # (B, h, T, S) float64, seeded host draw moved to the device
        keep = xp.astype(u >= dropout_p, weights.dtype) * (1.0 / (1.0 - dropout_p))  # 0 or 1/(1-p)
        dropped = weights * keep
    # 5. weighted sum of the values
    out = xp.matmul(dropped, v)  # (B, h, T, S) @ (B, h, S, d_v) -> (B, h, T, d_v)
    return out, read_only(weights), AttentionCache(q, k, v, scale, sm_cache, keep, dropped)


def scaled_dot_product_attention_backward(dout, cache: AttentionCache):
    """Gradients of :func:`scaled_dot_product_attention_forward`.

    Args:
        dout: ``(B, h, T, d_v)`` upstream gradient, of the forward's namespace and device.

    Returns:
        ``(dq, dk, dv)`` with the shapes of ``q``, ``k``, ``v``, on their namespace and device.
    """
    q, k, v, scale, sm_cache, keep, dropped = cache
    xp = array_namespace(dout, q)
    # step 5 was: out = dropped @ v
    ddropped = xp.matmul(dout, v.mT)  # (B, h, T, d_v) @ (B, h, d_v, S) -> (B, h, T, S)
    dv = xp.matmul(dropped.mT, dout)  # (B, h, S, T) @ (B, h, T, d_v) -> (B, h, S, d_v)
    # step 4 was: dropout -> the same kept entries, the same rescaling
    dweights = ddropped * keep if keep is not None else ddropped
    # step 3 was: mask + softmax -> masked entries get zero gradient
    dscores = softmax_backward(dweights, sm_cache)  # (B, h, T, S)
    # step 2 was: (q * scale) @ k^T
    dqs = xp.matmul(dscores, k)  # (B, h, T, S) @ (B, h, S, d_k) -> (B, h, T, d_k)
    dk = xp.matmul(dscores.mT, q) * scale  # (B, h, S, T) @ (B, h, T, d_k) -> (B, h, S, d_k)
    # step 1 was: q * scale
    dq = dqs * scale  # (B, h, T, d_k)
    # step 0 was: zero the keys hidden from every query -> their weights are 0, so dk and dv are 0 there already
    return dq, dk, dv
