"""Masks: a key hidden from every query has no influence whatever it holds; float masks never overflow."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close, xp_assert_equal

import mhattn
from mhattn import MultiHeadAttention
from mhattn import functional as F
from mhattn.functional.attention_tiled import tiled_attention_backward, tiled_attention_forward


def np_(x):
    return mhattn.to_numpy(x)


def _issue_example(leg, mask_kind):
    """q = ones, k = I, v = [[1, 2], [3, 4]]; key 1 hidden from both queries."""
    q = leg.asarray(np.ones((1, 1, 2, 2)))
    k = leg.asarray([[[[1.0, 0.0], [0.0, 1.0]]]])
    v = leg.asarray([[[[1.0, 2.0], [3.0, 4.0]]]])
    hidden = np.array([[False, True], [False, True]])  # (T, S): the column of key 1
    mask = leg.asarray(hidden if mask_kind == "bool" else np.where(hidden, -np.inf, 0.0))
    return q, k, v, mask


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
@pytest.mark.parametrize("garbage", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["k", "v"])
def test_key_hidden_from_every_query_has_no_influence(backend, mask_kind, garbage, where):
    q, k, v, mask = _issue_example(backend, mask_kind)
    dirty = {"k": backend.xp.asarray(k, copy=True), "v": backend.xp.asarray(v, copy=True)}
    dirty[where][..., 1, :] = garbage
    out, w, cache = F.scaled_dot_product_attention_forward(q, dirty["k"], dirty["v"], mask)
    xp_assert_equal(np_(out), [[[[1.0, 2.0], [1.0, 2.0]]]])  # the values of key 0, exactly
    xp_assert_equal(np_(w), [[[[1.0, 0.0], [1.0, 0.0]]]])
    dq, dk, dv = F.scaled_dot_product_attention_backward(backend.asarray(np.ones((1, 1, 2, 2))), cache)
    xp_assert_equal(np_(dq), np.zeros((1, 1, 2, 2)))  # only key 0 is seen: softmax of one entry
    xp_assert_equal(np_(dk), np.zeros((1, 1, 2, 2)))
    xp_assert_equal(np_(dv), [[[[2.0, 2.0], [0.0, 0.0]]]])


@pytest.mark.parametrize("block_k", [1, 2])
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
@pytest.mark.parametrize("garbage", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["k", "v"])
def test_tiled_attention_ignores_a_hidden_key_whatever_it_holds(backend, mask_kind, garbage, where, block_k):
    q, k, v, mask = _issue_example(backend, mask_kind)
    dirty = {"k": backend.xp.asarray(k, copy=True), "v": backend.xp.asarray(v, copy=True)}
    dirty[where][..., 1, :] = garbage
    out, lse, cache = tiled_attention_forward(q, dirty["k"], dirty["v"], mask, block_k=block_k)
    xp_assert_equal(np_(out), [[[[1.0, 2.0], [1.0, 2.0]]]])  # the values of key 0, exactly
    dq, dk, dv = tiled_attention_backward(backend.asarray(np.ones((1, 1, 2, 2))), cache)
    xp_assert_equal(np_(dq), np.zeros((1, 1, 2, 2)))
    xp_assert_equal(np_(dk), np.zeros((1, 1, 2, 2)))
    xp_assert_equal(np_(dv), [[[[2.0, 2.0], [0.0, 0.0]]]])


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("garbage", [np.nan, np.inf])
@pytest.mark.parametrize("how", ["key_padding_mask", "attn_mask column"])
def test_padding_key_holding_garbage_changes_nothing_in_multi_head_attention(rng, garbage, how):
    """Cross-attention: NaN/inf at a key hidden from every query gives bit-identical outputs and gradients."""
    mod = MultiHeadAttention(8, 2, dtype="float64", seed=0)
    q, kv, dout = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 3, 8))
    if how == "key_padding_mask":
        hidden = np.zeros((2, 5), dtype=bool)
        hidden[:, 4] = True
        masks = {"key_padding_mask": mhattn.asarray(hidden)}
    else:
        hidden = np.zeros((3, 5), dtype=bool)
        hidden[:, 4] = True  # (T, S): key 4's whole column
        masks = {"attn_mask": mhattn.asarray(hidden)}
    runs = []
    for fill in (0.0, garbage):
        kv[:, 4] = fill
        key, value = mhattn.asarray(kv.copy()), mhattn.asarray(kv.copy())
        out, _ = mod(mhattn.asarray(q), key, value, **masks)
        dquery, dkey, dvalue = mod.backward(mhattn.asarray(dout))
        runs.append([np_(a) for a in (out, dquery, dkey, dvalue, *mod.grads.values())])
    for clean, dirty in zip(*runs, strict=True):
        assert np.isfinite(dirty).all()
        xp_assert_equal(dirty, clean)


def test_key_hidden_from_some_queries_only_still_needs_finite_values(rng):
    """Weight 0 removes any finite value (docs/library.md's claim) but 0 * NaN is NaN: the documented limit."""
    q, k, v = (rng.standard_normal((1, 1, 2, 4)) for _ in range(3))
    mask = np.array([[False, True], [False, False]])  # key 1 hidden from query 0 only
    v_big = v.copy()
    v_big[..., 1, :] = 1e300
    a, _, _ = F.scaled_dot_product_attention_forward(q, k, v, mask)
    b, _, _ = F.scaled_dot_product_attention_forward(q, k, v_big, mask)
    xp_assert_equal(a[..., 0, :], b[..., 0, :])  # query 0 does not see key 1's value at all


@pytest.mark.usefixtures("backend")
def test_two_float32_masks_of_finfo_min_add_without_overflow():
    lo = np.finfo(np.float32).min
    attn = np.zeros((3, 4), np.float32)
    attn[1] = lo
    pad = np.zeros((2, 4), np.float32)
    pad[:, 2] = lo
    attn_here = mhattn.asarray(attn)
    merged = np_(F.merge_masks(attn_here, mhattn.asarray(pad), 2, 2, 3, 4, attn_here.dtype))  # (2, 1, 3, 4)
    expected = attn[None, None] + np.zeros((2, 1, 1, 4), np.float32)
    expected[:, :, :, 2] = lo
    expected[:, :, 1, 2] = -np.inf  # finfo.min + finfo.min is below the range: -inf, as IEEE overflow gives
    assert merged.dtype == np.float32
    xp_assert_equal(merged, expected)
    mod = MultiHeadAttention(8, 2, seed=0)
    x = mhattn.asarray(np.ones((2, 3, 8), np.float32))
    out, _ = mod(
        x, mhattn.asarray(np.ones((2, 4, 8), np.float32)), attn_mask=mhattn.asarray(attn), key_padding_mask=mhattn.asarray(pad)
    )
    assert np.isfinite(np_(out)).all()


def test_float16_attention_with_a_finfo_min_row_does_not_overflow(backend, rng):
    if backend.name == "array_api_strict":
        pytest.skip("the array API standard has no float16")
    q = mhattn.asarray(rng.standard_normal((1, 1, 3, 4)).astype(np.float16))
    wide = np.zeros((3, 3), np.float32)
    wide[1] = np.finfo(np.float32).min  # below float16's range: the cast gives -inf, without a warning
    _, w, _ = F.scaled_dot_product_attention_forward(q, q, q, mhattn.asarray(wide))
    assert np_(w).dtype == np.float16
    xp_assert_equal(np_(w)[0, 0, 1], np.zeros(3, np.float16))  # a row of -inf: nothing allowed
    xp_assert_close(np_(w).sum(-1)[0, 0, [0, 2]], 1.0, rtol=2e-3, check_dtype=False, check_shape=False)
    narrow = np.zeros((3, 3), np.float16)
    narrow[1] = np.finfo(np.float16).min
    big = q * 30  # scores below -16 would overflow float16 when finfo.min is added
    _, w16, _ = F.scaled_dot_product_attention_forward(big, big, q, mhattn.asarray(narrow))
    assert np.isfinite(np_(w16)).all()
