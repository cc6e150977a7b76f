"""Parameter initialisation: one initialiser per layer, each giving host NumPy arrays.

Every layer's parameters come from one function here; the model composes them
(:func:`mhattn.nn.transformer.init_params`) and the expected shapes are read off
the same functions (:func:`mhattn.nn.transformer.param_shapes`), so nothing is kept twice.
Draws happen on the host from a seeded ``numpy.random.Generator`` (callers move the
arrays to the current backend), so one seed gives bit-identical weights on both backends.

* Multi-head attention mirrors ``torch.nn.MultiheadAttention``: Xavier uniform
  (Glorot & Bengio 2010), ``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``, on the packed
  ``in_proj_weight`` ``(3 d_model, d_model)`` when ``kdim == vdim == d_model`` (so
  ``a = sqrt(6 / (4 d_model))``), on each of ``q/k/v_proj_weight`` otherwise; ``W_o``
  keeps ``nn.Linear``'s ``U(±1/sqrt(d_model))``; biases 0; ``bias_k``/``bias_v`` (``add_bias_kv``) ``N(0, 1/d_model)``.
* Linear maps (feed-forward, classifiers): ``nn.Linear``'s ``U(±1/sqrt(fan_in))``, biases 0.
* Token embedding: ``N(0, 1)``, as ``nn.Embedding``. LayerNorm: ``gamma = 1``, ``beta = 0``.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.functional.mha import PARAM_NAMES


def _xavier(rng, fan_out, fan_in, dtype):
    """Xavier-uniform ``(fan_out, fan_in)`` in torch's layout, returned transposed ``(fan_in, fan_out)``."""
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_out, fan_in)).astype(dtype).T


def _uniform(rng, shape, fan_in, dtype):
    a = 1.0 / math.sqrt(fan_in)
    return rng.uniform(-a, a, size=shape).astype(dtype)


def init_mha_params(d_model, kdim, vdim, bias, dtype, rng: np.random.Generator):
    """``{W_q, W_k, W_v, W_o[, b_q, b_k, b_v, b_o]}``, C-contiguous host arrays.

    Shapes: ``W_q (d_model, d_model)``, ``W_k (kdim, d_model)``, ``W_v (vdim, d_model)``,
    ``W_o (d_model, d_model)``, biases ``(d_model,)``; all ``dtype``.
    """
    if kdim == vdim == d_model:
        packed = _xavier(rng, 3 * d_model, d_model, dtype)  # (d_model, 3 d_model)
        W_q, W_k, W_v = (packed[:, i * d_model : (i + 1) * d_model] for i in range(3))
    else:
        W_q, W_k, W_v = (_xavier(rng, d_model, d_in, dtype) for d_in in (d_model, kdim, vdim))
    a = 1.0 / math.sqrt(d_model)
    W_o = rng.uniform(-a, a, size=(d_model, d_model)).astype(dtype).T
    params = {"W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": W_o}
    if bias:
        params.update({name: np.zeros(d_model, dtype) for name in PARAM_NAMES[4:]})
    return {name: np.ascontiguousarray(p) for name, p in params.items()}


def init_kv_bias(d_model, dtype, rng: np.random.Generator):
    """``{bias_k, bias_v}`` ``(d_model,)`` each, as torch's ``add_bias_kv``: ``xavier_normal_`` on a
    ``(1, 1, d_model)`` tensor, whose fans are both ``d_model``, so ``N(0, 1/d_model)``."""
    std = math.sqrt(1.0 / d_model)
    return {name: np.ascontiguousarray(rng.normal(0.0, std, size=d_model).astype(dtype)) for name in ("bias_k", "bias_v")}


def init_linear(d_in, d_out, rng: np.random.Generator, dtype):
    """``{W (d_in, d_out), b (d_out,)}``: ``W ~ U(±1/sqrt(d_in))``, ``b = 0``."""
    return {"W": _uniform(rng, (d_in, d_out), d_in, dtype), "b": np.zeros(d_out, dtype)}


def init_embedding(vocab_size, d_model, rng: np.random.Generator, dtype):
    """``{W (vocab_size, d_model)}`` drawn from ``N(0, 1)``."""
    return {"W": rng.standard_normal((vocab_size, d_model)).astype(dtype)}


def init_layernorm(d_model, dtype):
    """``{gamma (d_model,) = 1, beta (d_model,) = 0}``."""
    return {"gamma": np.ones(d_model, dtype), "beta": np.zeros(d_model, dtype)}


def init_feedforward(d_model, d_ff, rng: np.random.Generator, dtype):
    """``{W1 (d_model, d_ff), b1 (d_ff,), W2 (d_ff, d_model), b2 (d_model,)}``: two :func:`init_linear`."""
    fc1, fc2 = init_linear(d_model, d_ff, rng, dtype), init_linear(d_ff, d_model, rng, dtype)
    return {"W1": fc1["W"], "b1": fc1["b"], "W2": fc2["W"], "b2": fc2["b"]}


def init_encoder_block(d_model, d_ff, rng: np.random.Generator, dtype):
    """One pre-LN encoder block, flat: the names of :data:`mhattn.functional.encoder.BLOCK_PARAM_NAMES`."""
    dtype = np.dtype(dtype)
    parts = {
        "attn": init_mha_params(d_model, d_model, d_model, True, dtype, rng),
        "ln1": init_layernorm(d_model, dtype),
        "ln2": init_layernorm(d_model, dtype),
        "ff": init_feedforward(d_model, d_ff, rng, dtype),
    }
    return {f"{layer}.{name}": p for layer, params in parts.items() for name, p in params.items()}
