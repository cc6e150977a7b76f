"""MultiHeadAttention's ``attention=`` switch: "tiled" gives the plain path's numbers (and torch's), "auto" goes
tiled only for large scores without weights or dropout, and "tiled" refuses what it cannot do."""

from __future__ import annotations

import numpy as np
import pytest
from torch_cases import CASES, build_case, run_torch

import mhattn
from mhattn.gradcheck import rel_error
from mhattn.nn.torch_io import params_to_torch


def _mha_pair(dtype, **kw):
    plain = mhattn.MultiHeadAttention(16, 4, dtype=dtype, seed=3, attention="plain", **kw)
    tiled = mhattn.MultiHeadAttention(16, 4, dtype=dtype, seed=3, attention="tiled", **kw)
    return plain, tiled


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 1e-5)])
def test_multi_head_attention_switch_gives_the_plain_numbers(backend, dtype, tol):
    rng = np.random.default_rng(2)
    x, dout = (mhattn.asarray(rng.standard_normal((2, 9, 16)).astype(dtype)) for _ in range(2))
    pad = np.zeros((2, 9), bool)
    pad[1, -3:] = True
    kw = dict(key_padding_mask=mhattn.asarray(pad), need_weights=False, is_causal=True)
    results = []
    for mod in _mha_pair(dtype):
        out, w = mod.forward(x, **kw)
        # b_k's true gradient is 0 (softmax ignores a shift shared by a row): only rounding noise there
        results.append((out, *mod.backward(dout), *(mod.grads[n] for n in sorted(mod.grads) if n != "b_k")))
        assert w is None
    for a, b in zip(*results, strict=True):
        assert rel_error(a, b) <= tol


def test_auto_goes_tiled_only_for_large_scores_without_weights_or_dropout():
    mod = mhattn.MultiHeadAttention(8, 2, dropout=0.1, seed=0)
    small, large = np.zeros((1, 4, 8), np.float32), np.zeros((1, 1024, 8), np.float32)
    assert mod.TILED_MIN_SCORES == 2**22 and 2 * 1024 * 1024 < 2**22 <= 2 * 1024 * 2048
    assert not mod._use_tiled(small, small, False, 0.0)
    big = np.zeros((1, 2048, 8), np.float32)
    assert mod._use_tiled(big, big, False, 0.0)
    assert not mod._use_tiled(big, big, True, 0.0) and not mod._use_tiled(big, big, False, 0.1)
    assert not mod._use_tiled(large, large, False, 0.0)


def test_tiled_refuses_weights_dropout_and_unknown_names():
    x = np.zeros((1, 3, 8))
    mod = mhattn.MultiHeadAttention(8, 2, dtype="float64", dropout=0.5, attention="tiled")
    with pytest.raises(ValueError, match="need_weights=False"):
        mod.forward(x)
    with pytest.raises(ValueError, match="need_weights=False"):
        mod.forward(x, need_weights=False, training=True)
    assert mod.forward(x, need_weights=False)[1] is None
    with pytest.raises(ValueError, match="'auto', 'plain' or 'tiled'"):
        mhattn.MultiHeadAttention(8, 2, attention="flash")


@pytest.mark.torch
@pytest.mark.parametrize("name", ["self_f64", "cross_f64", "bool_mask_f64", "float_mask_f64", "padding_f64", "self_f32"])
def test_tiled_against_torch(name):
    pytest.importorskip("torch")
    case = build_case(name, seed=11)
    ref = run_torch(name, case)
    d_model, num_heads, kdim, vdim, bias, dtype, self_attn, _ = CASES[name]
    mod = mhattn.MultiHeadAttention(d_model, num_heads, kdim=kdim, vdim=vdim, bias=bias, dtype=dtype, attention="tiled")
    mod.load_torch_state_dict({k[6:]: v for k, v in case.items() if k.startswith("state/")})
    masks = {m: case[m] for m in ("attn_mask", "key_padding_mask") if m in case}
    out, _ = mod.forward(case["query"], case.get("key"), case.get("value"), need_weights=False, **masks)
    dq, dk, dv = mod.backward(case["dout"])
    ours = {"out": out, "dquery": dq + dk + dv if self_attn else dq}
    ours.update({f"grad/{n}": g for n, g in params_to_torch(mod.grads, d_model, mod.kdim, mod.vdim).items()})
    tol = 1e-10 if dtype == "float64" else 1e-5
    for key, value in ours.items():
        assert rel_error(value, ref[key]) <= tol, f"{name}/{key}: {rel_error(value, ref[key]):.2e}"
