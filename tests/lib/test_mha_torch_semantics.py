"""What torch's MultiheadAttention accepts and refuses, and where mhattn differs on purpose (docs/torch_parity.md).

Follows PyTorch's ``test/nn/test_multihead_attention.py``: ``test_multihead_attn_invalid_shape`` (ranks, 1-D masks),
``test_multihead_attn_3d_attn_mask`` (a ``(B*h, T, S)`` mask equals each sample's own 2-D mask),
``test_multihead_attn_nested_tensor_outside_fast_path`` (refused here, clearly), and ``test_transformers.py``'s
``is_causal`` checks. The layout and extra-key claims are checked on every leg without torch; torch's own behaviour
where mhattn differs is asserted beside mhattn's, so a change on either side shows.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LEGS
from xp_testing import xp_assert_close

import mhattn
from mhattn import functional as F
from mhattn.gradcheck import numerical_gradient, rel_error

D, H = 8, 2


def _module(**kw):
    mod = mhattn.MultiHeadAttention(D, H, dtype="float64", seed=3, **kw)
    rng = np.random.default_rng(4)
    for n, p in mod.params.items():  # nonzero biases
        mod.params[n] = p + mhattn.asarray(0.1 * rng.standard_normal(tuple(p.shape)))
    return mod


@pytest.mark.parametrize("backend", LEGS, indirect=True)
def test_unbatched_and_sequence_first_inputs_equal_the_batch_first_call(backend, rng):
    """Follows ``test_multihead_attn_3d_attn_mask`` (each sample alone, unbatched, equals its row of the batched
    call with a ``(B*h, T, S)`` mask) and the seq-first layout of ``test_multihead_attention``: the same output,
    weights and every gradient in each layout."""
    B, T, S = 3, 4, 5
    q, k, v = rng.standard_normal((B, T, D)), rng.standard_normal((B, S, D)), rng.standard_normal((B, S, D))
    dout, m = rng.standard_normal((B, T, D)), rng.random((B * H, T, S)) < 0.3
    m[:, :, 0] = False
    a = lambda x: backend.asarray(x)  # noqa: E731
    first = _module()
    out, w = first(a(q), a(k), a(v), attn_mask=a(m), average_attn_weights=False)
    grads = [backend.to_numpy(g) for g in first.backward(a(dout))]
    seq = _module(batch_first=False)
    t = lambda x: a(x.transpose(1, 0, 2))  # noqa: E731
    s_out, s_w = seq(t(q), t(k), t(v), attn_mask=a(m), average_attn_weights=False)
    xp_assert_close(backend.to_numpy(s_out).transpose(1, 0, 2), backend.to_numpy(out), rtol=1e-12, atol=1e-12)
    xp_assert_close(backend.to_numpy(s_w), backend.to_numpy(w), rtol=1e-12, atol=1e-12)
    for g, want in zip(seq.backward(t(dout)), grads, strict=True):
        xp_assert_close(backend.to_numpy(g).transpose(1, 0, 2), want, rtol=1e-12, atol=1e-12)
    for i in range(B):
        one = _module()
        o, wi = one(a(q[i]), a(k[i]), a(v[i]), attn_mask=a(m[i * H : (i + 1) * H]), average_attn_weights=False)
        assert tuple(o.shape) == (T, D) and tuple(wi.shape) == (H, T, S)
        xp_assert_close(backend.to_numpy(o), backend.to_numpy(out)[i], rtol=1e-12, atol=1e-12)
        xp_assert_close(backend.to_numpy(wi), backend.to_numpy(w)[i], rtol=1e-12, atol=1e-12)
        for g, want in zip(one.backward(a(dout[i])), grads, strict=True):
            assert tuple(g.shape) == want.shape[1:]
            xp_assert_close(backend.to_numpy(g), want[i], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", LEGS, indirect=True)
@pytest.mark.parametrize("extra", [dict(add_bias_kv=True), dict(add_zero_attn=True), dict(add_bias_kv=True, add_zero_attn=True)])
def test_extra_key_positions_gradients_equal_finite_differences(backend, extra, rng):
    """Step 1b's hand-written backward (bias_k, bias_v, the zero position) against centred differences, through the
    functional forward with a key padding mask and is_causal (the extra positions stay allowed)."""
    B, T, S = 2, 3, 4
    mod = _module(**extra)
    params = {n: backend.to_numpy(p) for n, p in mod.params.items()}
    x = [rng.standard_normal((B, T, D)), rng.standard_normal((B, S, D)), rng.standard_normal((B, S, D))]
    pad = np.zeros((B, S), bool)
    pad[0, -1] = True
    dout = rng.standard_normal((B, T, D))
    kw = dict(key_padding_mask=backend.asarray(pad), add_zero_attn=extra.get("add_zero_attn", False), is_causal=True)

    def run(inputs, p):
        return F.multi_head_attention_forward(
            *(backend.asarray(i) for i in inputs), {n: backend.asarray(v) for n, v in p.items()}, H, **kw
        )

    out, w, cache = run(x, params)
    assert tuple(w.shape) == (B, H, T, S + len(extra))
    dq, dk, dv, grads, _ = F.multi_head_attention_backward(backend.asarray(dout), cache)
    for i, g in enumerate((dq, dk, dv)):
        f = lambda z, i=i: backend.to_numpy(run([z if j == i else y for j, y in enumerate(x)], params)[0])  # noqa: E731
        assert rel_error(backend.to_numpy(g), numerical_gradient(f, x[i], dout)) < 1e-7
    for n in ("bias_k", "bias_v", "W_k", "b_v") if "add_bias_kv" in extra else ("W_k", "b_v"):
        f = lambda z, n=n: backend.to_numpy(run(x, {**params, n: z})[0])  # noqa: E731
        assert rel_error(backend.to_numpy(grads[n]), numerical_gradient(f, params[n], dout)) < 1e-7, n


def test_engine_refuses_extra_keys_and_the_module_falls_back_to_the_reference(rng):
    """The engine has no add_bias_kv: called with bias_k it raises rather than ignore it; the module takes the
    reference steps for it (one visible branch) and gives the reference's numbers."""
    from mhattn import kernels

    mod = _module(add_bias_kv=True)
    x = rng.standard_normal((2, 3, D))
    with pytest.raises(ValueError, match=r"the engine has no add_bias_kv"):
        kernels.multi_head_attention_forward(x, x, x, mod.params, H)
    out, _ = mod(x)
    assert mod._backward is F.multi_head_attention_backward
    xp_assert_close(out, F.multi_head_attention_forward(x, x, x, mod.params, H)[0], rtol=0, atol=0)


@pytest.mark.torch
def test_is_causal_is_mhattns_own_mask_where_torch_takes_it_as_a_hint():
    """Follows the ``is_causal`` checks of test_transformers (``test_is_causal_equals_upper_left``) and the
    MultiheadAttention docs: torch needs ``attn_mask`` with ``is_causal`` and may ignore the mask; mhattn applies
    its own causal mask and uses any ``attn_mask`` too. Where both are given the causal mask, they agree."""
    torch = pytest.importorskip("torch")
    ref = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64)
    mod = mhattn.MultiHeadAttention(D, H, dtype="float64")
    mod.load_torch_state_dict(ref.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 5, D))
    causal = np.triu(np.ones((5, 5), bool), 1)
    want, _ = ref(torch.as_tensor(x), torch.as_tensor(x), torch.as_tensor(x), attn_mask=torch.as_tensor(causal), is_causal=True)
    for kw in (dict(is_causal=True), dict(attn_mask=causal, is_causal=True), dict(attn_mask=causal)):
        xp_assert_close(mod(x, **kw)[0], want.detach().numpy(), rtol=1e-9, atol=1e-9)
    with pytest.raises(RuntimeError, match="attn_mask"):  # torch: a hint, so the mask must be given
        ref(torch.as_tensor(x), torch.as_tensor(x), torch.as_tensor(x), is_causal=True)
    one = np.random.default_rng(1).standard_normal((2, 1, D))  # T = S = 1 with a (2, 2) mask
    t1 = torch.as_tensor(one)
    ref(t1, t1, t1, attn_mask=torch.as_tensor(causal[:2, :2]), is_causal=True, need_weights=False)  # torch ignores it
    with pytest.raises(ValueError, match=r"attn_mask has shape \(2, 2\); expected \(T, S\)=\(1, 1\)"):
        mod(one, attn_mask=causal[:2, :2], is_causal=True)  # mhattn uses the mask, so its shape must fit


@pytest.mark.parametrize("backend", LEGS, indirect=True)
def test_shapes_torch_refuses_are_refused_with_the_argument_named(backend):
    """Follows ``test_multihead_attn_invalid_shape``: a 1-D attn_mask, a 1-D key_padding_mask for batched inputs,
    a 2-D one for unbatched inputs, key or value of another rank than the query, a 3-D mask of the wrong size."""
    mod = _module()
    a = lambda shape, dtype="float64": backend.asarray(np.zeros(shape), dtype=dtype)  # noqa: E731
    q3, q2 = a((4, 4, D)), a((4, D))
    with pytest.raises(ValueError, match=r"attn_mask must be 2-D \(T, S\)=\(4, 4\), 3-D or 4-D, got a 1-D mask"):
        mod(q3, attn_mask=a(4, "bool"))
    with pytest.raises(ValueError, match=r"attn_mask must be 2-D .* got a 1-D mask"):
        mod(q2, attn_mask=a(4, "bool"))
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(4,\); expected \(B, S\)=\(4, 4\)"):
        mod(q3, key_padding_mask=a(4, "bool"))
    with pytest.raises(ValueError, match=r"unbatched inputs take a key_padding_mask of shape \(S,\), got \(1, 4\)"):
        mod(q2, key_padding_mask=a((1, 4), "bool"))
    with pytest.raises(ValueError, match=r"query is 3-D but key has shape \(4, 8\)"):
        mod(q3, a((4, D)), q3)
    with pytest.raises(ValueError, match=r"query is 2-D but value has shape \(4, 4, 8\)"):
        mod(q2, q2, a((4, 4, D)))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(5, 4, 4\)"):
        mod(q2, attn_mask=a((5, 4, 4), "bool"))


@pytest.mark.torch
def test_1d_attn_mask_refused_as_torch_refuses_it():
    """The issue's case: ``[F, F, T, T]`` for (4, 4, 4) q, k, v: torch raises, and so does mhattn, naming the mask."""
    torch = pytest.importorskip("torch")
    m = np.array([False, False, True, True])
    x = np.zeros((4, 4, 4))
    with pytest.raises(AssertionError, match="attn_mask"):
        torch.nn.MultiheadAttention(4, 4)(*(torch.as_tensor(x),) * 3, attn_mask=torch.as_tensor(m))
    with pytest.raises(ValueError, match=r"attn_mask must be 2-D"):
        mhattn.MultiHeadAttention(4, 4, dtype="float64")(x, attn_mask=m)


@pytest.mark.torch
def test_a_query_with_no_key_is_finite_where_torch_gives_nan():
    """Follows ``test_multihead_self_attn_two_masks_fast_path``'s exclusion of fully masked rows: torch gives NaN
    there; mhattn gives weights 0, output ``b_o`` and finite gradients (a documented difference). Every other row
    equals torch's."""
    torch = pytest.importorskip("torch")
    ref = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        ref.out_proj.bias.add_(0.5)
    mod = mhattn.MultiHeadAttention(D, H, dtype="float64")
    mod.load_torch_state_dict(ref.state_dict())
    x = np.random.default_rng(2).standard_normal((2, 3, D))
    m = np.zeros((3, 3), bool)
    m[1] = True  # query 1 may see no key
    t = torch.as_tensor(x)
    want, _ = ref(t, t, t, attn_mask=torch.as_tensor(m))
    out, w = mod(x, attn_mask=m)
    assert torch.isnan(want[:, 1]).all() and np.isfinite(out).all()
    xp_assert_close(out[:, 1], np.broadcast_to(mod.params["b_o"], (2, D)), rtol=0, atol=1e-15)
    assert not w[:, 1].any()
    xp_assert_close(out[:, [0, 2]], want.detach().numpy()[:, [0, 2]], rtol=1e-9, atol=1e-9)
    assert all(np.isfinite(g).all() for g in mod.backward(np.ones_like(x)))


@pytest.mark.torch
def test_nested_tensors_are_refused_with_a_type_error():
    """Follows ``test_multihead_attn_nested_tensor_outside_fast_path``: torch takes jagged tensors; mhattn needs
    one dense shape and says so (TypeError naming nested tensors and the padded alternative)."""
    torch = pytest.importorskip("torch")
    nt = torch.nested.nested_tensor([torch.randn(4, 8), torch.randn(6, 8)], layout=torch.jagged, dtype=torch.float64)
    with mhattn.use_backend("torch"):
        mod = mhattn.MultiHeadAttention(8, 2, dtype="float64")
        with pytest.raises(TypeError, match=r"nested \(jagged\) tensors are not supported: pad .* key_padding_mask"):
            mod(nt)
        q = torch.zeros(1, 2, 4, 8, dtype=torch.float64)
        with pytest.raises(TypeError, match=r"nested \(jagged\) tensors are not supported"):
            F.scaled_dot_product_attention_forward(nt, q, q)


@pytest.mark.parametrize("backend", LEGS, indirect=True)
def test_static_k_and_static_v_gradients_equal_finite_differences(backend, rng):
    """Step 1b's static arrays: their gradients (in ``grads``) against centred differences, with add_zero_attn
    and a key padding mask; the key/value projections they replace get zero gradients."""
    B, T, S = 2, 3, 4
    mod = _module()
    params = {n: backend.to_numpy(p) for n, p in mod.params.items()}
    q, key = rng.standard_normal((B, T, D)), rng.standard_normal((B, S, D))
    static = {"static_k": rng.standard_normal((B * H, S, D // H)), "static_v": rng.standard_normal((B * H, S, D // H))}
    pad = np.zeros((B, S), bool)
    pad[1, -1] = True
    dout = rng.standard_normal((B, T, D))
    a = backend.asarray

    def run(st):
        p = {n: a(v) for n, v in params.items()}
        kw = {n: a(v) for n, v in st.items()}
        return F.multi_head_attention_forward(a(q), a(key), a(key), p, H, key_padding_mask=a(pad), add_zero_attn=True, **kw)

    _, _, cache = run(static)
    _, dkey, dvalue, grads, _ = F.multi_head_attention_backward(a(dout), cache)
    assert not backend.to_numpy(grads["W_k"]).any() and not backend.to_numpy(dkey + dvalue).any()
    for n in static:
        f = lambda z, n=n: backend.to_numpy(run({**static, n: z})[0])  # noqa: E731
        assert rel_error(backend.to_numpy(grads[n]), numerical_gradient(f, static[n], dout)) < 1e-7, n


def test_tiled_path_with_extra_keys_and_is_causal_equals_the_plain_path(rng):
    """The tiled path skips the tiles above the diagonal only without extra keys; with them (they sit after the
    diagonal and stay allowed) the causal mask is written out, and both paths agree."""
    x, dout = rng.standard_normal((2, 5, D)), rng.standard_normal((2, 5, D))
    results = []
    for attention in ("plain", "tiled"):
        mod = _module(attention=attention, add_bias_kv=True, add_zero_attn=True)
        out, _ = mod(x, need_weights=False, is_causal=True)
        results.append([out, *mod.backward(dout), *(mod.grads[n] for n in sorted(mod.grads))])
    for got, want in zip(*results, strict=True):
        xp_assert_close(got, want, rtol=1e-10, atol=1e-12)
