"""The engine's pool (mhattn.kernels.pool): one pool per large call, BLAS held to one thread, results equal to the
unpooled ones; the pooled matmul is called by name and changes no one else's matmul (issue 33)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from mhattn import MultiHeadAttention
from mhattn.kernels import pool
from mhattn.kernels.tiled import tiled_attention_forward

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture
def two_threads(monkeypatch):
    """Every call pooled over two threads (whatever this machine's limit), and a record of the splits."""
    splits = []
    real_map = pool._map
    monkeypatch.setattr(pool, "thread_budget", lambda: 2)
    monkeypatch.setattr(pool, "MIN_CALL_WORK", 0)
    monkeypatch.setattr(pool, "MIN_GEMM_WORK", 0)
    monkeypatch.setattr(pool, "_map", lambda job, items, n: (splits.append((len(items), n)), real_map(job, items, n)))
    return splits


def _fwd_bwd(m, x, dout, **kw):
    out, _ = m.forward(x, need_weights=False, **kw)
    dx = m.backward(dout)[0]
    return out, dx, dict(m.grads)


@pytest.mark.parametrize(("B", "T", "attention"), [(3, 40, "plain"), (1, 70, "tiled"), (2, 33, "plain")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooled_call_equals_the_unpooled_one(monkeypatch, B, T, attention, dtype):
    rng = np.random.default_rng(B * T)
    x, dout = (rng.standard_normal((B, T, 48)).astype(dtype) for _ in range(2))
    m = MultiHeadAttention(48, 4, dtype=np.dtype(dtype).name, seed=1, attention=attention)
    monkeypatch.setattr(pool, "MIN_CALL_WORK", 1 << 62)  # never pooled
    want = _fwd_bwd(m, x, dout, is_causal=True)
    splits = []
    with monkeypatch.context() as mp:
        real_map = pool._map
        mp.setattr(pool, "thread_budget", lambda: 2)
        mp.setattr(pool, "MIN_CALL_WORK", 0)
        mp.setattr(pool, "MIN_GEMM_WORK", 0)
        mp.setattr(pool, "_map", lambda job, items, n: (splits.append(n), real_map(job, items, n)))
        got = _fwd_bwd(m, x, dout, is_causal=True)
    assert splits and all(n == 2 for n in splits)  # the work did go over the pool
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(want[:2], got[:2], strict=True):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol * np.abs(a).max())
    scale = max(float(np.abs(g).max()) for g in want[2].values())  # b_k's gradient is 0 up to rounding: one scale for all
    for name, g in want[2].items():
        np.testing.assert_allclose(got[2][name], g, rtol=tol, atol=tol * scale, err_msg=name)


@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((37, 5), (5, 3)), ((3, 5), (5, 41)), ((4, 2, 9, 5), (4, 2, 5, 7)), ((2, 9, 5), (5, 7))]
)
def test_split_matmul_is_numpys_matmul(two_threads, a_shape, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    with pool.pooled():
        got = pool.matmul(a, b)
    assert got.shape == np.matmul(a, b).shape and np.allclose(got, np.matmul(a, b), rtol=1e-12, atol=1e-12)
    assert two_threads and two_threads[-1][1] == 2
    bias = rng.standard_normal(b_shape[-1])  # row, column and batch blocks each add their part of the bias
    with pool.pooled():
        got = pool.matmul(a, b, bias=bias)
    np.testing.assert_allclose(got, np.matmul(a, b) + bias, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3, 7, 4), (1, 6, 7, 4), (1, 2, 3, 4)])
def test_contiguous_copies_in_blocks_equal_numpys(two_threads, monkeypatch, shape):
    monkeypatch.setattr(pool, "MIN_COPY", 0)
    x = np.random.default_rng(1).standard_normal(shape)
    view = x.transpose(0, 2, 1, 3)  # a head split's or combine's view
    with pool.pooled():
        got = pool.contiguous(view)
    assert got.flags.c_contiguous and np.array_equal(got, view)
    assert two_threads[-1] == (2, 2)  # in two blocks: of the batch, or of the next axis when B = 1


@pytest.mark.parametrize("shape", [(5, 3, 7, 4), (1, 6, 7, 4)])
def test_copyto_writes_a_strided_destination_in_blocks(two_threads, monkeypatch, shape):
    """A combine into the concat's heads view: every element lands where np.copyto puts it, the rest is untouched."""
    monkeypatch.setattr(pool, "MIN_COPY", 0)
    B, h, T, d = shape
    src = np.random.default_rng(2).standard_normal(shape)
    concat, want = np.full((B, T, h * d), 7.0), np.full((B, T, h * d), 7.0)
    np.copyto(want.reshape(B, T, h, d).transpose(0, 2, 1, 3), src)
    with pool.pooled():
        got = pool.copyto(concat.reshape(B, T, h, d).transpose(0, 2, 1, 3), src)
    assert np.shares_memory(got, concat) and np.array_equal(concat, want)
    assert two_threads[-1] == (2, 2)


@pytest.mark.parametrize(("dst_shape", "src_shape"), [((2, 3, 5), (1, 1, 5)), ((2, 4), (2, 1)), ((3, 4, 5), (4, 5))])
def test_copyto_broadcasts_its_source_as_numpy_does(two_threads, monkeypatch, dst_shape, src_shape):
    monkeypatch.setattr(pool, "MIN_COPY", 0)
    src = np.random.default_rng(3).standard_normal(src_shape)
    want, got = np.zeros(dst_shape), np.zeros(dst_shape)
    np.copyto(want, src)
    with pool.pooled():
        pool.copyto(got, src)
        with pytest.raises(ValueError):
            pool.copyto(np.zeros(dst_shape), np.ones((7,)))  # does not broadcast: NumPy's error
    assert np.array_equal(got, want)


@pytest.mark.parametrize("pooled", [False, True])
def test_attention_writes_into_strided_views_of_its_callers_arrays(two_threads, pooled):
    """The engine's plain path reads heads as views of Q/K/V (rows strided by h d_k) and writes the result and the
    gradients into views of the caller's (B, T, h d_k) arrays: the values equal the contiguous call's, the returned
    arrays are those views, and nothing outside them is written."""
    from mhattn.kernels.attention import attend, scaled_dot_product_attention_backward

    rng = np.random.default_rng(5)
    B, h, T, d = 4, 3, 6, 5
    heads = lambda x: x.reshape(B, T, h, d).transpose(0, 2, 1, 3)  # noqa: E731  (B, T, h d) -> (B, h, T, d) view
    qkv, dconcat = rng.standard_normal((B, T, 3 * h * d)), rng.standard_normal((B, T, h * d))
    q, k, v = (heads(qkv[..., i * h * d : (i + 1) * h * d]) for i in range(3))
    contiguous = [np.ascontiguousarray(a) for a in (q, k, v, heads(dconcat))]
    want = attend(*contiguous[:3])
    want_grads = scaled_dot_product_attention_backward(contiguous[3], want[2])
    concat, dqkv = np.full((B, T, h * d), np.nan), np.full((B, T, 3 * h * d), np.nan)
    outs = [heads(dqkv[..., i * h * d : (i + 1) * h * d]) for i in range(3)]
    with pool.pooled() if pooled else contextlib.nullcontext():
        got = attend(q, k, v, out=heads(concat))
        got_grads = scaled_dot_product_attention_backward(heads(dconcat), got[2], out=outs)
    assert np.shares_memory(got[0], concat) and all(g is o for g, o in zip(got_grads, outs, strict=True))
    assert not np.isnan(concat).any() and not np.isnan(dqkv).any()  # every entry written
    for a, b in [(want[0], got[0]), *zip(want_grads, got_grads, strict=True)]:
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-13)


def test_attention_backward_out_takes_gradients_summed_over_broadcast_inputs():
    from mhattn.kernels.attention import attend, scaled_dot_product_attention_backward

    rng = np.random.default_rng(6)
    q, dout = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 4, 5))
    k, v = rng.standard_normal((1, 3, 6, 5)), rng.standard_normal((3, 6, 5))  # broadcast over the batch
    cache = attend(q, k, v)[2]
    want = scaled_dot_product_attention_backward(dout, cache)
    outs = [np.empty_like(a) for a in (q, k, v)]
    got = scaled_dot_product_attention_backward(dout, cache, out=outs)
    assert all(g is o and g.shape == w.shape for g, o, w in zip(got, outs, want, strict=True))
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-13)


def test_empty_calls_split_into_no_blocks(two_threads, monkeypatch):
    """A query of length 0 in a pooled call: the layout copy and the module give the empty results."""
    monkeypatch.setattr(pool, "MIN_COPY", 0)
    with pool.pooled():
        assert pool.contiguous(np.zeros((1, 0, 3, 4)).transpose(0, 2, 1, 3)).shape == (1, 3, 0, 4)
        kv = np.ones((1, 5, 12))  # five keys; no query
        out, _ = MultiHeadAttention(12, 3, seed=0, dtype="float64").forward(np.zeros((1, 0, 12)), kv, kv, need_weights=False)
    assert out.shape == (1, 0, 12)


def test_pooled_call_holds_blas_to_one_thread_and_restores_it(two_threads):
    before = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    with pool.pooled():
        inside = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert pool.workers() == 2
    assert all(n == 1 for n in inside) and pool.workers() == 0
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"] == before


def test_the_budget_honours_the_users_blas_limit_and_environment(monkeypatch):
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert pool.thread_budget() == 1
        with pool.pooled():
            assert pool.workers() == 0  # a one-thread budget runs the call as it is
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert pool.thread_budget() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(pool.os, "sched_getaffinity", lambda pid: {0})
    assert pool.thread_budget() == 1


def test_small_calls_are_not_pooled(monkeypatch):
    monkeypatch.setattr(pool, "thread_budget", lambda: 2)
    with pool.pooled(pool.MIN_CALL_WORK - 1):
        assert pool.workers() == 0


def test_tiled_workers_default_to_the_budget(monkeypatch):
    monkeypatch.setattr(pool, "thread_budget", lambda: 1)
    q = np.zeros((2, 3, 5, 4))
    assert tiled_attention_forward(q, q, q)[2].workers == 1


def _masks(rng, B, h, T):
    """The merged masks plain attention meets: none, key padding ``(B, 1, 1, S)``, float ``(T, S)``, ``(B, h, T, S)``."""
    pad = np.zeros((B, 1, 1, T), dtype=bool)
    pad[0, ..., -2:] = True  # the first batch element's last two keys hidden: a wrong cut would show there
    full = rng.random((B, h, T, T)) < 0.2
    full[..., 0] = False
    return [None, pad, rng.standard_normal((T, T)), full]


@pytest.mark.parametrize("which", range(4))
def test_plain_attention_by_batch_equals_the_whole_batch(two_threads, which):
    from mhattn.kernels.attention import attend, scaled_dot_product_attention_backward

    rng = np.random.default_rng(which)
    q, k, v, dout = (rng.standard_normal((5, 3, 7, 4)) for _ in range(4))
    mask = _masks(rng, 5, 3, 7)[which]
    want = attend(q, k, v, mask)  # not pooled: one call
    want_grads = scaled_dot_product_attention_backward(dout, want[2])
    with pool.pooled():
        got = attend(q, k, v, mask)  # each chunk writes its rows of the outputs
        got_grads = scaled_dot_product_attention_backward(dout, got[2])
    assert sum(n for n, _ in two_threads) >= 4  # the forward and the backward each went over the pool in two chunks
    for a, b in [*zip(want[:2], got[:2], strict=True), *zip(want_grads, got_grads, strict=True)]:
        assert b.shape == a.shape
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-13)
    cache = got[2]
    assert cache.q is q and cache.softmax.probs is got[1] and cache.dropped is got[1]  # q kept, one weights array


def test_by_batch_keeps_dropout_in_one_call_and_the_callers_errstate(two_threads):
    m = MultiHeadAttention(16, 2, dropout=0.5, seed=3, attention="plain", dtype="float64")
    x = np.random.default_rng(0).standard_normal((4, 6, 16))
    want = m.forward(x, need_weights=False, training=True)[0]
    m.rng = np.random.default_rng(np.random.SeedSequence(3).spawn(2)[1])  # the same dropout draws again
    with pool.pooled():
        got = m.forward(x, need_weights=False, training=True)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with np.errstate(over="raise"), pool.pooled(), pytest.raises(FloatingPointError):
        pool.by_batch(lambda out, x: np.exp(x, out=out), (np.empty((4, 3)),), np.full((4, 3), 1000.0))  # the chunks
        # run under the caller's np.errstate
