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


def _torch_oracle(torch, cfg, layout, options, x, masks, kind, seed, dtype="float64"):
    """torch's module (random nonzero biases), its outputs and gradients, as host arrays."""
    torch.manual_seed(seed)
    add_bias_kv, add_zero_attn = options
    ref = torch.nn.MultiheadAttention(
        **cfg, batch_first=layout == "batch_first", add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn,
        dtype=getattr(torch, dtype),
    )  # fmt: skip
    x = {n: a.astype(dtype) for n, a in x.items()}
    masks = {n: m if m.dtype == bool else m.astype(dtype) for n, m in masks.items()}
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


def _mhattn_run(backend, ref, layout, options, x, masks, kind, dtype="float64"):
    """mhattn's module loaded from torch's state dict, on ``backend``'s leg: outputs and gradients as host arrays."""
    add_bias_kv, add_zero_attn = options
    x = {n: a.astype(dtype) for n, a in x.items()}
    masks = {n: m if m.dtype == bool else m.astype(dtype) for n, m in masks.items()}
    mod = mhattn.MultiHeadAttention(
        ref.embed_dim, ref.num_heads, kdim=ref.kdim, vdim=ref.vdim, dtype=dtype,
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
@pytest.mark.parametrize("backend", LEGS, indirect=True)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_float32_with_extra_keys_matches_torch_at_its_tolerance(backend, layout):
    """The same comparison in float32 (``add_bias_kv`` and ``add_zero_attn``, a bool mask and key padding), at
    torch's own float32 tolerance (``torch.testing.assert_close``: rtol 1.3e-6, atol 1e-5)."""
    torch = pytest.importorskip("torch")
    seed = 40 + LAYOUTS.index(layout)
    x, masks, cfg, kind = _case(seed, layout, "bool_2d_and_padding")
    ref, want = _torch_oracle(torch, cfg, layout, OPTIONS["both"], x, masks, kind, seed, "float32")
    got = _mhattn_run(backend, ref, layout, OPTIONS["both"], x, masks, kind, "float32")
    for n in want:
        assert got[n].dtype == np.float32, n
        xp_assert_close(got[n], want[n], rtol=1.3e-6, atol=1e-5, err_msg=f"{layout}/{n}")


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


STATIC = {"static_kv": (True, True, False, False), "static_k_zero_attn": (True, False, True, True),
          "static_v_kdim": (False, True, False, False), "static_kv_zero_attn_padding": (True, True, True, True)}  # fmt: skip


@pytest.mark.torch
@pytest.mark.parametrize("backend", LEGS, indirect=True)
@pytest.mark.parametrize("case", list(STATIC))
def test_static_k_and_static_v_match_torchs_functional_forward(backend, case):
    """Follows ``test_multihead_attn_saved_kv``, ``test_multihead_attn_all_arguments1`` and ``..._arguments3`` (saved
    k/v per head, with add_zero_attn and a key padding mask): ``F.multi_head_attention_forward``'s ``static_k`` /
    ``static_v`` against mhattn's functional forward, output, per-head weights and every gradient (the static
    arrays' included) to 1e-9."""
    torch = pytest.importorskip("torch")
    use_k, use_v, zero, padding = STATIC[case]
    B, T, S, h, d_k = 3, 4, 5, 2, 3
    E, kdim = h * d_k, 7 if case == "static_v_kdim" else h * d_k
    rng = np.random.default_rng(len(case))
    torch.manual_seed(len(case))
    ref = torch.nn.MultiheadAttention(E, h, kdim=kdim, vdim=kdim, add_zero_attn=zero, dtype=torch.float64)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))
    host = {
        "query": rng.standard_normal((T, B, E)),
        "key": rng.standard_normal((S, B, kdim)),
        "dout": rng.standard_normal((T, B, E)),
    }
    host["value"] = rng.standard_normal((S, B, kdim))
    host.update(static_k=rng.standard_normal((B * h, S, d_k)), static_v=rng.standard_normal((B * h, S, d_k)))
    pad = rng.random((B, S)) < 0.3
    pad[:, 0] = False
    t = {n: torch.tensor(a, requires_grad=n != "dout") for n, a in host.items()}
    statics = {n: t[n] if use else None for n, use in (("static_k", use_k), ("static_v", use_v))}
    sd = dict(ref.named_parameters())
    proj = dict(in_proj_weight=sd.get("in_proj_weight"), use_separate_proj_weight="q_proj_weight" in sd)
    proj.update({n: sd[n] for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight") if n in sd})
    out, w = torch.nn.functional.multi_head_attention_forward(
        t["query"], t["key"], t["value"], E, h, bias_k=None, bias_v=None, in_proj_bias=sd["in_proj_bias"],
        add_zero_attn=zero, dropout_p=0.0, out_proj_weight=sd["out_proj.weight"], out_proj_bias=sd["out_proj.bias"],
        key_padding_mask=torch.as_tensor(pad) if padding else None, average_attn_weights=False, **proj, **statics,
    )  # fmt: skip
    out.backward(t["dout"])
    want = {"out": out.transpose(0, 1), "weights": w, "dquery": t["query"].grad.transpose(0, 1)}
    want.update({f"grad/{n}": t[n].grad for n in ("static_k", "static_v") if statics[n] is not None})
    want.update({f"grad/{n}": torch.zeros_like(p) if p.grad is None else p.grad for n, p in sd.items()})  # None: unused
    want = {n: a.detach().numpy() for n, a in want.items()}

    mod = mhattn.MultiHeadAttention(E, h, kdim=kdim, vdim=kdim, dtype="float64")
    mod.load_torch_state_dict(ref.state_dict())
    a = {n: backend.asarray(v.transpose(1, 0, 2) if n in ("query", "key", "value", "dout") else v) for n, v in host.items()}
    got_out, got_w, cache = mhattn.functional.multi_head_attention_forward(
        a["query"], a["key"], a["value"], mod.params, h, add_zero_attn=zero,
        key_padding_mask=backend.asarray(pad) if padding else None,
        static_k=a["static_k"] if use_k else None, static_v=a["static_v"] if use_v else None,
    )  # fmt: skip
    dq, _, _, grads, _ = mhattn.functional.multi_head_attention_backward(a["dout"], cache)
    got = {"out": got_out, "weights": got_w, "dquery": dq}
    got.update({f"grad/{n}": grads.pop(n) for n in ("static_k", "static_v") if n in grads})
    got = {n: backend.to_numpy(g) for n, g in got.items()}
    got.update({f"grad/{n}": g for n, g in params_to_torch(grads, E, kdim, kdim).items()})
    assert sorted(got) == sorted(want)
    for n in want:
        xp_assert_close(got[n], want[n], err_msg=f"{case}/{n}", **TOL)


def test_static_k_with_bias_k_and_wrong_shapes_are_refused():
    """Follows ``test_multihead_attn_all_arguments2`` (torch: "bias cannot be added to static key.")."""
    mod = mhattn.MultiHeadAttention(6, 2, dtype="float64", add_bias_kv=True)
    x, sk = np.zeros((3, 4, 6)), np.zeros((6, 4, 3))
    with pytest.raises(ValueError, match=r"bias_k/bias_v \(add_bias_kv\) cannot be added to static_k/static_v"):
        mhattn.functional.multi_head_attention_forward(x, x, x, mod.params, 2, static_k=sk)
    with pytest.raises(ValueError, match=r"static_v has shape \(3, 4, 3\); expected \(B\*h, S, d_k\)=\(6, 4, 3\)"):
        mhattn.functional.multi_head_attention_forward(x, x, x, mod.params, 2, static_v=sk[:3])
