"""Input checks for multi-head attention: clear errors before any arithmetic."""

from __future__ import annotations

from mhattn.backend import get_array_module


def _check_float(name, a, dtype=None):
    if not hasattr(a, "dtype") or a.dtype.kind != "f":
        got = getattr(a, "dtype", type(a).__name__)
        raise TypeError(f"{name} must be a float32 or float64 array, got {got}")
    if dtype is not None and a.dtype != dtype:
        raise TypeError(f"{name} has dtype {a.dtype} but the parameters are {dtype}; cast one of them")


def check_mha_inputs(query, key, value, params, num_heads, head_mask=None):
    """Check ranks, trailing dimensions, batch sizes and dtypes of an MHA call.

    Raises:
        TypeError: a non-float input, a dtype that differs from the parameters',
            or NumPy and CuPy arrays mixed.
        ValueError: a wrong rank or dimension (the message gives the numbers).
    """
    get_array_module(query, key, value, head_mask, *params.values())
    W_q, W_k, W_v, W_o = (params[n] for n in ("W_q", "W_k", "W_v", "W_o"))
    d_model = W_q.shape[1]
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    for name, x, W, wname in (("query", query, W_q, "W_q"), ("key", key, W_k, "W_k"), ("value", value, W_v, "W_v")):
        _check_float(name, x, W_q.dtype)
        if x.ndim != 3:
            raise ValueError(f"{name} must be 3-D (B, L, E) (batch first), got shape {x.shape}")
        if x.shape[-1] != W.shape[0]:
            raise ValueError(f"{name} has trailing dimension {x.shape[-1]}, but {wname} expects {W.shape[0]}")
    if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
        raise ValueError(
            f"batch/length mismatch: query {query.shape}, key {key.shape}, value {value.shape} "
            "(need the same B, and the same S for key and value)"
        )
    if head_mask is not None:
        _check_float("head_mask", head_mask, W_q.dtype)
        if head_mask.shape not in ((num_heads,), (query.shape[0], num_heads)):
            raise ValueError(
                f"head_mask has shape {head_mask.shape}; expected (h,)=({num_heads},) or (B, h)=({query.shape[0]}, {num_heads})"
            )
