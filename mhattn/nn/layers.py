"""Thin stateful wrappers for the Transformer's layers: each holds ``params``, ``grads`` and the last cache.

The maths lives in :mod:`mhattn.functional`; these classes only remember what backward needs.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import asarray
from mhattn.functional.embedding import embedding_backward, embedding_forward
from mhattn.functional.encoder import BLOCK_PARAM_NAMES, encoder_block_backward, encoder_block_forward
from mhattn.functional.feedforward import feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward


class _Layer:
    def __init__(self):
        self.params, self.grads, self._cache = {}, {}, None

    def _need_cache(self):
        if self._cache is None:
            raise RuntimeError("backward() called before forward(): there is nothing to differentiate")
        return self._cache


class Embedding(_Layer):
    """Token embedding ``W (V, d_model)``, initialised N(0, 1). ``forward(ids (B, T)) -> (B, T, d_model)``."""

    def __init__(self, vocab_size, d_model, dtype="float32", seed=None):
        super().__init__()
        self.params["W"] = asarray(np.random.default_rng(seed).standard_normal((vocab_size, d_model)).astype(dtype))

    def forward(self, ids):
        out, self._cache = embedding_forward(ids, self.params["W"])
        return out

    def backward(self, dout):
        """Fills ``grads["W"]`` (scatter-add over repeated ids); token ids have no gradient."""
        self.grads = {"W": embedding_backward(dout, self._need_cache())}


class LayerNorm(_Layer):
    """LayerNorm over the last axis with ``gamma = 1``, ``beta = 0`` at start. Returns ``dx`` from backward."""

    def __init__(self, d_model, eps=1e-5, dtype="float32"):
        super().__init__()
        self.eps = eps
        self.params = {"gamma": asarray(np.ones(d_model, dtype)), "beta": asarray(np.zeros(d_model, dtype))}

    def forward(self, x):
        out, self._cache = layernorm_forward(x, self.params["gamma"], self.params["beta"], self.eps)
        return out

    def backward(self, dout):
        dx, self.grads["gamma"], self.grads["beta"] = layernorm_backward(dout, self._need_cache())
        return dx


class FeedForward(_Layer):
    """Position-wise FFN ``max(0, x W1 + b1) W2 + b2``; weights ``U(±1/sqrt(fan_in))``, biases 0."""

    def __init__(self, d_model, d_ff, dtype="float32", seed=None):
        super().__init__()
        rng = np.random.default_rng(seed)
        a1, a2 = 1.0 / math.sqrt(d_model), 1.0 / math.sqrt(d_ff)
        p = {"W1": rng.uniform(-a1, a1, (d_model, d_ff)), "b1": np.zeros(d_ff), "W2": rng.uniform(-a2, a2, (d_ff, d_model))}
        p["b2"] = np.zeros(d_model)
        self.params = {n: asarray(v.astype(dtype)) for n, v in p.items()}

    def forward(self, x):
        out, self._cache = feedforward_forward(x, *(self.params[n] for n in ("W1", "b1", "W2", "b2")))
        return out

    def backward(self, dout):
        dx, *g = feedforward_backward(dout, self._need_cache())
        self.grads = dict(zip(("W1", "b1", "W2", "b2"), g, strict=True))
        return dx


class EncoderBlock(_Layer):
    """Pre-LN encoder block (see :mod:`mhattn.functional.encoder`), parameters named as ``BLOCK_PARAM_NAMES``.

    ``forward(x (B, T, d_model), attn_mask=None, head_mask=None, training=False) -> (out, weights (B, h, T, T))``;
    ``backward(dout) -> dx`` fills ``grads`` and, with a head mask, ``grads["head_mask"]``.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, dtype="float32", seed=None):
        super().__init__()
        from mhattn.nn.transformer import ModelConfig, init_params

        cfg = ModelConfig(vocab_size=1, output_sizes=(1,), d_model=d_model, num_heads=num_heads, d_ff=d_ff)
        full = init_params(cfg, np.random.default_rng(seed), dtype)
        self.params = {n: full[f"blocks.0.{n}"] for n in BLOCK_PARAM_NAMES}
        self.num_heads, self.dropout = num_heads, dropout
        self.rng = np.random.default_rng(None if seed is None else seed + 1)

    def forward(self, x, attn_mask=None, head_mask=None, training=False):
        p = self.dropout if training else 0.0
        out, weights, self._cache = encoder_block_forward(
            x, self.params, self.num_heads, attn_mask=attn_mask, head_mask=head_mask, dropout_p=p, rng=self.rng
        )
        return out, weights

    def backward(self, dout):
        dx, self.grads, dhead_mask = encoder_block_backward(dout, self._need_cache())
        if dhead_mask is not None:
            self.grads["head_mask"] = dhead_mask
        return dx
