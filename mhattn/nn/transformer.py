"""``TransformerModel``: a thin stateful wrapper around :mod:`mhattn.functional.transformer`.

It owns the flat parameter dict, the gradients of the last backward and the
last cache; the maths lives in the functional pairs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from mhattn.backend import asarray, get_array_module
from mhattn.functional.encoder import BLOCK_PARAM_NAMES
from mhattn.functional.transformer import transformer_backward, transformer_forward
from mhattn.nn.init import init_mha_params


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int  # V, number of input token ids
    output_sizes: tuple  # (C_1, ..., C_K): classes of each per-position classifier
    d_model: int = 96  # model width
    num_heads: int = 12  # h per layer; d_k = d_model / h
    num_layers: int = 1  # L encoder blocks
    d_ff: int = 384  # hidden width of the feed-forward network
    causal: bool = False  # mask future positions (language modelling)
    dropout: float = 0.0  # dropout after the embedding and each sub-layer (training only)

    def __post_init__(self):
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        object.__setattr__(self, "output_sizes", tuple(int(c) for c in self.output_sizes))

    def to_dict(self):
        return {**asdict(self), "output_sizes": list(self.output_sizes)}


def _uniform(rng, shape, fan_in, dtype):
    a = 1.0 / math.sqrt(fan_in)
    return rng.uniform(-a, a, size=shape).astype(dtype)


def init_params(cfg: ModelConfig, rng: np.random.Generator, dtype="float32"):
    """Fresh flat parameters (see :mod:`mhattn.functional.transformer` for the names), on the current backend."""
    d, f = cfg.d_model, cfg.d_ff
    p = {"embed.W": rng.standard_normal((cfg.vocab_size, d)).astype(dtype)}
    for layer in range(cfg.num_layers):
        pre = f"blocks.{layer}."
        attn = init_mha_params(d, d, d, True, np.dtype(dtype), rng)
        p.update({f"{pre}attn.{n}": v for n, v in attn.items()})
        p.update({f"{pre}ln1.gamma": np.ones(d, dtype), f"{pre}ln1.beta": np.zeros(d, dtype)})
        p.update({f"{pre}ln2.gamma": np.ones(d, dtype), f"{pre}ln2.beta": np.zeros(d, dtype)})
        p.update({f"{pre}ff.W1": _uniform(rng, (d, f), d, dtype), f"{pre}ff.b1": np.zeros(f, dtype)})
        p.update({f"{pre}ff.W2": _uniform(rng, (f, d), f, dtype), f"{pre}ff.b2": np.zeros(d, dtype)})
    p.update({"ln_f.gamma": np.ones(d, dtype), "ln_f.beta": np.zeros(d, dtype)})
    for k, c in enumerate(cfg.output_sizes):
        p.update({f"out.{k}.W": _uniform(rng, (d, c), d, dtype), f"out.{k}.b": np.zeros(c, dtype)})
    return {n: asarray(v) for n, v in p.items()}


def param_shapes(cfg: ModelConfig):
    """Expected ``{name: shape}`` for ``cfg`` (used to validate checkpoints)."""
    d, f = cfg.d_model, cfg.d_ff
    block = {"ln1.gamma": (d,), "ln1.beta": (d,), "ln2.gamma": (d,), "ln2.beta": (d,), "ff.W1": (d, f), "ff.b1": (f,)}
    block.update({"ff.W2": (f, d), "ff.b2": (d,)})
    block.update({f"attn.{n}": (d, d) for n in ("W_q", "W_k", "W_v", "W_o")})
    block.update({f"attn.{n}": (d,) for n in ("b_q", "b_k", "b_v", "b_o")})
    shapes = {"embed.W": (cfg.vocab_size, d), "ln_f.gamma": (d,), "ln_f.beta": (d,)}
    for layer in range(cfg.num_layers):
        shapes.update({f"blocks.{layer}.{n}": block[n] for n in BLOCK_PARAM_NAMES})
    for k, c in enumerate(cfg.output_sizes):
        shapes.update({f"out.{k}.W": (d, c), f"out.{k}.b": (c,)})
    return shapes


class TransformerModel:
    """Pre-LN Transformer encoder with per-position classifiers.

    Args:
        cfg: a :class:`ModelConfig`.
        seed: seeds the initialisation and the dropout generator.
        dtype: "float32" or "float64".
        params: use these parameters instead of a fresh initialisation.

    Attributes:
        params, grads: flat dicts name -> array; ``head_mask_grad`` ``(L, h)`` or ``(L, B, h)``
        after a backward with a head mask.
    """

    def __init__(self, cfg: ModelConfig, seed=0, dtype="float32", params=None):
        self.cfg = cfg
        init_seed, drop_seed = np.random.SeedSequence(seed).spawn(2)
        self.params = params if params is not None else init_params(cfg, np.random.default_rng(init_seed), dtype)
        self.rng = np.random.default_rng(drop_seed)
        self.grads, self.head_mask_grad, self._cache = {}, None, None

    def forward(self, ids, *, head_mask=None, training=False):
        """Run the model on ``ids`` ``(B, T)`` (integers in ``[0, vocab_size)``).

        Args:
            head_mask: ``(L, h)`` or ``(L, B, h)`` multipliers ξ on each head's output (Michel et al. 2019), or None.
            training: apply ``cfg.dropout``.

        Returns:
            ``(logits, weights)``: a tuple of K arrays ``(B, T, C_k)`` and a tuple of L arrays ``(B, h, T, T)``.
        """
        c = self.cfg
        logits, weights, self._cache = transformer_forward(
            ids, self.params, c.num_heads, c.num_layers, len(c.output_sizes), causal=c.causal, head_mask=head_mask,
            dropout_p=c.dropout if training else 0.0, rng=self.rng,
        )  # fmt: skip
        return logits, weights

    __call__ = forward

    def backward(self, dlogits):
        """Fill :attr:`grads` (and :attr:`head_mask_grad`) from the classifiers' gradients."""
        if self._cache is None:
            raise RuntimeError("backward() called before forward(): there is nothing to differentiate")
        self.grads, dmask = transformer_backward(dlogits, self._cache)
        self.head_mask_grad = None if dmask[0] is None else get_array_module(*dmask).stack(dmask)  # (L, ...)
        return self.grads

    def num_parameters(self):
        return int(sum(p.size for p in self.params.values()))
