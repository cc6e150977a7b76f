"""Layer normalisation, Ba, Kiros & Hinton 2016, eq. (4).

``y = gamma * (x - mean) / sqrt(var + eps) + beta`` over the last axis (d_model),
the biased variance, as torch.nn.LayerNorm.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace


class LayerNormCache(NamedTuple):
    xhat: object  # (..., d_model) normalised input
    inv_std: object  # (..., 1) 1 / sqrt(var + eps)
    gamma: object  # (d_model,)


def layernorm_forward(x, gamma, beta, eps=1e-5):
    """Normalise each position's feature vector, then scale and shift.

    Args:
        x: ``(..., d_model)`` float32/float64 (a leading size 0, an empty batch, is allowed).
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
    return out, LayerNormCache(xhat, inv_std, gamma)


def layernorm_backward(dout, cache: LayerNormCache):
    """Gradients of :func:`layernorm_forward`.

    Returns:
        ``(dx, dgamma, dbeta)``: ``x``'s shape, ``(d_model,)``, ``(d_model,)`` (zeros for an empty batch).
    """
    xhat, inv_std, gamma = cache
    xp = array_namespace(dout, xhat)
    axes = tuple(range(dout.ndim - 1))
    # step 3 was: xhat * gamma + beta
    dgamma = xp.sum(dout * xhat, axis=axes)  # (d_model,)
    dbeta = xp.sum(dout, axis=axes)  # (d_model,)
    dxhat = dout * gamma  # (..., d_model)
    # steps 2 and 1 were: centre and scale; the mean and the variance depend on every entry,
    # which removes the gradient's mean and its component along xhat
    along = xhat * xp.mean(dxhat * xhat, axis=-1, keepdims=True)  # (..., d_model) the component along xhat
    dx = dxhat - xp.mean(dxhat, axis=-1, keepdims=True)  # (..., d_model), fresh: the next two steps work in place
    dx -= along
    dx *= inv_std
    return dx, dgamma, dbeta
