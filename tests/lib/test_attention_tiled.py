"""Tiled (FlashAttention-style) attention: the same numbers as the plain path, in linear memory.

Each claim: outputs and gradients equal the plain path's (float64 to 1e-10, float32 to
1e-5 relative) under every mask kind and tile size; the log-sum-exp is the row's; the
backward passes a centred-difference check; causal tiles above the diagonal are never
computed. MultiHeadAttention's switch between the two paths: test_attention_switch.py. The engine's twin
(:mod:`mhattn.kernels.tiled`): its own claims here (threads, L2-sized tiles, the skipped shift), its equality with
this reference in test_engine.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close, xp_assert_equal

import mhattn
from mhattn.functional import attention_tiled as tiled_mod
from mhattn.functional.attention import scaled_dot_product_attention_backward, scaled_dot_product_attention_forward
from mhattn.functional.attention_tiled import tiled_attention_backward, tiled_attention_forward
from mhattn.gradcheck import check_backward, rel_error
from mhattn.kernels import pool
from mhattn.kernels import tiled as engine

B, h, T, S, D = 2, 3, 13, 11, 4


def _inputs(xp, dtype, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in ((B, h, T, D), (B, h, S, D), (B, h, S, D), (B, h, T, D))]
    return [xp.asarray(a) for a in arrays]


def _mask(kind, xp, dtype):
    rng = np.random.default_rng(1)
    if kind == "bool":
        m = rng.random((B, 1, T, S)) < 0.4
        m[0, 0, 2, :] = True  # query 2 of batch 0 sees no key at all
        return xp.asarray(m)
    if kind == "float":
        return xp.asarray(np.where(rng.random((T, S)) < 0.2, -np.inf, rng.standard_normal((T, S))).astype(dtype))
    return None


def _plain_mask(mask, causal, leg):
    if not causal:
        return mask
    xp = leg.xp
    c = mhattn.causal_mask(T, S, xp, device=leg.device)
    return c if mask is None else (mask | c if mask.dtype == xp.bool else mask + xp.astype(xp.where(c, -xp.inf, 0.0), mask.dtype))


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 1e-5)])
@pytest.mark.parametrize("kind, causal", [(None, False), ("bool", False), ("float", False), (None, True), ("bool", True)])
@pytest.mark.parametrize("blocks", [(None, None), (4, 3), (5, 64)])
def test_same_output_and_gradients_as_the_plain_path(backend, dtype, tol, kind, causal, blocks):
    q, k, v, dout = _inputs(backend, dtype)
    mask = _mask(kind, backend, dtype)
    out, _, cache = scaled_dot_product_attention_forward(q, k, v, _plain_mask(mask, causal, backend))
    grads = scaled_dot_product_attention_backward(dout, cache)
    out_t, lse, cache_t = tiled_attention_forward(q, k, v, mask, causal=causal, block_q=blocks[0], block_k=blocks[1])
    grads_t = tiled_attention_backward(dout, cache_t)
    for name, a, b in zip(("out", "dq", "dk", "dv"), (out, *grads), (out_t, *grads_t), strict=True):
        assert b.dtype == a.dtype and b.shape == a.shape and backend.is_here(b), name
        assert rel_error(a, b) <= tol, f"{name}: {rel_error(a, b):.2e}"
        assert np.isfinite(backend.to_numpy(b)).all(), name


@pytest.mark.parametrize("dtype, tol, big", [("float64", 1e-10, 200.0), ("float32", 1e-5, 20.0)])
@pytest.mark.parametrize("kind", [None, "bool", "float"])
@pytest.mark.parametrize("large", [False, True])
def test_the_max_shift_is_skipped_exactly_when_every_score_is_small(monkeypatch, dtype, tol, big, kind, large):
    q, k, v, dout = _inputs(np, dtype)
    q = q * big if large else q  # large: |q| max|k| / sqrt(d_k) above NO_SHIFT_BOUND (exp(S) could overflow)
    shifts, real = [], engine._exp_tile
    monkeypatch.setattr(engine, "_exp_tile", lambda s, m, shift: shifts.append(shift) or real(s, m, shift))
    mask = _mask(kind, np, dtype)
    out, _, cache = scaled_dot_product_attention_forward(q, k, v, mask)
    out_t, _, cache_t = engine.tiled_attention_forward(q, k, v, mask, block_q=4, block_k=3)
    assert any(shifts) == (large or kind == "float")  # decided per query block
    assert all(shifts) or kind != "float"  # a float mask may add anything: always shifted
    grads, grads_t = (
        f(dout, c) for f, c in ((scaled_dot_product_attention_backward, cache), (engine.tiled_attention_backward, cache_t))
    )
    for name, a, b in zip(("out", "dq", "dk", "dv"), (out, *grads), (out_t, *grads_t), strict=True):
        assert rel_error(a, b) <= tol, f"{name}: {rel_error(a, b):.2e}"


def test_a_query_with_no_allowed_key_gives_zero_output_lse_minus_inf_and_zero_gradients():
    q, k, v, dout = _inputs(np, "float64")
    mask = _mask("bool", np, "float64")
    out, lse, cache = tiled_attention_forward(q, k, v, mask, block_k=4)
    dq, dk, dv = tiled_attention_backward(dout, cache)
    assert np.all(out[0, :, 2] == 0) and np.all(lse[0, :, 2] == -np.inf)
    assert np.all(dq[0, :, 2] == 0)
    assert np.isfinite(lse[1]).all() and np.abs(out[1]).sum() > 0


def test_lse_is_the_log_sum_exp_of_each_score_row():
    q, k, v, _ = _inputs(np, "float64")
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(D)  # (B, h, T, S)
    _, lse, _ = tiled_attention_forward(q, k, v, block_k=3)
    xp_assert_close(lse, np.log(np.exp(scores).sum(-1)), rtol=1e-12)


@pytest.mark.parametrize("kind, causal", [(None, False), ("bool", True), ("float", False)])
def test_backward_passes_the_gradient_check(kind, causal):
    q, k, v, _ = _inputs(np, "float64")
    q, k, v = q[:1, :2, :5], k[:1, :2, :4], v[:1, :2, :4]
    mask = _mask(kind, np, "float64")
    mask = None if mask is None else mask[..., :5, :4][-1:]  # (1, 1|, 5, 4) or (5, 4)

    def fwd(q, k, v):
        return tiled_attention_forward(q, k, v, mask, causal=causal, block_q=2, block_k=3)

    assert max(check_backward(fwd, tiled_attention_backward, [q, k, v])) < 1e-7


def test_causal_skips_the_tiles_above_the_diagonal(monkeypatch):
    calls = []
    real = tiled_mod._scores

    def counting(*args, **kwargs):
        calls.append(args[5:9])  # (q0, q1, k0, k1)
        return real(*args, **kwargs)

    monkeypatch.setattr(tiled_mod, "_scores", counting)
    x = np.random.default_rng(0).standard_normal((1, 1, 8, 4))
    out, _, cache = tiled_attention_forward(x, x, x, causal=True, block_q=2, block_k=2)
    assert len(calls) == 1 + 2 + 3 + 4  # of the 16 tiles only those on or below the diagonal
    assert all(k0 < q1 for _, q1, k0, _ in calls)
    calls.clear()
    tiled_attention_backward(x, cache)
    assert len(calls) == 10


def test_threads_and_one_worker_agree_exactly():
    q, k, v, dout = _inputs(np, "float32")
    one = engine.tiled_attention_forward(q, k, v, workers=1, block_q=4)
    two = engine.tiled_attention_forward(q, k, v, workers=2, block_q=4)
    xp_assert_equal(one[0], two[0])
    for a, b in zip(engine.tiled_attention_backward(dout, one[2]), engine.tiled_attention_backward(dout, two[2]), strict=True):
        xp_assert_equal(a, b)


def test_calls_from_several_threads_at_once_share_the_kept_pools_safely():
    import threading

    q, k, v, _ = _inputs(np, "float32")
    ref = engine.tiled_attention_forward(q, k, v, workers=1, block_q=4)[0]
    bad = []

    def call(workers):
        for _ in range(3):
            bad.append(not np.array_equal(engine.tiled_attention_forward(q, k, v, workers=workers, block_q=4)[0], ref))

    threads = [threading.Thread(target=call, args=(w,)) for w in (2, 3, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(bad) == 12 and not any(bad)


def test_inputs_are_not_modified():
    q, k, v, dout = _inputs(np, "float64")
    copies = [a.copy() for a in (q, k, v, dout)]
    _, _, cache = tiled_attention_forward(q, k, v, block_k=4)
    tiled_attention_backward(dout, cache)
    for a, c in zip((q, k, v, dout), copies, strict=True):
        xp_assert_equal(a, c)


@pytest.mark.parametrize(
    "args, kwargs, err, match",
    [
        ((np.ones((2, 3, 4)),) * 3, {}, ValueError, "4-D"),
        ((np.ones((1, 1, 3, 4)), np.ones((1, 1, 5, 4)), np.ones((1, 1, 6, 4))), {}, ValueError, "do not fit"),
        ((np.ones((1, 1, 3, 4)),) * 3, {"mask": np.ones((4, 4), bool)}, ValueError, "does not broadcast"),
        ((np.ones((1, 1, 3, 4)),) * 3, {"mask": np.ones((3, 3), int)}, TypeError, "bool"),
        ((np.ones((1, 1, 3, 4)),) * 3, {"block_q": 0}, ValueError, "block_q=0"),
        ((np.ones((1, 1, 3, 4)), np.ones((1, 1, 3, 4), np.float32), np.ones((1, 1, 3, 4))), {}, TypeError, "dtype"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(args, kwargs, err, match):
    with pytest.raises(err, match=match):
        tiled_attention_forward(*args, **kwargs)


@pytest.mark.parametrize("kind, causal", [(None, False), ("bool", True), ("float", False)])
def test_the_generic_branch_gives_the_numpy_numbers(backend, kind, causal):
    """Off NumPy (all heads at once, no buffers, no threads) the numbers are NumPy's, on the inputs' device."""
    if backend.name == "numpy":
        pytest.skip("the NumPy branch is the reference here")
    q, k, v, dout = _inputs(np, "float64")
    mask = _mask(kind, np, "float64")
    out, lse, cache = tiled_attention_forward(q, k, v, mask, causal=causal)
    grads = tiled_attention_backward(dout, cache)
    q_d, k_d, v_d, dout_d = (backend.asarray(a) for a in (q, k, v, dout))
    mask_d = None if mask is None else backend.asarray(mask)
    out_d, lse_d, cache_d = tiled_attention_forward(q_d, k_d, v_d, mask_d, causal=causal, block_k=4)
    assert cache_d.workers == 1 and cache_d.block_q >= q.shape[2]  # one query block: every query at once
    for a, b in zip((out, lse, *grads), (out_d, lse_d, *tiled_attention_backward(dout_d, cache_d)), strict=True):
        xp_assert_close(b, a, like=backend, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    ("l2", "dtype", "S", "block_k"),
    [(2 << 20, np.float32, 40, 40), (2 << 20, np.float32, 4096, 512), (1 << 20, np.float32, 4096, 256),
     (1 << 20, np.float32, 200, 200), (1 << 20, np.float64, 4096, 128), (256 << 10, np.float32, 4096, 64)],
)  # fmt: skip
def test_numpy_default_key_tile_fills_half_the_l2_at_most(monkeypatch, l2, dtype, S, block_k):
    """A (512, block_k) score tile takes at most half of one core's L2: 256 float32 keys for 1 MiB, 512 for 2 MiB."""
    monkeypatch.setattr(pool, "_L2", [l2])
    q = np.zeros((1, 2, 8, 4), dtype)
    assert pool.plan_blocks(q, S, None, None, None)[:2] == (pool.BLOCK_Q, block_k) == (512, block_k)
    assert pool.plan_blocks(q, S, 16, 7, 1) == (16, 7, 1)  # explicit sizes are kept


def test_l2_size_comes_from_sysfs_level_2_or_the_documented_fallback(monkeypatch, tmp_path):
    for entry, level, size in (("index0", 1, "48K"), ("index2", 2, "1280K"), ("index3", 3, "32M")):
        (tmp_path / entry).mkdir()
        (tmp_path / entry / "level").write_text(f"{level}\n")
        (tmp_path / entry / "size").write_text(f"{size}\n")
    real_listdir, real_open = pool.os.listdir, open

    def redirect(path):
        return str(path).replace("/sys/devices/system/cpu/cpu0/cache", str(tmp_path))

    monkeypatch.setattr(pool.os, "listdir", lambda path: real_listdir(redirect(path)))
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(redirect(path), *a, **k))
    monkeypatch.setattr(pool, "_L2", [])
    assert pool.l2_bytes() == 1280 << 10
    monkeypatch.setattr(pool.os, "listdir", lambda path: real_listdir(tmp_path / "missing"))
    monkeypatch.setattr(pool, "_L2", [])
    assert pool.l2_bytes() == pool.L2_FALLBACK == 1 << 20


def test_long_rows_take_several_key_tiles_and_match_the_plain_path():
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((1, 1, 3, 4)) for _ in range(3))
    k, v = (np.concatenate([a] * 700, axis=2) + rng.standard_normal((1, 1, 2100, 4)) for a in (k, v))  # S = 2100: 3 tiles
    out, _, cache = engine.tiled_attention_forward(q, k, v)
    assert cache.block_k == pool.plan_blocks(q, 2100, None, None, None)[1] < 2100  # the L2-sized default
    want, _, _ = scaled_dot_product_attention_forward(q, k, v)
    assert rel_error(out, want) < 1e-12


@pytest.mark.parametrize(
    ("dtype", "magnitude", "masked"), [("float32", 30, False), ("float32", 100, True), ("float64", 300, True)]
)
def test_reference_backward_keeps_large_scores_as_accurate_as_the_plain_path(dtype, magnitude, masked):
    """Scores of 1e3 to 1e5: the tiled backward recomputes ``P`` as ``exp((S - m) - log l)``; with ``L = m + log l``
    rounded at the size of ``m`` every weight of a row would move by a unit of ``m``'s last place (dV ~1e-4 off the
    plain path in float32, 1e-12 in float64)."""
    rng = np.random.default_rng(1)
    B, h, T, d = 2, 2, 64, 16
    q, k = (rng.standard_normal((B, h, T, d)) * magnitude for _ in range(2))
    v, dout = (rng.standard_normal((B, h, T, d)) for _ in range(2))
    mask = None
    if masked:
        mask = rng.random((B, h, T, T)) < 0.3
        mask[:, :, 5] = True  # a query that sees no key
    q, k, v, dout = (a.astype(dtype) for a in (q, k, v, dout))
    causal = np.triu(np.ones((T, T), bool), 1) if masked else None
    full = None if mask is None else mask | causal
    plain = scaled_dot_product_attention_backward(dout, scaled_dot_product_attention_forward(q, k, v, full)[2])
    tiled = tiled_attention_backward(dout, tiled_attention_forward(q, k, v, mask, causal=masked, block_k=16)[2])
    scale = max(float(np.max(np.abs(g))) for g in plain)
    err = float(np.max(np.abs(tiled[2] - plain[2]))) / scale  # dV: the weights themselves, times dO
    assert err < (1e-6 if dtype == "float32" else 1e-14), f"dv off the plain path by {err:.1e} of the largest gradient"
