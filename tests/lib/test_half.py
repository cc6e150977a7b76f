"""float16 modules: float16 in, float16 out, computed in float32 (``mhattn.nn.half``).

Follows PyTorch's ``test_multihead_attention_dtype`` and ``test_multihead_attention_dtype_batch_first``
(``test/nn/test_multihead_attention.py``: a half module keeps the input's shape and dtype, batch first or not),
with values: mhattn's float16 results are the float32 results rounded once, so they sit within float16's
half-ulp (2**-11 relative) of the float64 results of the same float16 parameters and inputs: stated tolerance
``rtol=1e-3, atol=1e-4``. Against torch's own float16 module (which rounds every intermediate to float16 on a CPU)
the stated tolerance is ``rtol=atol=1e-2``, about ten float16 ulps at values of order 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LEGS
from xp_testing import xp_assert_close

import mhattn
from mhattn.nn.torch_io import params_to_torch

D, H, B, T, S = 8, 2, 2, 3, 4
HALF_TOL = dict(rtol=1e-3, atol=1e-4)  # float16 rounding of float32 results, against float64
TORCH_HALF_TOL = dict(rtol=1e-2, atol=1e-2)  # against torch's float16 module


def _run(mod, backend, x, dtype, kw):
    a = {n: backend.asarray(v, dtype=dtype if n != "mask" else None) for n, v in x.items()}
    out, w = mod(a["q"], a["k"], a["v"], attn_mask=a["mask"], average_attn_weights=False, **kw)
    grads = mod.backward(a["dout"])
    return [out, w, *grads], dict(mod.grads)


@pytest.mark.parametrize("backend", LEGS, indirect=True)
@pytest.mark.parametrize("layout", ["batch_first", "seq_first"])
def test_float16_module_returns_float16_within_half_an_ulp_of_float64(backend, layout, rng):
    """float16 in, float16 out (output, weights, every gradient), each the float64 value to float16's rounding;
    array-api-strict (no float16 in the standard) refuses the dtype when the module is made."""
    if backend.name == "array_api_strict":  # the array API standard has no float16: the module says so
        with pytest.raises(TypeError, match=r"dtype float16 has no counterpart in array_api_strict"):
            mhattn.MultiHeadAttention(D, H, dtype="float16")
        return
    first = layout == "batch_first"
    shape = (B, T, D) if first else (T, B, D)
    kv = (B, S, D) if first else (S, B, D)
    x = {"q": rng.standard_normal(shape), "k": rng.standard_normal(kv), "v": rng.standard_normal(kv)}
    x.update(dout=rng.standard_normal(shape), mask=rng.random((T, S)) < 0.3)
    x["mask"][:, 0] = False
    x = {n: v.astype(np.float16).astype(np.float64) if v.dtype != bool else v for n, v in x.items()}  # float16 values
    half = mhattn.MultiHeadAttention(D, H, dtype="float16", seed=0, batch_first=first, add_bias_kv=True)
    wide = mhattn.MultiHeadAttention(D, H, dtype="float64", batch_first=first, add_bias_kv=True)
    wide.load_torch_state_dict(half.to_torch_state_dict())
    got, got_grads = _run(half, backend, x, "float16", {})
    want, want_grads = _run(wide, backend, x, "float64", {})
    for g, w in zip([*got, *got_grads.values()], [*want, *want_grads.values()], strict=True):
        assert backend.is_here(g) and "float16" in str(g.dtype) and tuple(g.shape) == tuple(w.shape)
        xp_assert_close(backend.to_numpy(g).astype(np.float64), backend.to_numpy(w), **HALF_TOL)


def test_float16_module_refuses_float32_inputs():
    mod = mhattn.MultiHeadAttention(D, H, dtype="float16")
    with pytest.raises(TypeError, match=r"query has dtype float32 but the module is float16"):
        mod(np.zeros((B, T, D), np.float32))
    mod(np.zeros((B, T, D), np.float16))
    with pytest.raises(TypeError, match=r"dout has dtype float32, expected float16"):
        mod.backward(np.zeros((B, T, D), np.float32))


@pytest.mark.torch
def test_float16_module_matches_torchs_float16_module():
    """torch's float16 MultiheadAttention on a CPU, the same weights and inputs: output, weights and every
    gradient within the stated tolerance."""
    torch = pytest.importorskip("torch")
    mod = mhattn.MultiHeadAttention(D, H, dtype="float16", seed=1, batch_first=False)
    ref = torch.nn.MultiheadAttention(D, H, dtype=torch.float16)
    ref.load_state_dict({n: torch.as_tensor(a) for n, a in mod.to_torch_state_dict().items()})
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((T, B, D)).astype(np.float16), rng.standard_normal((S, B, D)).astype(np.float16)
    dout = rng.standard_normal((T, B, D)).astype(np.float16)
    out, w = mod(q, k, k)
    dq, dk, dv = mod.backward(dout)
    tq, tk = torch.tensor(q, requires_grad=True), torch.tensor(k, requires_grad=True)
    t_out, t_w = ref(tq, tk, tk)
    t_out.backward(torch.as_tensor(dout))
    pairs = [(out, t_out), (w, t_w), (dq, tq.grad), (dk + dv, tk.grad)]
    grads = params_to_torch(mod.grads, D, D, D)
    pairs += [(grads[n], p.grad) for n, p in ref.named_parameters()]
    for got, want in pairs:
        assert got.dtype == np.float16
        xp_assert_close(got.astype(np.float32), want.detach().float().numpy(), **TORCH_HALF_TOL)


def test_float16_on_the_tiled_path_equals_the_plain_path():
    """The tiled path (no weights formed) takes float16 modules too: the same float32 steps, so the same float16
    results as the plain path to float16's rounding."""
    rng = np.random.default_rng(3)
    x, dout = rng.standard_normal((B, 6, D)).astype(np.float16), rng.standard_normal((B, 6, D)).astype(np.float16)
    res = []
    for attention in ("plain", "tiled"):
        mod = mhattn.MultiHeadAttention(D, H, dtype="float16", seed=2, attention=attention)
        out, _ = mod(x, need_weights=False, is_causal=True)
        res.append([out, *mod.backward(dout), mod.grads["W_q"]])
    for got, want in zip(*res, strict=True):
        assert got.dtype == np.float16
        xp_assert_close(got.astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=1e-3)


BF16_TOL = dict(rtol=8e-3, atol=1e-3)  # bfloat16 rounding (half-ulp 2**-9) of float32 results, against float64


@pytest.mark.torch
@pytest.mark.parametrize("backend", [leg for leg in LEGS if leg.values[0][0] == "torch"], indirect=True)
def test_bfloat16_module_on_torch_returns_bfloat16_within_half_an_ulp_of_float64(backend, rng):
    """Follows ``test_multihead_attention_dtype`` for the dtype torch alone has: bfloat16 parameters, output, weights
    and gradients, each the float64 value of the same (bfloat16-valued) parameters to bfloat16's rounding; the state
    dict round-trips through float32 exactly."""
    torch = pytest.importorskip("torch")
    x = {"q": rng.standard_normal((T, B, D)), "k": rng.standard_normal((S, B, D)), "v": rng.standard_normal((S, B, D))}
    x.update(dout=rng.standard_normal((T, B, D)), mask=np.triu(np.ones((T, S), bool), 1))
    as_bf16 = lambda a: torch.as_tensor(a).to(torch.bfloat16).double().numpy()  # noqa: E731
    x = {n: as_bf16(v) if v.dtype != bool else v for n, v in x.items()}
    low = mhattn.MultiHeadAttention(D, H, dtype=torch.bfloat16, seed=0, batch_first=False, add_zero_attn=True)
    assert low.dtype == "bfloat16" and all(p.dtype == torch.bfloat16 for p in low.params.values())
    wide = mhattn.MultiHeadAttention(D, H, dtype="float64", batch_first=False, add_zero_attn=True)
    sd = low.to_torch_state_dict()
    wide.load_torch_state_dict(sd)
    low.load_torch_state_dict(sd)  # float32 host values cast back into the bfloat16 parameters: unchanged
    a = {n: torch.as_tensor(v).to(torch.bfloat16) if v.dtype != bool else torch.as_tensor(v) for n, v in x.items()}
    out, w = low(a["q"], a["k"], a["v"], attn_mask=a["mask"], average_attn_weights=False)
    got = [out, w, *low.backward(a["dout"]), *low.grads.values()]
    want, want_grads = _run(wide, backend, x, "float64", {})
    for g, w_ in zip(got, [*want, *want_grads.values()], strict=True):
        assert g.dtype == torch.bfloat16 and tuple(g.shape) == tuple(w_.shape)
        xp_assert_close(g.double().numpy(), backend.to_numpy(w_), **BF16_TOL)
