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
import numbers
from typing import NamedTuple

from mhattn.backend import array_namespace, broadcast_shape, broadcasts_to, device_of, read_only, uniform
from mhattn.functional.masks import add_mask, cast_mask, causal_mask, check_mask_kind, dead_keys
from mhattn.functional.softmax import SoftmaxCache, softmax_backward, softmax_forward
from mhattn.functional.validate import check_attention_inputs, check_dropout, check_nested


class AttentionCache(NamedTuple):
    q: object  # (B, h, T, d_k)
    k: object  # (B, h, S, d_k)
    v: object  # (B, h, S, d_v)
    scale: float  # 1 / sqrt(d_k)
    softmax: SoftmaxCache  # holds the weights before dropout, (B, h, T, S)
    keep: object  # (B, h, T, S) dropout multipliers (0 or 1/(1-p)), or None
    dropped: object  # (B, h, T, S) the weights after dropout (the same array without dropout)
    shapes: tuple | None = None  # the caller's q, k, v shapes: each gradient is summed back to its own (broadcasting)


def sum_to_shape(grad, shape):
    """``grad`` summed over the dimensions that broadcasting added or stretched, so it has ``shape``.

    A q of shape ``(T, d_k)`` against k of shape ``(B, h, S, d_k)`` was used once per (b, h): its gradient is the
    sum of the ``(B, h, T, d_k)`` per-use gradients over those two axes (as torch's autograd reduces a broadcast).
    """
    if tuple(grad.shape) == tuple(shape):
        return grad
    xp = array_namespace(grad)
    lead = grad.ndim - len(shape)
    if lead:
        grad = xp.sum(grad, axis=tuple(range(lead)))  # the dimensions broadcasting put in front
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return xp.sum(grad, axis=stretched, keepdims=True) if stretched else grad  # size-1 dimensions it stretched


def check_attention_call(q, k, v, mask, dropout_p, rng, scale=None, is_causal=False, causal="upper_left"):
    """The checks of :func:`scaled_dot_product_attention_forward` (see its Raises), for it and the engine's twin."""
    check_attention_inputs(q, k, v)
    check_nested(mask)
    try:
        lead = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])  # q, k, v's leading dimensions, broadcast
    except ValueError:
        raise ValueError(
            f"attention: the leading dimensions of q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
            "do not broadcast together"
        ) from None
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not scale > 0):
        raise ValueError(f"attention: scale must be None or a positive real number, got {scale!r}")
    if causal not in ("upper_left", "lower_right"):
        raise ValueError(f"attention: causal must be 'upper_left' or 'lower_right', got {causal!r}")
    if is_causal and mask is not None:
        raise ValueError("attention: give attn_mask or is_causal=True, not both (as torch's scaled_dot_product_attention)")
    if mask is not None:
        check_mask_kind("mask", mask)
        array_namespace(q, mask)
        scores_shape = (*lead, q.shape[-2], k.shape[-2])
        if mask.ndim < 2:  # as torch's scaled_dot_product_attention: a (S,) mask would broadcast over the queries
            raise ValueError(f"attention: mask must be at least 2-D (..., T, S), got shape {tuple(mask.shape)}")
        if not broadcasts_to(mask.shape, scores_shape):
            raise ValueError(f"attention: mask of shape {mask.shape} does not broadcast to the scores {scores_shape}")
    check_dropout(dropout_p, rng)


def scaled_dot_product_attention_forward(
    q, k, v, mask=None, dropout_p: float = 0.0, rng=None, *, scale=None, is_causal=False, causal="upper_left"
):
    """Attention of every query over every key, per batch element and head.

    Args:
        q: ``(B, h, T, d_k)`` float queries; any leading dimensions that broadcast against ``k``'s and ``v``'s
            (torch's ``scaled_dot_product_attention``: ``(T, d_k)`` queries against ``(B, h, S, d_k)`` keys, say)
            (float32/float64; float16 works too: the queries are scaled before
            the product, so scores that fit after scaling never overflow), any array-API array (NumPy, CuPy, torch,
            array-api-strict).
        k: ``(B, h, S, d_k)`` keys, same dtype, namespace and device.
        v: ``(B, h, S, d_v)`` values, same dtype, namespace and device.
        mask: bool (True = not allowed) or float (added to the scores), at least 2-D, broadcastable
            to ``(B, h, T, S)``; ``None`` for no mask. A constant: the backward returns no gradient for it.
            A key hidden from every query
            (True, or ``-inf``, in its whole column) has no influence on any output or
            gradient, whatever ``k`` and ``v`` hold there (NaN and inf included).
        dropout_p: probability of dropping a weight (0 disables dropout).
        rng: ``numpy.random.Generator`` for the dropout mask (drawn on the host, moved explicitly to
            ``q``'s device: the same seed drops the same weights on every library).
        scale: the factor on the scores, ``1/sqrt(d_k)`` when ``None`` (torch's ``scale=``); a positive float.
            A constant here as in torch; its gradient, where a caller treats it as an input, is
            :func:`attention_scale_gradient`.
        is_causal: mask key s > query t + offset (torch's ``is_causal``: no ``mask`` may be given with it).
        causal: where the causal diagonal sits when T != S: ``"upper_left"`` (torch's ``is_causal``, offset 0)
            or ``"lower_right"`` (torch's ``causal_lower_right``, offset S - T: the last query sees every key).

    Returns:
        ``(out, weights, cache)``, of ``q``'s namespace and device: ``out`` ``(B, h, T, d_v)``; ``weights``
        ``(B, h, T, S)`` *before* dropout (each row sums to 1, or 0 if fully masked),
        read-only (a view of the cached weights on NumPy, a copy elsewhere).

    Raises:
        TypeError: ``q``, ``k``, ``v`` are not float arrays of one dtype; ``mask`` is neither bool nor float;
            arrays of two libraries; a nested (jagged) tensor.
        ValueError: shapes disagree, the mask is 1-D or does not broadcast to ``(B, h, T, S)`` or holds
            NaN or +inf, ``dropout_p`` is outside [0, 1), dropout is asked for without ``rng``,
            arrays on two devices, a ``scale`` that is not a positive number, ``is_causal`` with a ``mask``,
            or an unknown ``causal``.
    """
    check_attention_call(q, k, v, mask, dropout_p, rng, scale, is_causal, causal)
    xp = array_namespace(q)
    shapes = (tuple(q.shape), tuple(k.shape), tuple(v.shape))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)  # a Python float keeps float32 float32
    if is_causal:
        mask = causal_mask(q.shape[-2], k.shape[-2], xp, device=device_of(q), lower_right=causal == "lower_right")
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
    return out, read_only(weights), AttentionCache(q, k, v, scale, sm_cache, keep, dropped, shapes)


def scaled_dot_product_attention_backward(dout, cache: AttentionCache):
    """Gradients of :func:`scaled_dot_product_attention_forward`.

    Args:
        dout: ``(B, h, T, d_v)`` upstream gradient, of the forward's namespace and device.

    Returns:
        ``(dq, dk, dv)`` with the shapes of ``q``, ``k``, ``v``, on their namespace and device: where the forward
        broadcast an input (leading dimensions added, or size-1 dimensions stretched), its gradient is summed over
        those dimensions back to the input's shape.
    """
    q, k, v, scale, sm_cache, keep, dropped, shapes = cache
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
    if shapes is None:
        return dq, dk, dv
    # each input was broadcast against the others: sum every gradient back to its input's shape
    return tuple(sum_to_shape(g, shape) for g, shape in zip((dq, dk, dv), shapes, strict=True))


def attention_scale_gradient(dq, q, scale):
    """``∂L/∂scale`` for a caller that treats the scale as an input: step 1 was ``qs = q * scale``, so
    ``∂L/∂scale = sum(∂L/∂qs * q) = sum(dq * q) / scale`` (``dq = ∂L/∂qs * scale`` is what the backward returns).

    Args:
        dq: the backward's ``dq``, ``q``'s shape; q: the forward's queries; scale: the forward's scale (a float).

    Returns:
        A 0-D array of ``q``'s dtype, namespace and device.
    """
    xp = array_namespace(dq, q)
    return xp.sum(dq * q) / scale
