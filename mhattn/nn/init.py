"""Parameter initialisation for MultiHeadAttention, mirroring torch.nn.MultiheadAttention.

Glorot & Bengio 2010 (Xavier uniform): ``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``.
torch applies it to its packed ``in_proj_weight`` ``(3 d_model, d_model)`` when
``kdim == vdim == d_model`` (so ``a = sqrt(6 / (4 d_model))``), and to each of
``q/k/v_proj_weight`` otherwise. ``W_o`` keeps torch's ``nn.Linear`` default,
``U(±1/sqrt(d_model))``. All biases start at 0.

Draws happen on the host from a seeded ``numpy.random.Generator`` and are then
moved to the current backend, so one seed gives bit-identical weights on both.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import asarray


def _xavier(rng, fan_out, fan_in, dtype):
    """Xavier-uniform ``(fan_out, fan_in)`` in torch's layout, returned transposed ``(fan_in, fan_out)``."""
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_out, fan_in)).astype(dtype).T


def init_mha_params(d_model, kdim, vdim, bias, dtype, rng: np.random.Generator):
    """Fresh parameters ``{W_q, W_k, W_v, W_o[, b_q, b_k, b_v, b_o]}`` on the current backend.

    Shapes: ``W_q (d_model, d_model)``, ``W_k (kdim, d_model)``, ``W_v (vdim, d_model)``,
    ``W_o (d_model, d_model)``, biases ``(d_model,)``; all ``dtype``.
    """
    if kdim == vdim == d_model:
        packed = _xavier(rng, 3 * d_model, d_model, dtype)  # (d_model, 3 d_model)
        W_q, W_k, W_v = (np.ascontiguousarray(packed[:, i * d_model : (i + 1) * d_model]) for i in range(3))
    else:
        W_q, W_k, W_v = (_xavier(rng, d_model, d_in, dtype) for d_in in (d_model, kdim, vdim))
    a = 1.0 / math.sqrt(d_model)
    W_o = rng.uniform(-a, a, size=(d_model, d_model)).astype(dtype).T
    params = {"W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": W_o}
    if bias:
        params.update({name: np.zeros(d_model, dtype) for name in ("b_q", "b_k", "b_v", "b_o")})
    return {name: asarray(np.ascontiguousarray(p)) for name, p in params.items()}
