"""``MultiHeadAttention`` with every option torch's has, against ``torch.nn.MultiheadAttention`` as the oracle.

Follows PyTorch's ``test/nn/test_multihead_attention.py::TestMultiheadAttentionNN.test_multihead_attention`` (random
shapes, key padding masks, ``add_bias_kv``, ``add_zero_attn``, kdim/vdim, ``average_attn_weights`` both ways),
rewritten: the same weights (through ``to_torch_state_dict``/``load_torch_state_dict``, ``bias_k``/``bias_v``
included) and the same inputs go to both, in torch's three layouts (batch first, sequence first, unbatched), with
every mask kind; outputs, weights (per head and averaged) and every gradient agree to 1e-9 in float64. mhattn runs
on each leg (NumPy, array-api-strict's device1, torch CPU); torch, the oracle, on the host in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LEGS
from xp_testing import xp_assert_close

import mhattn
from mhattn.nn.torch_io import params_to_torch

TOL = dict(rtol=1e-9, atol=1e-9)
OPTIONS = {"plain": (False, False), "bias_kv": (True, False), "zero_attn": (False, True), "both": (True, True)}
LAYOUTS = ("batch_first", "seq_first", "unbatched")
MASKS = ("none", "bool_2d", "float_2d", "bool_3d", "padding_bool", "padding_float", "bool_2d_and_padding")


def _shapes(seed):
    """Random sizes, as PyTorch's test draws them: batch, lengths, heads, d_k, and whether kdim/vdim differ."""
    r = np.random.default_rng(seed)
    B, T, S = (int(n) for n in r.integers(2, 6, 3))
    h, d_k = int(r.integers(1, 4)), int(r.integers(2, 5))
    kind = ("self", "cross", "kdim")[seed % 3]
    kdim, vdim = (int(r.integers(3, 9)), int(r.integers(3, 9))) if kind == "kdim" else (h * d_k, h * d_k)
    return B, T, T if kind == "self" else S, h, d_k, kind, kdim, vdim


def _masks(rng, mask, B, T, S, h):
    """Host masks of one kind; column 0 always allowed (torch gives NaN for a query with no key)."""
    out = {}
    if mask in ("bool_2d", "bool_2d_and_padding"):
        m = rng.random((T, S)) < 0.4
        m[:, 0] = False
        out["attn_mask"] = m
    elif mask == "float_2d":
        out["attn_mask"] = rng.standard_normal((T, S))
    elif mask == "bool_3d":
        m = rng.random((B * h, T, S)) < 0.4
        m[:, :, 0] = False
        out["attn_mask"] = m
    if mask in ("padding_bool", "bool_2d_and_padding"):
        pad = rng.random((B, S)) < 0.4
        pad[:, 0] = False
        out["key_padding_mask"] = pad
    elif mask == "padding_float":
        out["key_padding_mask"] = np.where(rng.random((B, S)) < 0.4, -np.inf, rng.standard_normal((B, S)))
        out["key_padding_mask"][:, 0] = 0.0
    return out


def _case(seed, layout, mask):
    """Host inputs in ``layout``, masks, ``dout`` and the module's sizes."""
    B, T, S, h, d_k, kind, kdim, vdim = _shapes(seed)
    B = 1 if layout == "unbatched" else B
    rng = np.random.default_rng(seed + 100)
    d_model = h * d_k
    x = {"query": rng.standard_normal((B, T, d_model)), "dout": rng.standard_normal((B, T, d_model))}
    if kind != "self":
        x["key"], x["value"] = rng.standard_normal((B, S, kdim)), rng.standard_normal((B, S, vdim))
    masks = _masks(rng, mask, B, T, S, h)
    for n in list(x):  # the caller's layout
        x[n] = x[n][0] if layout == "unbatched" else (x[n].transpose(1, 0, 2) if layout == "seq_first" else x[n])
    if layout == "unbatched" and "key_padding_mask" in masks:
        masks["key_padding_mask"] = masks["key_padding_mask"][0]
    return x, masks, dict(embed_dim=d_model, num_heads=h, kdim=kdim, vdim=vdim), kind


def _torch_oracle(torch, cfg, layout, options, x, masks, kind, seed):
    """torch's module (random nonzero biases), its outputs and gradients, as host arrays."""
    torch.manual_seed(seed)
    add_bias_kv, add_zero_attn = options
    ref = torch.nn.MultiheadAttention(
        **cfg, batch_first=layout == "batch_first", add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn,
        dtype=torch.float64,
    )  # fmt: skip
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))
    q = torch.tensor(x["query"], requires_grad=True)
    k = q if kind == "self" else torch.tensor(x["key"], requires_grad=True)
    v = q if kind == "self" else torch.tensor(x["value"], requires_grad=True)
    tm = {n: torch.as_tensor(m) for n, m in masks.items()}
    out, w = ref(q, k, v, average_attn_weights=False, **tm)
    _, w_avg = ref(q, k, v, **tm)
    out.backward(torch.as_tensor(x["dout"]))
    want = {"out": out, "weights": w, "weights_avg": w_avg, "dquery": q.grad}
    if kind != "self":
        want.update(dkey=k.grad, dvalue=v.grad)
    want.update({f"grad/{n}": p.grad for n, p in ref.named_parameters()})
    return ref, {n: a.detach().numpy() for n, a in want.items()}


def _mhattn_run(backend, ref, layout, options, x, masks, kind):
    """mhattn's module loaded from torch's state dict, on ``backend``'s leg: outputs and gradients as host arrays."""
    add_bias_kv, add_zero_attn = options
    mod = mhattn.MultiHeadAttention(
        ref.embed_dim, ref.num_heads, kdim=ref.kdim, vdim=ref.vdim, dtype="float64",
        batch_first=layout == "batch_first", add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn,
    )  # fmt: skip
    mod.load_torch_state_dict(ref.state_dict())
    a = {n: backend.asarray(v) for n, v in {**x, **masks}.items()}
    q = a["query"]
    k, v = (q, q) if kind == "self" else (a["key"], a["value"])
    m = {n: a[n] for n in masks}
    _, w_avg = mod(q, k, v, **m)
    out, w = mod(q, k, v, average_attn_weights=False, **m)
    dq, dk, dv = mod.backward(a["dout"])
    got = {"out": out, "weights": w, "weights_avg": w_avg, "dquery": dq + dk + dv if kind == "self" else dq}
    if kind != "self":
        got.update(dkey=dk, dvalue=dv)
    assert all(backend.is_here(g) for g in [*got.values(), *mod.grads.values()])
    got = {n: backend.to_numpy(g) for n, g in got.items()}
    got.update({f"grad/{n}": g for n, g in params_to_torch(mod.grads, mod.d_model, mod.kdim, mod.vdim).items()})
    return got


@pytest.mark.torch
@pytest.mark.parametrize("backend", LEGS, indirect=True)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("option", list(OPTIONS))
def test_multihead_attention_with_every_option_matches_torch(backend, option, layout, mask):
    """Follows ``test_multihead_attention`` (its ``_multihead_attn_test_helper`` with add_key_padding_mask,
    add_bias_kv, add_zero_attn, same_embed_dim and average_attn_weights both ways) and
    ``test_multihead_attn_3d_attn_mask``, with torch as the oracle, gradients included."""
    torch = pytest.importorskip("torch")
    seed = 7 * list(OPTIONS).index(option) + 3 * LAYOUTS.index(layout) + MASKS.index(mask)
    x, masks, cfg, kind = _case(seed, layout, mask)
    ref, want = _torch_oracle(torch, cfg, layout, OPTIONS[option], x, masks, kind, seed)
    got = _mhattn_run(backend, ref, layout, OPTIONS[option], x, masks, kind)
    assert sorted(got) == sorted(want)
    for n in want:
        xp_assert_close(got[n], want[n], err_msg=f"{option}/{layout}/{mask}/{n}", **TOL)


@pytest.mark.torch
def test_state_dict_with_bias_kv_round_trips_through_torch():
    """Follows ``test_multihead_attention``'s use of ``multihead_attn_module.bias_k``/``bias_v``: torch's
    ``(1, 1, E)`` parameters load into mhattn's ``(E,)`` ones and come back unchanged, and torch loads them back."""
    torch = pytest.importorskip("torch")
    ref = torch.nn.MultiheadAttention(6, 2, add_bias_kv=True, dtype=torch.float64)
    mod = mhattn.MultiHeadAttention(6, 2, add_bias_kv=True, dtype="float64")
    mod.load_torch_state_dict(ref.state_dict())
    np.testing.assert_array_equal(mod.params["bias_k"], ref.bias_k.detach().numpy().reshape(6))
    back = mod.to_torch_state_dict()
    assert back["bias_k"].shape == back["bias_v"].shape == (1, 1, 6)
    ref.load_state_dict({n: torch.as_tensor(a) for n, a in back.items()})  # strict: every name torch has, no more
    for n, a in ref.state_dict().items():
        np.testing.assert_array_equal(a.numpy(), back[n], err_msg=n)
