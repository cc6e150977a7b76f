"""Reading and writing torch.nn.MultiheadAttention state dicts without importing torch.

torch stores weights ``(out, in)`` and uses ``x @ W.T``; mhattn stores ``(in, out)``
and uses ``x @ W``, so every weight is transposed on the way in and out. The
packed ``in_proj_weight`` ``(3 d_model, d_model)`` holds W_q, W_k, W_v as row blocks. ``bias_k``/``bias_v``
(``add_bias_kv``) are ``(1, 1, d_model)`` in torch and ``(d_model,)`` here.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import asarray, to_numpy


def _checked_host_arrays(mapping, bias, add_bias_kv=False):
    """Host float arrays of ``mapping``, refusing entries this module would not use."""
    if not hasattr(mapping, "items"):
        raise TypeError(f"expected a mapping of parameter names to arrays (a state dict), got {type(mapping).__name__}")
    m = {k: to_numpy(v) for k, v in mapping.items()}  # torch's bfloat16 comes as float32, float16 as float16
    packed = "in_proj_weight" in m
    expected = {"in_proj_weight"} if packed else {"q_proj_weight", "k_proj_weight", "v_proj_weight"}
    expected |= {"out_proj.weight"} | ({"in_proj_bias", "out_proj.bias"} if bias else set())
    expected |= {"bias_k", "bias_v"} if add_bias_kv else set()
    unexpected = sorted(set(m) - expected)
    if unexpected:
        why = " (the module has bias=False)" if {"in_proj_bias", "out_proj.bias"} & set(unexpected) else ""
        why += " (the module has add_bias_kv=False)" if {"bias_k", "bias_v"} & set(unexpected) else ""
        raise KeyError(f"state dict has entries this module does not use{why}: {unexpected}")
    for k, v in m.items():
        if v.dtype.kind != "f":
            raise TypeError(f"{k} has dtype {v.dtype}; expected floating point")
    return m


def params_from_torch(mapping, d_model, kdim, vdim, bias, dtype, add_bias_kv=False):
    """mhattn ``params`` (new arrays on the current backend and device) from a torch-named mapping of arrays.

    ``MultiHeadAttention.load_torch_state_dict`` instead copies :func:`host_params_from_torch` into its
    existing arrays (:func:`mhattn.nn.device.copy_into`).

    Raises:
        KeyError: a needed name is missing (the message lists what is there), or an entry is
            not used by this module (e.g. biases for ``bias=False``; both weight layouts at once).
        TypeError: not a mapping, or an entry that is not floating point.
        ValueError: an array has the wrong shape. (``bias_k``/``bias_v`` are taken with ``add_bias_kv``, and are
            a KeyError without it.)
    """
    host = host_params_from_torch(mapping, d_model, kdim, vdim, bias, dtype, add_bias_kv)
    return {k: asarray(v) for k, v in host.items()}


def host_params_from_torch(mapping, d_model, kdim, vdim, bias, dtype, add_bias_kv=False):
    """:func:`params_from_torch`'s arrays on the host: C-contiguous NumPy arrays of ``dtype`` (same errors)."""
    m = _checked_host_arrays(mapping, bias, add_bias_kv)

    def take(name, shape):
        if name not in m:
            raise KeyError(f"state dict has no {name!r}; it has {sorted(m)}")
        if m[name].shape != shape:
            raise ValueError(f"{name} has shape {m[name].shape}, expected {shape}")
        return m[name].astype(dtype)

    if "in_proj_weight" in m:
        w = take("in_proj_weight", (3 * d_model, d_model))
        if not kdim == vdim == d_model:
            raise ValueError(f"in_proj_weight needs kdim == vdim == d_model, but kdim={kdim}, vdim={vdim}, d_model={d_model}")
        W = {"W_q": w[:d_model].T, "W_k": w[d_model : 2 * d_model].T, "W_v": w[2 * d_model :].T}
    else:
        W = {
            "W_q": take("q_proj_weight", (d_model, d_model)).T,
            "W_k": take("k_proj_weight", (d_model, kdim)).T,
            "W_v": take("v_proj_weight", (d_model, vdim)).T,
        }
    W["W_o"] = take("out_proj.weight", (d_model, d_model)).T
    if bias:
        b = take("in_proj_bias", (3 * d_model,))
        W.update(b_q=b[:d_model], b_k=b[d_model : 2 * d_model], b_v=b[2 * d_model :], b_o=take("out_proj.bias", (d_model,)))
    if add_bias_kv:  # torch's (1, 1, d_model) parameters, appended key and value (functional/extra_keys.py)
        W.update(bias_k=take("bias_k", (1, 1, d_model))[0, 0], bias_v=take("bias_v", (1, 1, d_model))[0, 0])
    return {k: np.ascontiguousarray(v) for k, v in W.items()}


def params_to_torch(params, d_model, kdim, vdim):
    """The inverse of :func:`params_from_torch`: torch names -> host NumPy arrays."""
    p = {k: to_numpy(v) for k, v in params.items()}
    out = {}
    if kdim == vdim == d_model:
        out["in_proj_weight"] = np.concat([p["W_q"].T, p["W_k"].T, p["W_v"].T])
    else:
        out.update(q_proj_weight=p["W_q"].T.copy(), k_proj_weight=p["W_k"].T.copy(), v_proj_weight=p["W_v"].T.copy())
    if "b_q" in p:
        out["in_proj_bias"] = np.concat([p["b_q"], p["b_k"], p["b_v"]])
    if "bias_k" in p:
        out.update(bias_k=p["bias_k"].reshape(1, 1, d_model).copy(), bias_v=p["bias_v"].reshape(1, 1, d_model).copy())
    out["out_proj.weight"] = p["W_o"].T.copy()
    if "b_o" in p:
        out["out_proj.bias"] = p["b_o"].copy()
    return out
