"""Input checks at the public entries: clear errors before any arithmetic.

Each public forward (:func:`~mhattn.functional.mha.multi_head_attention_forward`,
:func:`~mhattn.functional.attention.scaled_dot_product_attention_forward`, ...) checks
its inputs once, here; the inner steps it calls assume checked inputs. Every check
reads only shapes and dtypes, except the NaN/+inf scan of a float mask
(:func:`mhattn.functional.masks.check_mask_kind`), done once per call.
"""

from __future__ import annotations

import functools

from mhattn.backend import array_namespace, is_array, is_ndarray_float
from mhattn.backend.argtypes import as_integer

WEIGHT_NAMES = ("W_q", "W_k", "W_v", "W_o")
BIAS_NAMES = ("b_q", "b_k", "b_v", "b_o")
KV_BIAS_NAMES = ("bias_k", "bias_v")  # torch's add_bias_kv: one learned key and value appended (extra_keys.py)


ARRAY_KINDS = "an array (NumPy, CuPy, torch or array-api-strict; see mhattn.asarray)"


def check_float_array(name, a, dtype=None):
    """``a`` must be a real floating array of a supported library (of ``dtype`` when given).

    Supported: any array-API array mhattn knows (NumPy, CuPy, torch, array-api-strict; see
    :func:`mhattn.backend.is_array`). Compare ``dtype`` only with arrays of ``a``'s library.

    Raises:
        TypeError: a list, masked array or other object; a non-float dtype; a dtype other than ``dtype``.
    """
    if is_ndarray_float(a):  # the common case, cheaply
        if dtype is not None and a.dtype != dtype:
            raise TypeError(f"{name} has dtype {a.dtype} but the parameters are {dtype}; cast one of them")
        return
    check_nested(a)
    if not is_array(a):
        raise TypeError(f"{name} must be {ARRAY_KINDS}, got {type(a).__name__}")
    if not _real_floating(array_namespace(a), a.dtype):
        raise TypeError(f"{name} must be a float32 or float64 array, got {a.dtype}")
    if dtype is not None and a.dtype != dtype:
        raise TypeError(f"{name} has dtype {a.dtype} but the parameters are {dtype}; cast one of them")


@functools.cache
def _real_floating(xp, dtype) -> bool:
    """``xp.isdtype(dtype, "real floating")``, remembered: the checks run on every call, with few dtypes."""
    return xp.isdtype(dtype, "real floating")


def check_dropout(dropout_p, rng, where="attention"):
    """``dropout_p`` in [0, 1), and a generator when it is above 0.

    Raises:
        ValueError: ``dropout_p`` outside [0, 1), or ``dropout_p > 0`` without ``rng``.
    """
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{where}: dropout_p must be in [0, 1), got {dropout_p}")
    if dropout_p > 0.0 and rng is None:
        raise ValueError(f"{where}: dropout_p > 0 needs rng, a numpy.random.Generator")


def check_params(params, num_heads):
    """Shapes and dtypes of ``W_q (d_model, d_model)``, ``W_k (kdim, d_model)``,
    ``W_v (vdim, d_model)``, ``W_o (d_model, d_model)``, the optional ``(d_model,)`` biases and the optional
    ``bias_k``, ``bias_v`` ``(d_model,)`` (torch's ``add_bias_kv``).

    Raises:
        KeyError: a weight is missing, or only some of the four biases (or one of bias_k, bias_v) are given.
        TypeError, ValueError: a parameter of the wrong kind, dtype or shape.
    """
    missing = [n for n in WEIGHT_NAMES if n not in params]
    if missing:
        raise KeyError(f"params lacks {missing}; it has {sorted(params)}")
    weights = [(name, params[name]) for name in WEIGHT_NAMES]
    for name, W in weights:
        check_float_array(name, W)
    array_namespace(*(W for _, W in weights))  # one library, one device, before dtypes are compared
    dtype = weights[0][1].dtype
    for name, W in weights:
        if W.dtype != dtype:
            check_float_array(name, W, dtype)  # raises, naming both dtypes
        if W.ndim != 2:
            raise ValueError(f"{name} must be 2-D (d_in, d_model), got shape {W.shape}")
    d_model = weights[0][1].shape[1]
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    biases = [(name, params.get(name)) for name in BIAS_NAMES]
    given = [name for name, b in biases if b is not None]
    if given and len(given) != 4:
        raise KeyError(f"give all four biases b_q, b_k, b_v, b_o or none; got {given}")
    for (name, W), rows in zip(weights, (d_model, None, None, d_model), strict=True):  # W_k, W_v: any d_in
        if W.shape != (W.shape[0] if rows is None else rows, d_model):
            raise ValueError(f"{name} has shape {W.shape}, expected {(W.shape[0] if rows is None else rows, d_model)}")
    for name, b in biases if given else ():
        check_float_array(name, b, dtype)
        if b.shape != (d_model,):
            raise ValueError(f"{name} has shape {b.shape}, expected {(d_model,)}")
    if params.get("bias_k") is not None or params.get("bias_v") is not None:  # add_bias_kv (rare: checked apart)
        _check_kv_bias(params, d_model, dtype)


def _check_kv_bias(params, d_model, dtype):
    """``bias_k`` and ``bias_v``: both, ``(d_model,)``, of the weights' dtype (see :func:`check_params`)."""
    kv = [name for name in KV_BIAS_NAMES if params.get(name) is not None]
    if len(kv) != 2:
        raise KeyError(f"give both bias_k and bias_v (add_bias_kv) or neither; got {kv}")
    for name in kv:
        check_float_array(name, params[name], dtype)
        if params[name].shape != (d_model,):
            raise ValueError(f"{name} has shape {params[name].shape}, expected {(d_model,)}")


def check_mha_inputs(query, key, value, params, num_heads, head_mask=None) -> int:
    """Check the parameters, then ranks, trailing dimensions, batch sizes and dtypes of an MHA call; returns
    ``num_heads`` as a Python ``int`` (the one check of it: any ``numbers.Integral``, NumPy's too, dividing d_model).

    Raises:
        TypeError: a non-array or non-float input, a dtype that differs from the
            parameters', or arrays of two libraries (NumPy and torch, say).
        ValueError: a wrong rank or dimension (the message gives the numbers); arrays on two devices.
        KeyError: a missing parameter.
    """
    num_heads = as_integer("num_heads", num_heads)  # any integer (np.int64 too); a bool or a float is refused
    check_params(params, num_heads)
    dtype = params["W_q"].dtype
    inputs = (("query", query, "W_q"), ("key", key, "W_k"), ("value", value, "W_v"))
    for name, x, _ in inputs:
        check_float_array(name, x)
    array_namespace(query, key, value, head_mask, *params.values())
    for name, x, wname in inputs:
        if x.ndim != 3:
            raise ValueError(f"{name} must be 3-D (B, L, E) (batch first), got shape {x.shape}")
        if x.shape[-1] != params[wname].shape[0]:
            raise ValueError(f"{name} has trailing dimension {x.shape[-1]}, but {wname} expects {params[wname].shape[0]}")
        check_float_array(name, x, dtype)
    if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
        raise ValueError(
            f"batch/length mismatch: query {query.shape}, key {key.shape}, value {value.shape} "
            "(need the same B, and the same S for key and value)"
        )
    if key.shape[1] == 0:
        raise ValueError(f"key and value have no positions (S=0): shapes {key.shape}, {value.shape}")
    if head_mask is not None:
        check_float_array("head_mask", head_mask, dtype)
        if head_mask.shape not in ((num_heads,), (query.shape[0], num_heads)):
            raise ValueError(
                f"head_mask has shape {head_mask.shape}; expected (h,)=({num_heads},) or (B, h)=({query.shape[0]}, {num_heads})"
            )
    return num_heads


def check_nested(*arrays):
    """No torch nested (jagged) tensor among ``arrays``: mhattn's steps need one dense shape.

    Raises:
        TypeError: a nested tensor, named as such, with what to do instead.
    """
    for a in arrays:
        if getattr(a, "is_nested", False) is True:
            raise TypeError(
                "nested (jagged) tensors are not supported: pad the sequences to one length and pass a "
                "key_padding_mask (torch.nested.to_padded_tensor(x, 0.0) gives the padded tensor)"
            )


def check_attention_inputs(q, k, v):
    """Kinds, dtypes and shapes of ``q (..., T, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)``.

    Raises:
        TypeError: not float arrays of one dtype, or arrays of two libraries.
        ValueError: shapes that do not fit together, or arrays on two devices.
    """
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_float_array(name, a)
    array_namespace(q, k, v)
    for name, a in (("k", k), ("v", v)):
        check_float_array(name, a, q.dtype)
    if q.ndim < 2 or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.shape[-1] == 0:
        raise ValueError(f"attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit together")
