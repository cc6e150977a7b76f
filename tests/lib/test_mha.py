"""MultiHeadAttention's claims, each checked with a value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xp_testing import xp_assert_close, xp_assert_equal

import mhattn
from mhattn import MultiHeadAttention
from mhattn import functional as F


def arr(rng, *shape, dtype="float64"):
    return mhattn.asarray(rng.standard_normal(shape).astype(dtype))


def np_(x):
    return mhattn.to_numpy(x)


@pytest.mark.usefixtures("backend")
def test_shapes_and_weight_layouts(rng):
    mod = MultiHeadAttention(8, 2, kdim=3, vdim=5, seed=0)
    q, k, v = arr(rng, 2, 4, 8, dtype="float32"), arr(rng, 2, 6, 3, dtype="float32"), arr(rng, 2, 6, 5, dtype="float32")
    out, w = mod(q, k, v)
    assert out.shape == (2, 4, 8) and w.shape == (2, 4, 6)
    _, w_heads = mod(q, k, v, average_attn_weights=False)
    assert w_heads.shape == (2, 2, 4, 6)
    xp_assert_close(np_(w_heads).mean(axis=1), np_(w), rtol=1e-6)
    assert mod(q, k, v, need_weights=False)[1] is None
    assert {n: tuple(p.shape) for n, p in mod.params.items()} == {
        "W_q": (8, 8), "W_k": (3, 8), "W_v": (5, 8), "W_o": (8, 8), "b_q": (8,), "b_k": (8,), "b_v": (8,), "b_o": (8,)
    }  # fmt: skip


@pytest.mark.usefixtures("backend")
def test_attention_rows_sum_to_one(rng):
    _, w = MultiHeadAttention(12, 3, dtype="float64", seed=0)(arr(rng, 2, 5, 12), average_attn_weights=False)
    xp_assert_close(np_(w).sum(axis=-1), 1.0, rtol=1e-12, check_shape=False)
    assert np_(w).min() > 0


@pytest.mark.usefixtures("backend")
def test_permuting_tokens_permutes_outputs(rng):
    mod = MultiHeadAttention(12, 3, dtype="float64", seed=0)
    x = arr(rng, 1, 6, 12)
    perm = np.array([3, 0, 5, 1, 4, 2])
    out, _ = mod(x)
    out_p, _ = mod(mhattn.asarray(np_(x)[:, perm]))
    xp_assert_close(np_(out_p), np_(out)[:, perm], rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("backend")
def test_multi_head_equals_concat_of_single_heads(rng):
    """head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i) on its own d_k columns, then concat and W^O."""
    d, h = 12, 3
    d_k = d // h
    mod = MultiHeadAttention(d, h, dtype="float64", seed=0)
    p = {k: np_(v) for k, v in mod.params.items()}
    x = rng.standard_normal((1, 4, d))
    heads = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        q, k, v = (x @ p[W][:, cols] + p[b][cols] for W, b in (("W_q", "b_q"), ("W_k", "b_k"), ("W_v", "b_v")))
        s = q @ k.swapaxes(-1, -2) / math.sqrt(d_k)
        a = np.exp(s - s.max(-1, keepdims=True))
        heads.append((a / a.sum(-1, keepdims=True)) @ v)
    expected = np.concatenate(heads, axis=-1) @ p["W_o"] + p["b_o"]
    xp_assert_close(np_(mod(mhattn.asarray(x))[0]), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("backend")
def test_masked_position_has_no_influence(rng):
    """Changing a padded key/value by any amount changes nothing, bit for bit."""
    mod = MultiHeadAttention(8, 2, dtype="float64", seed=0)
    q, kv = arr(rng, 2, 3, 8), rng.standard_normal((2, 5, 8))
    pad = np.zeros((2, 5), dtype=bool)
    pad[:, 4] = True
    out, _ = mod(q, mhattn.asarray(kv), key_padding_mask=mhattn.asarray(pad))
    kv2 = kv.copy()
    kv2[:, 4] = 1e6
    out2, w2 = mod(q, mhattn.asarray(kv2), key_padding_mask=mhattn.asarray(pad))
    xp_assert_equal(out, out2)
    assert abs(np_(w2)[:, :, 4]).max() == 0.0
    _, dk, dv = mod.backward(arr(rng, 2, 3, 8))
    assert abs(np_(dk)[:, 4]).max() == 0.0 and abs(np_(dv)[:, 4]).max() == 0.0


@pytest.mark.usefixtures("backend")
def test_query_with_no_allowed_key_outputs_b_o_with_finite_gradients(rng):
    mod = MultiHeadAttention(8, 2, dtype="float64", seed=0)
    mod.params["b_o"] = mhattn.asarray(np.linspace(-1, 1, 8))
    mask = np.zeros((3, 3), dtype=bool)
    mask[2] = True
    x = arr(rng, 1, 3, 8)
    out, w = mod(x, attn_mask=mhattn.asarray(mask))
    xp_assert_equal(np_(out)[0, 2], np.linspace(-1, 1, 8))
    assert abs(np_(w)[0, 2]).max() == 0.0
    grads = mod.backward(arr(rng, 1, 3, 8))
    assert all(np.isfinite(np_(g)).all() for g in list(grads) + list(mod.grads.values()))


@pytest.mark.usefixtures("backend")
def test_float_mask_of_minus_inf_equals_bool_mask(rng):
    mod = MultiHeadAttention(8, 2, dtype="float64", seed=0)
    x = arr(rng, 2, 4, 8)
    causal = mhattn.causal_mask(4)
    as_float = mhattn.asarray(np.where(np_(causal), -np.inf, 0.0))
    xp_assert_equal(mod(x, attn_mask=causal)[0], mod(x, attn_mask=as_float)[0])


@pytest.mark.usefixtures("backend")
def test_causal_mask_picture():
    m = np_(mhattn.causal_mask(3, 4))
    assert m.dtype == bool
    xp_assert_equal(m, [[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]], check_dtype=False)


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_is_kept_everywhere(rng, dtype):
    mod = MultiHeadAttention(8, 2, dtype=dtype, seed=0, dropout=0.2)
    x = arr(rng, 2, 3, 8, dtype=dtype)
    float_mask = mhattn.asarray(rng.standard_normal((3, 3)).astype(dtype))
    out, w = mod(x, attn_mask=float_mask, head_mask=mhattn.asarray(np.ones(2, dtype)), training=True)
    grads = mod.backward(arr(rng, 2, 3, 8, dtype=dtype))
    want = getattr(mhattn.backend.current_array_module(), dtype)  # the leg's own dtype object
    for a in [out, w, *grads, *mod.grads.values()]:
        assert a.dtype == want


@pytest.mark.usefixtures("backend")
def test_large_logits_do_not_overflow(rng):
    """Scores of ~1e6 would overflow exp() without the max subtraction (RuntimeWarnings are errors here)."""
    mod = MultiHeadAttention(8, 2, dtype="float32", seed=0)
    x = arr(rng, 1, 4, 8, dtype="float32") * 3e3
    out, w = mod(x, average_attn_weights=False)
    mod.backward(mhattn.asarray(np.ones((1, 4, 8), np.float32)))
    assert np.isfinite(np_(out)).all() and np.isfinite(np_(mod.grads["W_q"])).all()
    xp_assert_close(np_(w).sum(-1), 1.0, rtol=1e-5, check_dtype=False, check_shape=False)


@pytest.mark.usefixtures("backend")
def test_dropout_only_in_training_and_seeded(rng):
    x = arr(rng, 2, 5, 8)
    a, b = (MultiHeadAttention(8, 2, dtype="float64", dropout=0.5, seed=3) for _ in range(2))
    eval_out, _ = a(x)
    out_a, w_a = a(x, training=True)
    out_b, _ = b(x, training=True)
    xp_assert_equal(eval_out, b(x)[0])  # no dropout outside training
    xp_assert_equal(out_a, out_b)  # same seed, same masks
    assert abs(np_(out_a) - np_(eval_out)).max() > 1e-3
    xp_assert_close(np_(w_a).sum(-1), 1.0, rtol=1e-12, check_shape=False)  # weights are returned before dropout


@pytest.mark.usefixtures("backend")
def test_head_mask_zero_removes_exactly_that_head(rng):
    d, h = 12, 3
    mod = MultiHeadAttention(d, h, dtype="float64", seed=0)
    x = arr(rng, 2, 4, d)
    out_all, _ = mod(x)
    xp_assert_close(mod(x, head_mask=mhattn.asarray(np.ones(h)))[0], out_all, rtol=0, atol=0)
    out_pruned, _ = mod(x, head_mask=mhattn.asarray(np.array([1.0, 0.0, 1.0])))
    ref = MultiHeadAttention(d, h, dtype="float64", seed=0)
    W_o = np_(ref.params["W_o"]).copy()
    W_o[4:8] = 0.0  # head 1's rows of W^O
    ref.params["W_o"] = mhattn.asarray(W_o)
    xp_assert_close(out_pruned, ref(x)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("backend")
def test_head_mask_gradient_per_example_sums_to_shared(rng):
    mod = MultiHeadAttention(8, 4, dtype="float64", seed=0)
    x, dout = arr(rng, 3, 5, 8), arr(rng, 3, 5, 8)
    mod(x, head_mask=mhattn.asarray(np.ones((3, 4))))
    mod.backward(dout)
    per_example = np_(mod.head_mask_grad)
    mod(x, head_mask=mhattn.asarray(np.ones(4)))
    mod.backward(dout)
    assert per_example.shape == (3, 4) and tuple(mod.head_mask_grad.shape) == (4,)
    xp_assert_close(per_example.sum(0), np_(mod.head_mask_grad), rtol=1e-12)
    mod(x)
    mod.backward(dout)
    assert mod.head_mask_grad is None and "head_mask" not in mod.grads  # no head mask, no gradient; never in grads


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("kdim,vdim", [(None, None), (5, 7)])
def test_torch_state_dict_round_trip(kdim, vdim):
    a = MultiHeadAttention(8, 2, kdim=kdim, vdim=vdim, seed=0)
    b = MultiHeadAttention(8, 2, kdim=kdim, vdim=vdim, seed=1)
    sd = a.to_torch_state_dict()
    packed = kdim is None
    assert ("in_proj_weight" in sd) == packed and ("q_proj_weight" in sd) != packed
    assert sd["out_proj.weight"].shape == (8, 8) and sd["in_proj_bias"].shape == (24,)
    b.load_torch_state_dict(sd)
    for n in a.params:
        xp_assert_equal(a.params[n], b.params[n])


def test_parameter_counts():
    assert MultiHeadAttention(512, 8).num_parameters() == 4 * 512**2 + 4 * 512
    assert MultiHeadAttention(512, 8, bias=False).num_parameters() == 4 * 512**2
    # eight heads of 64 have as many parameters as one head of 512
    assert MultiHeadAttention(512, 8).num_parameters() == MultiHeadAttention(512, 1).num_parameters()
    assert MultiHeadAttention(8, 2, kdim=3, vdim=5).num_parameters() == 8 * 8 + 3 * 8 + 5 * 8 + 8 * 8 + 4 * 8


@pytest.mark.usefixtures("backend")
def test_init_follows_torch_bounds_and_seed():
    d = 64
    a, b, c = MultiHeadAttention(d, 4, seed=0), MultiHeadAttention(d, 4, seed=0), MultiHeadAttention(d, 4, seed=1)
    xp_assert_equal(a.params["W_q"], b.params["W_q"])
    assert abs(np_(a.params["W_q"]) - np_(c.params["W_q"])).max() > 0
    in_bound, out_bound = math.sqrt(6 / (4 * d)), 1 / math.sqrt(d)
    for n in ("W_q", "W_k", "W_v"):
        assert 0.9 * in_bound < abs(np_(a.params[n])).max() <= in_bound
    assert 0.9 * out_bound < abs(np_(a.params["W_o"])).max() <= out_bound
    assert abs(np_(a.params["b_q"])).max() == 0.0
    sep = MultiHeadAttention(d, 4, kdim=32, seed=0)
    assert abs(np_(sep.params["W_k"])).max() <= math.sqrt(6 / (d + 32))


@pytest.mark.parametrize(
    "extra",
    [{}, {"is_causal": True}, {"key_padding_mask": np.zeros((0, 5), bool)}, {"head_mask": np.ones((0, 2))}, {"dropout_p": 0.5}],
    ids=["plain", "causal", "key_padding_mask", "head_mask", "dropout"],
)
@pytest.mark.filterwarnings("error")
def test_empty_batch_runs_forward_and_backward(backend, extra):
    """B = 0 is a batch like any other: outputs and gradients of the right shapes, zero parameter gradients."""
    rng = np.random.default_rng(0)
    d, h, T, S = 8, 2, 3, 5
    params = {n: backend.floats(rng.standard_normal((d, d))) for n in ("W_q", "W_k", "W_v", "W_o")}
    params.update({n: backend.floats(rng.standard_normal(d)) for n in ("b_q", "b_k", "b_v", "b_o")})
    kw = {k: backend.floats(v) if k == "head_mask" else backend.asarray(v) for k, v in extra.items() if k != "dropout_p"}
    if "dropout_p" in extra:
        kw.update(dropout_p=extra["dropout_p"], rng=rng)
    query, key = backend.floats(np.zeros((0, T, d))), backend.floats(np.zeros((0, S, d)))
    out, w, cache = F.multi_head_attention_forward(query, key, key, params, h, attn_mask=backend.asarray(np.eye(T, S) < 0), **kw)
    dq, dk, dv, grads, dhead_mask = F.multi_head_attention_backward(backend.floats(np.zeros((0, T, d))), cache)
    assert (tuple(out.shape), tuple(w.shape), tuple(dq.shape), tuple(dk.shape)) == ((0, T, d), (0, h, T, S), (0, T, d), (0, S, d))
    assert all(backend.is_here(a) for a in (out, w, dq, dk, dv, *grads.values()))
    assert sorted(grads) == sorted(params) and all(np.all(np_(g) == 0) for g in grads.values())
    assert dhead_mask is None if "head_mask" not in extra else tuple(dhead_mask.shape) == (0, h)
