"""Property tests (hypothesis) over random shapes, head counts and masks."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from xp_testing import xp_assert_close, xp_assert_equal

import mhattn
from mhattn import MultiHeadAttention
from mhattn import functional as F
from mhattn.gradcheck import rel_error


@st.composite
def attention_setups(draw):
    B = draw(st.integers(1, 3))
    T = draw(st.integers(1, 6))
    S = draw(st.integers(1, 6))
    h = draw(st.integers(1, 4))
    d_k = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    mask_kind = draw(st.sampled_from([None, "bool", "padding", "float"]))
    mask = pad = None
    if mask_kind == "bool":
        mask = rng.random((T, S)) < draw(st.floats(0.0, 1.0))
    elif mask_kind == "padding":
        pad = rng.random((B, S)) < 0.5
    elif mask_kind == "float":
        mask = rng.standard_normal((B, h, T, S))
    return B, T, S, h, d_k, rng, mask, pad


def _allowed(mask, pad, B, h, T, S):
    allowed = np.ones((B, h, T, S), bool)
    if mask is not None and mask.dtype == bool:
        allowed &= ~mask
    if pad is not None:
        allowed &= ~pad[:, None, None, :]
    return allowed


def _with_inputs(setup):
    """``(B, T, S, h, d_model, rng, mask, pad, q, kv)``: the setup's sizes and masks, and float64 query and
    key/value inputs drawn from its generator (``q``: ``(B, T, d_model)``, ``kv``: ``(B, S, d_model)``)."""
    B, T, S, h, d_k, rng, mask, pad = setup
    d = h * d_k
    return B, T, S, h, d, rng, mask, pad, rng.standard_normal((B, T, d)), rng.standard_normal((B, S, d))


@settings(max_examples=60, deadline=None)
@given(attention_setups())
def test_weights_are_distributions_over_allowed_keys(setup):
    B, T, S, h, d, rng, mask, pad, q, kv = _with_inputs(setup)
    mod = MultiHeadAttention(d, h, dtype="float64", seed=0)
    out, w = mod(q, kv, attn_mask=mask, key_padding_mask=pad, average_attn_weights=False)
    allowed = _allowed(mask, pad, B, h, T, S)
    assert out.shape == (B, T, d) and w.shape == (B, h, T, S)
    assert np.all(w[~allowed] == 0.0)
    xp_assert_close(w.sum(-1), allowed.any(-1).astype(float), rtol=1e-07, atol=1e-12)
    # a query that may see no key outputs exactly b_o
    none = ~allowed.any(-1).any(1)  # (B, T) (no head sees anything: masks are shared by heads here)
    xp_assert_equal(out[none], np.broadcast_to(mod.params["b_o"], out[none].shape))
    grads = mod.backward(rng.standard_normal((B, T, d)))
    assert all(np.isfinite(g).all() for g in grads)


@settings(max_examples=40, deadline=None)
@given(attention_setups())
def test_float32_agrees_with_float64_and_stays_float32(setup):
    _, _, _, h, d, _, mask, pad, q, kv = _with_inputs(setup)
    m64 = MultiHeadAttention(d, h, dtype="float64", seed=1)
    m32 = MultiHeadAttention(d, h, dtype="float32", seed=1)
    mask32 = mask.astype(np.float32) if mask is not None and mask.dtype != bool else mask
    o64, _ = m64(q, kv, attn_mask=mask, key_padding_mask=pad)
    o32, w32 = m32(q.astype(np.float32), kv.astype(np.float32), attn_mask=mask32, key_padding_mask=pad)
    assert o32.dtype == np.float32 and w32.dtype == np.float32
    assert rel_error(o32, o64) < 1e-5


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4), st.integers(0, 10**6))
def test_split_then_combine_is_the_identity(B, T, h, d_k, seed):
    x = np.random.default_rng(seed).standard_normal((B, T, h * d_k))
    q, _ = F.split_heads_forward(x, h)
    assert q.shape == (B, h, T, d_k)
    xp_assert_equal(q[:, 1 % h, :, :], x[:, :, (1 % h) * d_k : (1 % h + 1) * d_k])
    xp_assert_equal(F.combine_heads_forward(q)[0], x)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.floats(-50, 50), st.integers(0, 10**6))
def test_softmax_ignores_a_shift_and_never_overflows(rows, cols, shift, seed):
    s = np.random.default_rng(seed).standard_normal((rows, cols)) * 1e3
    p, _ = F.softmax_forward(s)
    p2, _ = F.softmax_forward(s + shift)
    xp_assert_close(p, p2, rtol=1e-07, atol=1e-12)
    assert np.isfinite(p).all()
    xp_assert_close(p.sum(-1), 1.0, rtol=1e-07, check_shape=False)


def test_causal_attention_ignores_the_future():
    mod = MultiHeadAttention(8, 2, dtype="float64", seed=0)
    x = np.random.default_rng(0).standard_normal((1, 6, 8))
    y = x.copy()
    y[:, 4:] += 10.0
    a, _ = mod(x, attn_mask=mhattn.causal_mask(6))
    b, _ = mod(y, attn_mask=mhattn.causal_mask(6))
    xp_assert_equal(a[:, :4], b[:, :4])
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-3
