"""Edge cases from public bug reports of other libraries, each as a kind, on the functional ops.

- a query row hidden by a large *finite* mask value (-1e9, finfo.min): the tiled backward gives the plain path's
  gradients, finite (``S - L`` would cancel to nothing when ``L`` is as large as the mask);
- dtypes other than float32/float64 reaching the tiled path: a clear TypeError, or (a float mask of another
  width) the same numbers as a mask of ``q``'s dtype;
- an empty batch (B = 0) on every path: right shapes, no warning, a cross-entropy of 0.0 with zero gradients.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from xp_testing import xp_assert_equal

from mhattn.functional.attention import scaled_dot_product_attention_backward, scaled_dot_product_attention_forward
from mhattn.functional.attention_tiled import tiled_attention_backward, tiled_attention_forward
from mhattn.functional.embedding import embedding_backward, embedding_forward
from mhattn.functional.encoder import encoder_block_backward, encoder_block_forward
from mhattn.functional.feedforward import feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.functional.transformer import transformer_backward, transformer_forward
from mhattn.gradcheck import rel_error
from mhattn.nn.init import init_encoder_block
from mhattn.nn.transformer import ModelConfig, init_params

B, h, T, S, D = 2, 2, 7, 6, 4


def _qkv(dtype, B=B, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in ((B, h, T, D), (B, h, S, D), (B, h, S, D), (B, h, T, D))]


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 1e-5)])
@pytest.mark.parametrize("big", [-1e9, "finfo.min"])
@pytest.mark.parametrize("block_k", [None, 4])
def test_a_row_hidden_by_a_large_finite_mask_value_gets_the_plain_gradients(dtype, tol, big, block_k):
    q, k, v, dout = _qkv(dtype)
    value = np.finfo(dtype).min if big == "finfo.min" else big
    mask = np.zeros((T, S), dtype)
    mask[2] = value  # query 2 sees every key only through the huge penalty: a uniform-ish row, lse ~ value
    mask[4, :3] = value  # query 4 has three ordinary keys left
    out, _, cache = scaled_dot_product_attention_forward(q, k, v, mask)
    want = scaled_dot_product_attention_backward(dout, cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out_t, lse, cache_t = tiled_attention_forward(q, k, v, mask, block_q=3, block_k=block_k)
        got = tiled_attention_backward(dout, cache_t)
    assert np.isfinite(lse).all() and lse[0, 0, 2] < value / 2  # the row's L is as large as the mask
    for name, a, b in zip(("out", "dq", "dk", "dv"), (out, *want), (out_t, *got), strict=True):
        assert np.isfinite(b).all(), name
        assert rel_error(a, b) <= tol, f"{name}: {rel_error(a, b):.2e}"


@pytest.mark.parametrize("dtype", ["float16", "int64", "int32", "bool"])
def test_tiled_refuses_dtypes_other_than_float32_and_float64(dtype):
    q = np.ones((1, 1, 3, 4), dtype)
    with pytest.raises(TypeError, match=f"float32 or float64.*, got {dtype}"):
        tiled_attention_forward(q, q, q)


@pytest.mark.parametrize("mask_dtype", ["float16", "float64"])
def test_a_float_mask_of_another_width_gives_the_numbers_of_one_in_q_dtype(mask_dtype):
    q, k, v, dout = _qkv("float32")
    rng = np.random.default_rng(3)
    mask = np.where(rng.random((T, S)) < 0.3, -np.inf, rng.standard_normal((T, S))).astype(mask_dtype)
    mask[1] = -1e30 if mask_dtype == "float64" else -np.inf  # beyond float32's range: -inf, as a cast would give
    ref = tiled_attention_forward(q, k, v, np.where(mask < np.finfo(np.float32).min, -np.inf, mask).astype(np.float32))
    got = tiled_attention_forward(q, k, v, mask)
    assert got[0].dtype == np.float32 and got[2].mask.dtype == np.float32
    xp_assert_equal(got[0], ref[0])
    for a, b in zip(tiled_attention_backward(dout, ref[2]), tiled_attention_backward(dout, got[2]), strict=True):
        xp_assert_equal(a, b)


def _no_warning(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return f(*args, **kwargs)


@pytest.mark.parametrize("kind, causal", [(None, False), ("bool", True), ("float", False)])
def test_empty_batch_on_the_tiled_path(backend, kind, causal):
    q, k, v, dout = (backend.asarray(a) for a in _qkv("float64", B=0))
    mask = {None: None, "bool": np.zeros((0, 1, T, S), bool), "float": np.zeros((T, S))}[kind]
    mask = None if mask is None else backend.asarray(mask)
    out, lse, cache = _no_warning(tiled_attention_forward, q, k, v, mask, causal=causal)
    grads = _no_warning(tiled_attention_backward, dout, cache)
    assert out.shape == (0, h, T, D) and lse.shape == (0, h, T)
    assert [g.shape for g in grads] == [(0, h, T, D), (0, h, S, D), (0, h, S, D)]
    assert all(backend.is_here(a) for a in (out, lse, *grads))


def test_empty_batch_on_embedding_layernorm_feedforward(backend):
    rng = np.random.default_rng(0)
    W = backend.asarray(rng.standard_normal((5, 4)))
    e, cache = _no_warning(embedding_forward, backend.asarray(np.zeros((0, 3), np.int64)), W)
    dW = _no_warning(embedding_backward, backend.asarray(np.zeros((0, 3, 4))), cache)
    assert e.shape == (0, 3, 4) and dW.shape == (5, 4) and not backend.to_numpy(dW).any()
    x = backend.asarray(np.zeros((0, 3, 4)))
    g, b = backend.asarray(np.ones(4)), backend.asarray(np.zeros(4))
    out, cache = _no_warning(layernorm_forward, x, g, b)
    dx, dg, db = _no_warning(layernorm_backward, x, cache)
    assert out.shape == dx.shape == (0, 3, 4) and dg.shape == db.shape == (4,) and not backend.to_numpy(dg).any()
    W1, b1, W2, b2 = (backend.asarray(rng.standard_normal(s)) for s in ((4, 8), (8,), (8, 4), (4,)))
    out, cache = _no_warning(feedforward_forward, x, W1, b1, W2, b2)
    grads = _no_warning(feedforward_backward, x, cache)
    assert out.shape == (0, 3, 4) and [g.shape for g in grads] == [(0, 3, 4), (4, 8), (8,), (8, 4), (4,)]
    assert all(backend.is_here(a) and not backend.to_numpy(a).any() for a in grads)


@pytest.mark.parametrize("targets", [np.zeros((0, 3), np.int64), np.full((2, 3), -100)], ids=["empty batch", "all ignored"])
def test_cross_entropy_of_no_counted_target_is_zero_with_zero_gradient(backend, targets):
    z = backend.asarray(np.random.default_rng(1).standard_normal((*targets.shape, 5)))
    loss, cache = _no_warning(cross_entropy_forward, z, backend.asarray(targets))
    dz = _no_warning(cross_entropy_backward, 1.0, cache)
    assert loss == 0.0 and math.copysign(1.0, loss) == 1.0  # +0.0, not -0.0 nor nan
    assert dz.shape == z.shape and backend.is_here(dz) and not backend.to_numpy(dz).any()


@pytest.mark.parametrize("causal", [False, True])
def test_empty_batch_through_an_encoder_block_and_the_model(backend, causal):
    params = {n: backend.asarray(a) for n, a in init_encoder_block(8, 16, np.random.default_rng(0), "float64").items()}
    x = backend.asarray(np.zeros((0, 5, 8)))
    out, w, cache = _no_warning(encoder_block_forward, x, params, 2)
    dx, grads, _ = _no_warning(encoder_block_backward, x, cache)
    assert out.shape == dx.shape == (0, 5, 8) and w.shape == (0, 2, 5, 5)
    assert all(grads[n].shape == params[n].shape and not backend.to_numpy(grads[n]).any() for n in params)
    cfg = ModelConfig(vocab_size=7, output_sizes=(6, 3), d_model=8, num_heads=2, num_layers=2, d_ff=16)
    model = init_params(cfg, np.random.default_rng(1), "float64")
    ids = backend.asarray(np.zeros((0, 5), np.int64))
    logits, weights, cache = _no_warning(transformer_forward, ids, model, 2, 2, 2, causal=causal)
    grads, _ = _no_warning(transformer_backward, [backend.asarray(np.zeros((0, 5, 6))), None], cache)
    assert [a.shape for a in logits] == [(0, 5, 6), (0, 5, 3)] and [a.shape for a in weights] == [(0, 2, 5, 5)] * 2
    assert all(grads[n].shape == model[n].shape and backend.is_here(grads[n]) for n in model)
