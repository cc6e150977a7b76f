"""Layer normalisation, Ba, Kiros & Hinton 2016, eq. (4).

``y = gamma * (x - mean) / sqrt(var + eps) + beta`` over the last axis (d_model),
the biased variance, as torch.nn.LayerNorm.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from mhattn.backend import array_namespace


class LayerNormCache(NamedTuple):
    xhat: object  # (..., d_model) normalised input
    inv_std: object  # (..., 1) 1 / sqrt(var + eps)
    gamma: object  # (d_model,)


def _row_scale(xp, x):
    """``(..., 1)`` powers of two ``s`` that bring each row of ``x`` below 2 in size, or None when no row needs it.

    A row's squares overflow only when its entries are near ``sqrt(max / (4 d))`` (about 1e18 in float32 at
    d = 96); below that (every trained model's activations) nothing is scaled and no bit changes. Dividing by
    a power of two is exact, so a scaled row gives the same xhat as an unscaled one would with unlimited range.
    """
    limit = (float(xp.finfo(x.dtype).max) / (4 * x.shape[-1])) ** 0.5
    if math.prod(x.shape) == 0 or float(xp.maximum(xp.max(x), -xp.min(x))) <= limit:  # NaN: scaled, NaN out
        return None
    top = math.floor(math.log2(xp.finfo(x.dtype).max))  # the largest power of two: 127 for float32, 1023 for float64
    largest = xp.clip(xp.max(xp.abs(x), axis=-1, keepdims=True), 1.0, None)  # (..., 1)
    return 2.0 ** xp.clip(xp.floor(xp.log2(largest)), None, float(top))  # (..., 1)


def layernorm_forward(x, gamma, beta, eps=1e-5):
    """Normalise each position's feature vector, then scale and shift.

    The variance never overflows for a finite input: rows large enough for their squares to overflow are first
    divided by a power of two near their largest entry (exact; ordinary rows are not touched), and 16-bit
    inputs (float16; torch's bfloat16) are computed in float32 and rounded back, as torch does
    (pytorch/pytorch#66707: float32 rows near 1e20 and float16 rows near 300 gave zeros).

    Args:
        x: ``(..., d_model)`` float16/float32/float64 (a leading size 0, an empty batch, is allowed).
        gamma, beta: ``(d_model,)`` gain and bias, ``x``'s dtype.
        eps: added to the variance.

    Returns:
        ``(out, cache)``; ``out`` has ``x``'s shape and dtype, a fresh array (not in the cache).

    Raises:
        ValueError: ``gamma`` or ``beta`` is not ``(d_model,)``; arrays on two devices.
        TypeError: arrays of two libraries.
    """
    xp = array_namespace(x, gamma, beta)
    d = x.shape[-1]
    if gamma.shape != (d,) or beta.shape != (d,):
        raise ValueError(f"layernorm: gamma and beta must be ({d},), got {gamma.shape} and {beta.shape}")
    if xp.finfo(x.dtype).bits < 32:  # 16 bits: sums and squares in float32, the output rounded back
        out, cache = layernorm_forward(*(xp.astype(a, xp.float32) for a in (x, gamma, beta)), eps)
        return xp.astype(out, x.dtype), cache
    # 0. rows whose squares could overflow: x / s, s a power of two (var(x) + eps = s^2 (var(x / s) + eps / s^2))
    s = _row_scale(xp, x)  # (..., 1), or None: no row is that large
    if s is not None:
        x, eps = x * (1.0 / s), eps / s / s  # (..., d_model), (..., 1)
    # 1. centre
    mu = xp.mean(x, axis=-1, keepdims=True)  # (..., 1)
    xc = x - mu  # (..., d_model)
    # 2. scale to unit variance
    inv_std = 1.0 / ((xp.mean(xc * xc, axis=-1, keepdims=True) + eps) ** 0.5)  # (..., 1)
    xc *= inv_std  # in place on the fresh centred array: xc now holds xhat
    xhat = xc  # (..., d_model)
    # 3. gain and bias
    out = xhat * gamma  # (..., d_model)
    out += beta
    return out, LayerNormCache(xhat, inv_std if s is None else inv_std / s, gamma)  # 1 / sqrt(var(x) + eps)


def layernorm_backward(dout, cache: LayerNormCache):
    """Gradients of :func:`layernorm_forward`.

    Returns:
        ``(dx, dgamma, dbeta)``: ``x``'s shape, ``(d_model,)``, ``(d_model,)`` (zeros for an empty batch),
        of ``dout``'s dtype (a 16-bit ``dout`` is computed in float32, as the forward was).
    """
    xhat, inv_std, gamma = cache
    xp = array_namespace(dout, xhat)
    if dout.dtype != xhat.dtype:  # a 16-bit forward kept float32: compute there, round back
        return tuple(xp.astype(g, dout.dtype) for g in layernorm_backward(xp.astype(dout, xhat.dtype), cache))
    axes = tuple(range(dout.ndim - 1))
    # step 3 was: xhat * gamma + beta
    dgamma = xp.sum(dout * xhat, axis=axes)  # (d_model,)
    dbeta = xp.sum(dout, axis=axes)  # (d_model,)
    dxhat = dout * gamma  # (..., d_model)
    # steps 2, 1 and 0 were: scale, centre and the exact power-of-two scaling; the mean and the variance depend
    # on every entry, which removes the gradient's mean and its component along xhat
    along = xhat * xp.mean(dxhat * xhat, axis=-1, keepdims=True)  # (..., d_model) the component along xhat
    dx = dxhat - xp.mean(dxhat, axis=-1, keepdims=True)  # (..., d_model), fresh: the next two steps work in place
    dx -= along
    dx *= inv_std
    return dx, dgamma, dbeta
