"""``MultiHeadAttention``: a thin stateful wrapper around the functional steps.

It holds ``params``, ``grads`` and the last forward's cache, and calls one (forward, backward) pair: the reference
steps :func:`mhattn.functional.multi_head_attention_forward` / ``_backward``, or, on plain NumPy float arrays, the
speed engine's drop-in twins (:mod:`mhattn.kernels`), chosen in one visible branch (:func:`attention_steps`)
as nanoGPT's ``if self.flash:``.
Vaswani et al. 2017, §3.2.2; head mask ξ from Michel et al. 2019.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from mhattn import kernels
from mhattn.backend import array_namespace, is_array, plain
from mhattn.backend.argtypes import as_integer, as_real
from mhattn.functional.mha import multi_head_attention_backward, multi_head_attention_forward
from mhattn.functional.validate import check_nested
from mhattn.nn.device import copy_into
from mhattn.nn.half import dtype_name, host_dtype_for, is_low, low_backward, module_dtype, narrow, on_backend, widen
from mhattn.nn.init import init_kv_bias, init_mha_params
from mhattn.nn.layout import batch_first_call
from mhattn.nn.torch_io import host_params_from_torch, params_to_torch


def attention_steps(engine: bool, *arrays):
    """The multi-head attention pair ``(forward, backward)`` a call on ``arrays`` runs: the engine's
    (:mod:`mhattn.kernels`) when ``engine`` is on and it takes the arrays (plain NumPy float32/float64), else the
    reference steps (:mod:`mhattn.functional.mha`). Both have one signature and one cache, and give the same numbers."""
    if engine and kernels.takes(*arrays):
        return kernels.multi_head_attention_forward, kernels.multi_head_attention_backward
    return multi_head_attention_forward, multi_head_attention_backward


class MultiHeadAttention:
    """Multi-head attention with hand-written backward, batch first.

    Args:
        d_model: model width (the paper's d_model, torch's ``embed_dim``).
        num_heads: h; ``d_k = d_model // h``.
        kdim, vdim: feature sizes of ``key`` and ``value`` (default ``d_model``).
        bias: learn ``b_q, b_k, b_v, b_o``.
        dropout: probability of dropping an attention weight when ``training=True``.
        dtype: "float16", "float32", "float64" or, on torch, "bfloat16" for every parameter, output and gradient
            (float16 and bfloat16 compute in float32 and round once: :mod:`mhattn.nn.half`).
            Parameters are made on the current backend and device (:func:`mhattn.set_backend`);
            inputs must then be arrays of that library on that device.
        seed: seeds both the initialisation and the dropout generator.
        attention: "plain" stores the ``(B, h, T, S)`` weights; "tiled" never forms them
            (:mod:`mhattn.functional.attention_tiled`; needs ``need_weights=False`` and no dropout);
            "auto" (default) takes the tiled path when it may and ``B*h*T*S >= TILED_MIN_SCORES``.
        engine: on plain NumPy float arrays run the speed engine (:mod:`mhattn.kernels`: threads, fused
            projections; the same numbers to rounding); ``False`` runs the reference steps of
            :mod:`mhattn.functional` on every library. The attribute may be changed at any time.
        batch_first: inputs ``(B, T, E)`` (default, mhattn's layout, which the course uses throughout); ``False``
            takes torch's default ``(T, B, E)``. Unbatched ``(T, E)`` inputs are taken either way.
        add_bias_kv: learn ``bias_k``, ``bias_v`` ``(d_model,)``: one key/value position appended to every
            sequence (torch's ``add_bias_kv``; :mod:`mhattn.functional.extra_keys`).
        add_zero_attn: append a key/value position of zeros after the others (torch's ``add_zero_attn``).
            With either of the two the reference steps run (the engine has neither).

    Attributes:
        params: ``W_q (d_model, d_model)``, ``W_k (kdim, d_model)``, ``W_v (vdim, d_model)``,
            ``W_o (d_model, d_model)``, with ``bias`` ``b_q, b_k, b_v, b_o (d_model,)``, with ``add_bias_kv``
            ``bias_k, bias_v (d_model,)``.
            Initialised as torch does (see :mod:`mhattn.nn.init`).
        grads: the same keys after :meth:`backward` (parameters only, so ``SGD(mha.params).step(mha.grads)``
            works after any backward).
        head_mask_grad: ``∂L/∂ξ`` after a backward with a ``head_mask``, shaped like it (``(h,)`` or
            ``(B, h)``); ``None`` otherwise. ξ is an input, not a parameter: its gradient is kept apart.

    Sizes may be any integers (``numbers.Integral``: NumPy's too) and ``dropout`` any real number; they are
    stored as Python ``int`` and ``float``.

    Raises:
        ValueError: ``d_model`` not divisible by ``num_heads``, a non-positive size,
            ``dropout`` outside [0, 1), a dtype other than float32/float64, or an unknown ``attention``.
        TypeError: a size that is not an integer or is a bool, a ``dropout`` that is not a number.
    """

    # "auto" goes tiled from this many scores (B*h*T*S) on: below it the plain path is as fast (bench_tiled.py)
    TILED_MIN_SCORES = 2**22

    def __init__(
        self,
        d_model,
        num_heads,
        kdim=None,
        vdim=None,
        bias=True,
        dropout=0.0,
        dtype="float32",
        seed=None,
        attention="auto",
        engine=True,
        *,
        batch_first=True,
        add_bias_kv=False,
        add_zero_attn=False,
    ):
        self.d_model = as_integer("d_model", d_model, 1)
        self.num_heads = as_integer("num_heads", num_heads, 1)
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        self.kdim = as_integer("kdim", d_model if kdim is None else kdim, 1)
        self.vdim = as_integer("vdim", d_model if vdim is None else vdim, 1)
        dropout = as_real("dropout", dropout, 0.0, 1.0, high_open=True)
        if not isinstance(bias, (bool, np.bool_)):
            raise TypeError(f"bias must be True or False, got {bias!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
            raise ValueError(f"seed must be None or a non-negative integer, got {seed!r}")
        self.dtype = module_dtype(dtype)
        if attention not in ("auto", "plain", "tiled"):
            raise ValueError(f"attention must be 'auto', 'plain' or 'tiled', got {attention!r}")
        for name, flag in (("batch_first", batch_first), ("add_bias_kv", add_bias_kv), ("add_zero_attn", add_zero_attn)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        self.batch_first, self.add_bias_kv, self.add_zero_attn = bool(batch_first), bool(add_bias_kv), bool(add_zero_attn)
        self.attention, self.engine = attention, bool(engine)
        self.d_k = self.d_model // self.num_heads
        self.bias, self.dropout = bool(bias), float(dropout)
        init_seed, dropout_seed = np.random.SeedSequence(seed).spawn(2)
        init_rng = np.random.default_rng(init_seed)
        host = init_mha_params(self.d_model, self.kdim, self.vdim, self.bias, host_dtype_for(self.dtype), init_rng)
        if self.add_bias_kv:  # drawn after the others: a module without them keeps its seeded values
            host.update(init_kv_bias(self.d_model, host_dtype_for(self.dtype), init_rng))
        self.params = on_backend(host, self.dtype)
        self.rng = np.random.default_rng(dropout_seed)  # dropout masks, drawn on the host
        self.grads, self.head_mask_grad = {}, None
        self._cache, self._backward = None, None  # the last forward's cache, and the backward of its pair
        self._layout = None  # the last forward's input layout (nn/layout.py)

    def forward(
        self,
        query,
        key=None,
        value=None,
        *,
        attn_mask=None,
        key_padding_mask=None,
        need_weights=True,
        average_attn_weights=True,
        head_mask=None,
        training=False,
        is_causal=False,
    ):
        """Attend from ``query`` to ``key``/``value`` and remember what backward needs.

        Args:
            query: ``(B, T, d_model)`` (``(T, B, d_model)`` with ``batch_first=False``; unbatched ``(T, d_model)``),
                the module's dtype.
            key: ``(B, S, kdim)``, in the query's layout; ``None`` means self-attention (``key = value = query``).
            value: ``(B, S, vdim)``; ``None`` means ``value = key``.
            attn_mask: bool (True = not allowed) or float (added to the scores); ``(T, S)``,
                torch's ``(B*h, T, S)`` (``(h, T, S)`` unbatched), or broadcastable to ``(B, h, T, S)``;
                a 1-D mask is refused (as torch refuses it).
            key_padding_mask: ``(B, S)`` (``(S,)`` unbatched), bool True = padding, or float (added).
            need_weights: return attention weights (else ``None``).
            average_attn_weights: average the weights over heads.
            head_mask: ``(h,)`` or ``(B, h)`` multipliers ξ on each head's output.
            training: apply dropout to the attention weights.
            is_causal: also mask key s > query t (on top of ``attn_mask``); the tiled path
                then skips the tiles above the diagonal. Different from torch on purpose: torch's
                ``MultiheadAttention`` reads ``is_causal`` as a hint that ``attn_mask`` (required) is causal.

        Returns:
            ``(out, weights)``: ``out`` like ``query`` (``(B, T, d_model)``, ``(T, B, d_model)`` or
            ``(T, d_model)``); ``weights`` ``(B, T, S')`` averaged over heads, ``(B, h, T, S')`` per head (batch
            first in both batched layouts, without ``B`` unbatched, as torch), or ``None``;
            ``S' = S + add_bias_kv + add_zero_attn``. Weights are
            taken *before* dropout, so rows sum to 1 (torch returns them after dropout).
            A query with no allowed key gets all-zero weights, so its output is ``b_o``
            (``torch.nn.MultiheadAttention`` gives NaN there on some paths, pytorch/pytorch#41508;
            ``F.scaled_dot_product_attention`` gives zeros, pytorch/pytorch#133882).

        Raises:
            TypeError: non-float input, dtype unlike the parameters', arrays of two libraries mixed.
            ValueError: arrays on two devices mixed (see :func:`mhattn.backend.array_namespace`).
            TypeError: a torch nested (jagged) tensor.
            ValueError: wrong rank, trailing dimension, batch size or mask shape; ``attention="tiled"``
                with ``need_weights=True`` or with dropout in training.
        """
        query, key, value, attn_mask, key_padding_mask, head_mask = map(
            plain, (query, key, value, attn_mask, key_padding_mask, head_mask)
        )  # np.memmap inputs as the plain arrays they view
        if type(query) is not np.ndarray:  # a torch nested tensor has no layout to read: refused first
            check_nested(query, key, value)
        # the caller's layout ((T, E) unbatched, (T, B, E) with batch_first=False) as the steps' (B, T, E)
        self._layout, query, key, value, key_padding_mask = batch_first_call(
            query, key, value, key_padding_mask, self.batch_first
        )
        layout, params, half = self._layout, self.params, is_low(self.dtype)
        if half:  # float16, bfloat16: the steps run in float32 (nn/half.py)
            arrays = dict(query=query, key=key, value=value, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
            arrays = widen(self.dtype, arrays | {"head_mask": head_mask})
            query, key, value, attn_mask, key_padding_mask, head_mask = arrays.values()
            params = widen(self.dtype, self.params)
        p = self.dropout if training else 0.0
        extra_keys = self.add_bias_kv or self.add_zero_attn  # the engine has neither: the reference runs them
        forward, self._backward = attention_steps(self.engine and not extra_keys, query, key, value, params["W_q"])
        options = {"add_zero_attn": True} if self.add_zero_attn else {}
        out, weights, self._cache = forward(
            query, key, value, params, self.num_heads,
            attn_mask=attn_mask, key_padding_mask=key_padding_mask, head_mask=head_mask,
            dropout_p=p, rng=self.rng, tiled=self._use_tiled(query, key, need_weights, p), is_causal=is_causal,
            **options,
        )  # fmt: skip
        out = layout.from_batch_first(narrow(out, self.dtype) if half else out)
        if not need_weights:
            return out, None
        # a copy: the cached weights must stay as they were for backward
        xp = array_namespace(weights)
        weights = xp.mean(weights, axis=1) if average_attn_weights else xp.asarray(weights, copy=True)
        return out, layout.weights(narrow(weights, self.dtype) if half else weights)

    __call__ = forward

    def _use_tiled(self, query, key, need_weights, dropout_p) -> bool:
        """Which step-3 path this call takes (see ``attention`` in the class docstring)."""
        if self.attention == "plain":
            return False
        if self.attention == "tiled" and (need_weights or dropout_p > 0):
            raise ValueError(
                "attention='tiled' never forms the weights: call with need_weights=False and without dropout "
                f"(need_weights={need_weights}, dropout={dropout_p})"
            )
        if self.attention == "tiled":
            return True
        shapes = getattr(query, "shape", ()), getattr(key, "shape", ())
        if need_weights or dropout_p > 0 or len(shapes[0]) != 3 or len(shapes[1]) != 3:
            return False  # a bad input is refused by the functional checks
        return shapes[0][0] * self.num_heads * shapes[0][1] * shapes[1][1] >= self.TILED_MIN_SCORES

    def backward(self, dout):
        """Back-propagate ``dout`` (the output's shape and layout) through the last :meth:`forward`.

        Fills :attr:`grads` (fresh arrays; parameters are not touched) and :attr:`head_mask_grad`.

        Returns:
            ``(dquery, dkey, dvalue)`` with the inputs' shapes and layout; for self-attention
            the gradient of the one input is their sum.

        Raises:
            RuntimeError: no forward has run yet.
            ValueError / TypeError: ``dout`` does not match the output's shape or dtype.
        """
        if self._cache is None:
            raise RuntimeError("backward() called before forward(): there is nothing to differentiate")
        layout, x = self._layout, self._cache.out_proj.x  # x: the concat, (B, T, d_model) like the output
        shape = tuple(layout.from_batch_first(x).shape)  # the output's shape, in the caller's layout
        dout = plain(dout)
        if not is_array(dout):
            raise TypeError(f"dout must be an array (NumPy, CuPy, torch or array-api-strict), got {type(dout).__name__}")
        array_namespace(dout, x)  # one library, one device
        if tuple(dout.shape) != shape:
            raise ValueError(f"dout must have the output's shape {shape}, got {tuple(dout.shape)}")
        half = is_low(self.dtype)  # x is float32 then: the steps ran in float32
        if (dtype_name(dout.dtype) != dtype_name(self.dtype)) if half else (dout.dtype != x.dtype):
            raise TypeError(f"dout has dtype {dtype_name(dout.dtype)}, expected {self.dtype}")
        dout = layout.to_batch_first(dout)
        grads = low_backward(self._backward, self.dtype, dout, self._cache) if half else self._backward(dout, self._cache)
        dquery, dkey, dvalue, self.grads, self.head_mask_grad = grads
        return layout.from_batch_first(dquery), layout.from_batch_first(dkey), layout.from_batch_first(dvalue)

    def num_parameters(self) -> int:
        """Number of learned scalars: ``4 d_model^2 + 4 d_model`` with bias when kdim = vdim = d_model."""
        return sum(math.prod(p.shape) for p in self.params.values())

    def load_torch_state_dict(self, mapping):
        """Load ``torch.nn.MultiheadAttention.state_dict()``-named arrays (torch not imported).

        Accepts ``in_proj_weight``/``in_proj_bias`` or ``q_proj_weight``/``k_proj_weight``/
        ``v_proj_weight``, and ``out_proj.weight``/``out_proj.bias``; values may be NumPy
        arrays, CuPy arrays, tensors or any backend's arrays. As torch's ``load_state_dict``, the values are
        copied *into* the existing parameter arrays (cast to the module's dtype, moved to their device), so
        an optimiser built before keeps updating the live parameters. Nothing changes unless every entry fits.

        Raises:
            KeyError: a needed name is missing, or an entry this module does not use.
            ValueError: a shape does not fit. TypeError: an entry is not floating point.
        """
        dtype = host_dtype_for(self.dtype)  # bfloat16 values come as float32 and are cast into the parameters
        host = host_params_from_torch(mapping, self.d_model, self.kdim, self.vdim, self.bias, dtype, self.add_bias_kv)
        copy_into(self.params, host)

    def to_torch_state_dict(self):
        """The parameters under torch's names, as host NumPy arrays (inverse of :meth:`load_torch_state_dict`)."""
        return params_to_torch(self.params, self.d_model, self.kdim, self.vdim)

    def __repr__(self):
        return (
            f"MultiHeadAttention(d_model={self.d_model}, num_heads={self.num_heads}, kdim={self.kdim}, "
            f"vdim={self.vdim}, bias={self.bias}, dropout={self.dropout}, dtype='{self.dtype}', attention='{self.attention}', "
            f"engine={self.engine})"
        )
