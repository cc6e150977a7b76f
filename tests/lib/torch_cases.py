"""Cases for the cross-check against torch.nn.MultiheadAttention (batch_first=True).

``build_case`` makes inputs and torch-named weights from a seed (NumPy only);
``run_torch`` and ``run_mhattn`` return the same named outputs:
``out``, ``weights`` (averaged), ``weights_per_head``, ``dquery`` (``dinput`` for
self-attention), ``dkey``, ``dvalue``, and ``grad/<torch parameter name>``.
``make_torch_refs.py`` stores inputs and torch's outputs in ``data/torch_refs.npz``.
"""

from __future__ import annotations

import numpy as np

import mhattn
from mhattn.nn.torch_io import params_to_torch

# name -> (d_model, num_heads, kdim, vdim, bias, dtype, self_attention, mask kind)
CASES = {
    "self_f64": (12, 3, None, None, True, "float64", True, None),
    "cross_f64": (12, 4, None, None, True, "float64", False, None),
    "kdim_vdim_f64": (12, 3, 5, 7, True, "float64", False, None),
    "no_bias_f64": (12, 3, None, None, False, "float64", True, None),
    "bool_mask_f64": (12, 3, None, None, True, "float64", False, "bool"),
    "float_mask_f64": (12, 3, None, None, True, "float64", False, "float"),
    "padding_f64": (12, 3, None, None, True, "float64", False, "padding"),
    "causal_f64": (12, 3, None, None, True, "float64", True, "causal"),
    "one_head_f64": (8, 1, None, None, True, "float64", True, None),
    "d_k_one_f64": (6, 6, None, None, True, "float64", True, "causal"),
    "self_f32": (16, 4, None, None, True, "float32", True, "causal"),
    "cross_f32": (16, 2, 9, 11, True, "float32", False, "padding"),
}
B, T, S = 2, 5, 7


def build_case(name, seed=0):
    """Inputs (NumPy), masks, ``dout`` and torch-named weights of case ``name``."""
    d_model, h, kdim, vdim, bias, dtype, self_attn, mask = CASES[name]
    rng = np.random.default_rng([seed, len(name)] + [ord(c) for c in name])
    S_ = T if self_attn else S
    kdim, vdim = kdim or d_model, vdim or d_model
    case = {"query": rng.standard_normal((B, T, d_model)).astype(dtype)}
    if not self_attn:
        case["key"] = rng.standard_normal((B, S_, kdim)).astype(dtype)
        case["value"] = rng.standard_normal((B, S_, vdim)).astype(dtype)
    case["dout"] = rng.standard_normal((B, T, d_model)).astype(dtype)
    if mask == "bool":
        m = rng.random((T, S_)) < 0.4
        m[:, 0] = False  # every query keeps at least one key (torch gives NaN otherwise)
        case["attn_mask"] = m
    elif mask == "float":
        case["attn_mask"] = rng.standard_normal((T, S_)).astype(dtype)
    elif mask == "causal":
        case["attn_mask"] = mhattn.to_numpy(mhattn.causal_mask(T, S_))
    elif mask == "padding":
        pad = np.zeros((B, S_), dtype=bool)
        pad[0, -2:] = True
        pad[1, -1:] = True
        case["key_padding_mask"] = pad
    with mhattn.use_backend("numpy"):
        ref = mhattn.MultiHeadAttention(d_model, h, kdim=kdim, vdim=vdim, bias=bias, dtype=dtype, seed=seed)
    # biases are zero at init: give them values so their gradients are tested for real
    ref.params = {k: v + 0.1 * rng.standard_normal(v.shape).astype(dtype) for k, v in ref.params.items()}
    case.update({f"state/{k}": v for k, v in ref.to_torch_state_dict().items()})
    return case


def _config(name):
    d_model, h, kdim, vdim, bias, dtype, self_attn, _ = CASES[name]
    return dict(d_model=d_model, num_heads=h, kdim=kdim, vdim=vdim, bias=bias, dtype=dtype), self_attn


def run_torch(name, case):
    """torch's outputs and gradients for ``case`` (imports torch)."""
    import torch

    cfg, self_attn = _config(name)
    tdtype = getattr(torch, cfg["dtype"])
    mod = torch.nn.MultiheadAttention(
        cfg["d_model"], cfg["num_heads"], bias=cfg["bias"], kdim=cfg["kdim"], vdim=cfg["vdim"], batch_first=True, dtype=tdtype
    )
    mod.load_state_dict({k[6:]: torch.from_numpy(v) for k, v in case.items() if k.startswith("state/")})
    q = torch.tensor(case["query"], requires_grad=True)
    k = q if self_attn else torch.tensor(case["key"], requires_grad=True)
    v = q if self_attn else torch.tensor(case["value"], requires_grad=True)
    masks = {m: torch.from_numpy(case[m]) for m in ("attn_mask", "key_padding_mask") if m in case}
    out, w_heads = mod(q, k, v, average_attn_weights=False, **masks)
    out.backward(torch.from_numpy(case["dout"]))
    res = {"out": out, "weights_per_head": w_heads, "weights": w_heads.mean(dim=1), "dquery": q.grad}
    if not self_attn:
        res.update(dkey=k.grad, dvalue=v.grad)
    res.update({f"grad/{n}": p.grad for n, p in mod.named_parameters()})
    return {n: t.detach().numpy() for n, t in res.items()}


def run_mhattn(name, case):
    """mhattn's outputs and gradients for ``case``, on the current backend, as NumPy."""
    cfg, self_attn = _config(name)
    mod = mhattn.MultiHeadAttention(**cfg)
    mod.load_torch_state_dict({k[6:]: v for k, v in case.items() if k.startswith("state/")})
    a = {n: mhattn.asarray(case[n]) for n in ("query", "key", "value", "attn_mask", "key_padding_mask", "dout") if n in case}
    out, w_heads = mod.forward(
        a["query"], a.get("key"), a.get("value"),
        attn_mask=a.get("attn_mask"), key_padding_mask=a.get("key_padding_mask"), average_attn_weights=False,
    )  # fmt: skip
    _, w_avg = mod.forward(
        a["query"], a.get("key"), a.get("value"), attn_mask=a.get("attn_mask"), key_padding_mask=a.get("key_padding_mask")
    )
    dq, dk, dv = mod.backward(a["dout"])
    res = {"out": out, "weights_per_head": w_heads, "weights": w_avg}
    if self_attn:
        res["dquery"] = dq + dk + dv
    else:
        res.update(dquery=dq, dkey=dk, dvalue=dv)
    res.update({f"grad/{n}": g for n, g in params_to_torch(mod.grads, mod.d_model, mod.kdim, mod.vdim).items()})
    return {n: mhattn.to_numpy(v) for n, v in res.items()}
