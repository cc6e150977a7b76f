"""``TransformerModel``: a thin stateful wrapper around :mod:`mhattn.functional.transformer`.

It owns the flat parameter dict, the gradients of the last backward and the
last cache; the maths lives in the functional pairs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from mhattn.backend import array_namespace, asarray
from mhattn.functional.encoder import BLOCK_PARAM_NAMES
from mhattn.functional.transformer import transformer_backward, transformer_forward
from mhattn.nn.device import copy_into
from mhattn.nn.init import init_embedding, init_encoder_block, init_layernorm, init_linear


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


def _host_params(cfg: ModelConfig, rng: np.random.Generator, dtype):
    """The flat parameters as host arrays, composed from the per-layer initialisers of :mod:`mhattn.nn.init`."""
    p = {f"embed.{n}": v for n, v in init_embedding(cfg.vocab_size, cfg.d_model, rng, dtype).items()}
    for layer in range(cfg.num_layers):
        block = init_encoder_block(cfg.d_model, cfg.d_ff, rng, dtype)
        p.update({f"blocks.{layer}.{n}": block[n] for n in BLOCK_PARAM_NAMES})
    p.update({f"ln_f.{n}": v for n, v in init_layernorm(cfg.d_model, dtype).items()})
    for k, c in enumerate(cfg.output_sizes):
        p.update({f"out.{k}.{n}": v for n, v in init_linear(cfg.d_model, c, rng, dtype).items()})
    return p


def init_params(cfg: ModelConfig, rng: np.random.Generator, dtype="float32"):
    """Fresh flat parameters (see :mod:`mhattn.functional.transformer` for the names), on the current backend."""
    return {n: asarray(v) for n, v in _host_params(cfg, rng, dtype).items()}


def param_shapes(cfg: ModelConfig):
    """Expected ``{name: shape}`` for ``cfg`` (used to validate checkpoints), read off the initialisers."""
    return {n: v.shape for n, v in _host_params(cfg, np.random.default_rng(0), "float32").items()}


class TransformerModel:
    """Pre-LN Transformer encoder with per-position classifiers.

    Args:
        cfg: a :class:`ModelConfig`.
        seed: seeds the initialisation and the dropout generator.
        dtype: "float32" or "float64".
        params: use these arrays (held, not copied) instead of a fresh initialisation.

    Fresh parameters are made on the current backend and device (:func:`mhattn.set_backend`); the
    model then runs on arrays of that library and device (:meth:`place` moves host data there).

    Attributes:
        params, grads: flat dicts name -> array; ``head_mask_grad`` ``(L, h)`` or ``(L, B, h)``
        after a backward with a head mask (ξ is an input: its gradient is not in ``grads``).
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
        self.head_mask_grad = None if dmask[0] is None else array_namespace(*dmask).stack(dmask)  # (L, ...)
        return self.grads

    def num_parameters(self):
        return sum(math.prod(p.shape) for p in self.params.values())

    def place(self, x, dtype=None):
        """``x`` (host data such as ids, targets or a head mask) on the parameters' namespace and device.

        Args:
            x: a NumPy array, list or any backend's array. dtype: ``"params"`` casts to the parameters'
                float dtype (head masks); None keeps ``x``'s (integer ids stay integers).
        """
        p = self.params["embed.W"]
        return asarray(x, dtype=p.dtype if dtype == "params" else dtype, like=p)

    def load_params(self, params):
        """Copy ``params`` (name -> array of any backend, e.g. a checkpoint's) *into* this model's arrays.

        As torch's ``load_state_dict``: the parameter arrays stay the same objects (an optimiser built
        before keeps updating them); values are cast to each parameter's dtype and moved to its device.
        Every name must be there and fit, or nothing changes.

        Raises:
            KeyError: a name missing from ``params`` or unknown to the model.
            ValueError: a shape differs. TypeError: a value is not floating point.
        """
        missing = sorted(set(self.params) - set(params))
        if missing:
            raise KeyError(f"parameters missing: {missing[:4]}; nothing was loaded")
        copy_into(self.params, params)
