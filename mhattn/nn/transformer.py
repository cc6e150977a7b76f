"""``TransformerModel``: a thin stateful wrapper around :mod:`mhattn.functional.transformer`.

It owns the flat parameter dict, the gradients of the last backward and the
last cache; the maths lives in the functional pairs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from mhattn.backend import array_namespace, asarray, plain
from mhattn.backend.argtypes import as_integer, as_real
from mhattn.functional.encoder import BLOCK_PARAM_NAMES
from mhattn.functional.transformer import transformer_backward, transformer_forward
from mhattn.nn.attention import attention_steps
from mhattn.nn.device import copy_into, host_dtype
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
        """Check every field and store it as a Python number (NumPy integers and floats are taken, so the config
        compares, prints and serialises as plain JSON); a bool is no size.

        Raises:
            TypeError: a size that is not an integer (or is a bool), a ``dropout`` that is not a number,
                a ``causal`` that is not a bool, ``output_sizes`` that is not a sequence.
            ValueError: a size below 1, ``dropout`` outside [0, 1), ``d_model`` not divisible by ``num_heads``.
        """
        sizes = self.output_sizes
        if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) == 0:
            raise TypeError(f"output_sizes must be a non-empty sequence of class counts, got {sizes!r}")
        fields = {n: as_integer(n, getattr(self, n), 1) for n in ("vocab_size", "d_model", "num_heads", "num_layers", "d_ff")}
        fields["output_sizes"] = tuple(as_integer(f"output_sizes[{k}]", c, 1) for k, c in enumerate(sizes))
        fields["dropout"] = as_real("dropout", self.dropout, 0.0, 1.0, high_open=True)
        if not isinstance(self.causal, (bool, np.bool_)):
            raise TypeError(f"causal must be True or False, got {self.causal!r}")
        fields["causal"] = bool(self.causal)
        for name, value in fields.items():
            object.__setattr__(self, name, value)
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")

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


def check_model_dtype(dtype, what):
    """``dtype`` as a NumPy dtype, float32 or float64: a float16 model is refused, not run at a loss of accuracy.

    Raises:
        ValueError: another dtype (float16 overflows past 65504 and keeps 11 bits, too few for the
            sums of a forward; load a float16 or bfloat16 checkpoint into a float32 model instead).
    """
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(
            f"{what} is {dt}; a model is float32 or float64 (load 16-bit weights into a float32 model: they are cast)"
        )
    return dt


class TransformerModel:
    """Pre-LN Transformer encoder with per-position classifiers.

    Args:
        cfg: a :class:`ModelConfig`.
        seed: seeds the initialisation and the dropout generator.
        dtype: "float32" or "float64".
        params: use these arrays (held, not copied) instead of a fresh initialisation.
        engine: on NumPy float parameters run each block's attention on the speed engine (:mod:`mhattn.kernels`, the
            same numbers to rounding); ``False``: the reference steps of :mod:`mhattn.functional` (attribute, any time).

    Raises:
        ValueError: a ``dtype`` (or a parameter's) other than float32 or float64: float16 models are refused,
            and 16-bit weights load into a float32 model by :meth:`load_params`, cast.

    Fresh parameters are made on the current backend and device (:func:`mhattn.set_backend`); the
    model then runs on arrays of that library and device (:meth:`place` moves host data there).

    Attributes:
        params, grads: flat dicts name -> array; ``head_mask_grad`` ``(L, h)`` or ``(L, B, h)``
        after a backward with a head mask (ξ is an input: its gradient is not in ``grads``).
    """

    def __init__(self, cfg: ModelConfig, seed=0, dtype="float32", params=None, engine=True):
        self.cfg, self.engine = cfg, bool(engine)
        init_seed, drop_seed = np.random.SeedSequence(seed).spawn(2)
        if params is None:
            self.params = init_params(cfg, np.random.default_rng(init_seed), check_model_dtype(dtype, "dtype"))
        else:
            for name, p in params.items():
                check_model_dtype(host_dtype(p), f"parameter {name}")
            self.params = params
        self.rng = np.random.default_rng(drop_seed)
        self.grads, self.head_mask_grad, self._cache, self._steps = {}, None, None, None

    def attention_steps(self):
        """The multi-head attention pair every block runs: the engine's or the reference's
        (:func:`mhattn.nn.attention.attention_steps`, on the parameters' arrays)."""
        return attention_steps(self.engine, self.params["embed.W"])

    def forward(self, ids, *, head_mask=None, training=False):
        """Run the model on ``ids`` ``(B, T)`` (integers in ``[0, vocab_size)``).

        Args:
            head_mask: ``(L, h)`` or ``(L, B, h)`` multipliers ξ on each head's output (Michel et al. 2019), or None.
            training: apply ``cfg.dropout``.

        Returns:
            ``(logits, weights)``: a tuple of K arrays ``(B, T, C_k)`` and a tuple of L arrays ``(B, h, T, T)``.
        """
        c, self._steps = self.cfg, self.attention_steps()
        logits, weights, self._cache = transformer_forward(
            plain(ids), self.params, c.num_heads, c.num_layers, len(c.output_sizes), causal=c.causal, head_mask=head_mask,
            dropout_p=c.dropout if training else 0.0, rng=self.rng, attention=self._steps,
        )  # fmt: skip
        return logits, weights

    __call__ = forward

    def backward(self, dlogits):
        """Fill :attr:`grads` (and :attr:`head_mask_grad`) from the classifiers' gradients."""
        if self._cache is None:
            raise RuntimeError("backward() called before forward(): there is nothing to differentiate")
        self.grads, dmask = transformer_backward(dlogits, self._cache, self._steps)
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
        before keeps updating them); values are cast to each parameter's dtype and moved to its device
        (16-bit weights included: NumPy or torch float16, torch bfloat16). Every name must be there and fit,
        or nothing changes.

        Raises:
            KeyError: a name missing from ``params`` or unknown to the model.
            ValueError: a shape differs. TypeError: a value is not floating point.
        """
        missing = sorted(set(self.params) - set(params))
        if missing:
            raise KeyError(f"parameters missing: {missing[:4]}; nothing was loaded")
        copy_into(self.params, params)
