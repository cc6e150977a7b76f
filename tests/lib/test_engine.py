"""The speed engine (mhattn.kernels) gives the reference's numbers: every (forward, backward) pair, every mask kind,
both dtypes, against the reference run on every array-library leg (issue 33).

The engine takes plain NumPy arrays only, so each case runs the engine on host arrays and the reference on the leg
(NumPy, array-api-strict's device1, torch CPU, and the CUDA legs where a GPU is), from the same seeded host inputs.
Equal means float64 to 1e-12 and float32 to 1e-5, relative to the largest entry (the engine scales the scores after
the GEMM, sums rows as GEMVs, fuses the self-attention projection: the same sums in another order). Each case runs
twice: as the calls come (a small call is not pooled) and forced onto a pool of two threads with every GEMM split.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LEGS_AND_DTYPES

import mhattn
from mhattn import functional as F
from mhattn import kernels
from mhattn.functional import attention_tiled as F_tiled
from mhattn.functional.mha import multi_head_attention_backward, multi_head_attention_forward
from mhattn.kernels import attention as K_attention
from mhattn.kernels import mha as K_mha
from mhattn.kernels import pool, rows
from mhattn.kernels import tiled as K_tiled
from mhattn.nn.attention import attention_steps
from mhattn.nn.init import init_mha_params

TOL = {"float64": 1e-12, "float32": 1e-5}
B, H, T, S, DK = 3, 2, 7, 9, 4
MASKS = ["none", "bool", "float", "padding", "extreme"]


@pytest.fixture(params=["as-is", "pooled"])
def pooling(request, monkeypatch):
    """``pooled``: every call over two threads and every GEMM split, whatever the machine's limit."""
    if request.param == "pooled":
        pytest.importorskip("threadpoolctl")
        monkeypatch.setattr(pool, "thread_budget", lambda: 2)
        monkeypatch.setattr(pool, "MIN_CALL_WORK", 0)
        monkeypatch.setattr(pool, "MIN_GEMM_WORK", 0)
    return request.param


def _close(leg, got_host, want_leg, dtype, what, scale=None):
    """``got_host`` (the engine's) equals ``want_leg`` (the reference's) within ``TOL`` of ``scale`` (default: the
    largest entry of ``want_leg``)."""
    want = leg.to_numpy(want_leg)
    got = np.asarray(got_host)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300) if scale is None else scale
    err = float(np.max(np.abs(got - want), initial=0.0)) / scale
    assert err <= TOL[dtype], f"{what}: engine differs from the reference by {err:.2e} of its largest entry"


def _mask(kind, rng, shape, dtype):
    """A host mask of ``kind`` broadcastable to ``shape`` ``(B, h, T, S)``: some rows and keys fully hidden."""
    b, h, t, s = shape
    if kind == "none":
        return None
    if kind == "bool":
        m = rng.random((b, 1, t, s)) < 0.3
        m[0, 0, 1, :] = True  # a query that sees no key
        return m
    if kind == "padding":
        m = np.zeros((b, 1, 1, s), dtype=bool)
        m[0, ..., -2:] = True  # the first sequence's last two keys are padding
        return m
    m = np.where(rng.random((t, s)) < 0.2, -np.inf, rng.standard_normal((t, s))).astype(dtype)
    if kind == "extreme":
        m[2, :] = np.finfo(dtype).min  # a whole row hidden by the most negative finite number
    return m


def _put(leg, a):
    return None if a is None else leg.asarray(a)


@pytest.mark.parametrize("backend", LEGS_AND_DTYPES, indirect=True)
@pytest.mark.parametrize("kind", ["none", "bool", "padding"])
def test_softmax_pair(backend, pooling, kind):
    rng, dt = np.random.default_rng(1), backend.dtype
    scores, dp = (rng.standard_normal((B, H, T, S)).astype(dt) * 3 for _ in range(2))
    mask = _mask(kind, rng, (B, H, T, S), dt)
    p_ref, c_ref = F.softmax_forward(backend.asarray(scores), _put(backend, mask))
    p_eng, c_eng = rows.softmax_forward(scores, mask)
    _close(backend, p_eng, p_ref, dt, "probs")
    _close(backend, rows.softmax_backward(dp, c_eng), F.softmax_backward(backend.asarray(dp), c_ref), dt, "dscores")


@pytest.mark.parametrize("backend", LEGS_AND_DTYPES, indirect=True)
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_scaled_dot_product_attention_pair(backend, pooling, kind, dropout_p):
    rng, dt = np.random.default_rng(2), backend.dtype
    q, k, v = (rng.standard_normal(s).astype(dt) for s in ((B, H, T, DK), (B, H, S, DK), (B, H, S, DK + 2)))
    dout = rng.standard_normal((B, H, T, DK + 2)).astype(dt)
    mask = _mask(kind, rng, (B, H, T, S), dt)
    ref = F.scaled_dot_product_attention_forward(
        *(backend.asarray(a) for a in (q, k, v)), _put(backend, mask), dropout_p, np.random.default_rng(5)
    )
    eng = K_attention.scaled_dot_product_attention_forward(q, k, v, mask, dropout_p, np.random.default_rng(5))
    _close(backend, eng[0], ref[0], dt, "out")
    _close(backend, eng[1], ref[1], dt, "weights")
    grads_ref = F.scaled_dot_product_attention_backward(backend.asarray(dout), ref[2])
    for name, a, b in zip(
        "dq dk dv".split(), K_attention.scaled_dot_product_attention_backward(dout, eng[2]), grads_ref, strict=True
    ):
        _close(backend, a, b, dt, name)


@pytest.mark.parametrize(
    "options",
    [{"scale": 0.3}, {"is_causal": True}, {"is_causal": True, "causal": "lower_right"}, {"scale": 2, "is_causal": True}],
)
def test_scaled_dot_product_attention_pair_takes_the_references_keywords(pooling, options):
    """scale=, is_causal= and causal= (T != S, so the two diagonals differ) give the reference's numbers."""
    rng = np.random.default_rng(8)
    q, k, v, dout = (rng.standard_normal((B, H, n, DK)) for n in (T, S, S, T))
    ref = F.scaled_dot_product_attention_forward(q, k, v, **options)
    eng = K_attention.scaled_dot_product_attention_forward(q, k, v, **options)
    got = [*eng[:2], *K_attention.scaled_dot_product_attention_backward(dout, eng[2])]
    want = [*ref[:2], *F.scaled_dot_product_attention_backward(dout, ref[2])]
    for name, a, b in zip("out weights dq dk dv".split(), got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL["float64"] * np.max(np.abs(b)), err_msg=name)
    with pytest.raises(ValueError, match="is_causal"):
        K_attention.scaled_dot_product_attention_forward(q, k, v, np.zeros((T, S), bool), is_causal=True)


@pytest.mark.parametrize(
    ("q_shape", "kv_lead"),
    [((T, DK), ()), ((H, T, DK), (H,)), ((2, B, H, T, DK), (2, B, H)), ((1, H, T, DK), (B, H)), ((B, H, T, DK), (1, 1))],
)  # fmt: skip
def test_scaled_dot_product_attention_pair_of_any_rank_and_broadcast(pooling, q_shape, kv_lead):
    """The engine's pair takes what the reference takes: no batch axis, one more, and leading dimensions that
    broadcast (each gradient summed back to its input's shape); chunked only along a batch axis of q's own."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal(q_shape)
    k, v = (rng.standard_normal((*kv_lead, S, d)) for d in (DK, DK + 1))
    lead = np.broadcast_shapes(q_shape[:-2], kv_lead)
    dout = rng.standard_normal((*lead, T, DK + 1))
    for mask in (None, rng.random((*lead, T, S)) < 0.3):  # a full-shape mask broadcasts k and v to its lead
        ref = F.scaled_dot_product_attention_forward(q, k, v, mask)
        eng = K_attention.scaled_dot_product_attention_forward(q, k, v, mask)
        got = [*eng[:2], *K_attention.scaled_dot_product_attention_backward(dout, eng[2])]
        want = [*ref[:2], *F.scaled_dot_product_attention_backward(dout, ref[2])]
        for name, a, b in zip("out weights dq dk dv".split(), got, want, strict=True):
            assert a.shape == b.shape, (name, a.shape, b.shape)  # each gradient the shape of its input
            np.testing.assert_allclose(a, b, rtol=0, atol=TOL["float64"] * np.max(np.abs(b)), err_msg=name)


@pytest.mark.parametrize("backend", LEGS_AND_DTYPES, indirect=True)
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d_v", [DK, DK + 3])
def test_tiled_attention_pair(backend, pooling, kind, causal, d_v):
    rng, dt = np.random.default_rng(3), backend.dtype
    q, k, v = (rng.standard_normal(s).astype(dt) for s in ((B, H, T, DK), (B, H, S, DK), (B, H, S, d_v)))
    dout = rng.standard_normal((B, H, T, d_v)).astype(dt)
    mask = _mask(kind, rng, (B, H, T, S), dt)
    out_r, lse_r, c_r = F_tiled.tiled_attention_forward(
        *(backend.asarray(a) for a in (q, k, v)), _put(backend, mask), causal=causal, block_q=3, block_k=4
    )
    out_e, lse_e, c_e = K_tiled.tiled_attention_forward(q, k, v, mask, causal=causal, block_q=3, block_k=4)
    _close(backend, out_e, out_r, dt, "out")
    finite = np.isfinite(backend.to_numpy(lse_r))
    assert np.array_equal(np.isfinite(lse_e), finite)
    _close(backend, np.where(finite, lse_e, 0.0), backend.xp.where(lse_r == -backend.xp.inf, 0.0, lse_r), dt, "lse")
    grads_ref = F_tiled.tiled_attention_backward(backend.asarray(dout), c_r)
    for name, a, b in zip("dq dk dv".split(), K_tiled.tiled_attention_backward(dout, c_e), grads_ref, strict=True):
        _close(backend, a, b, dt, name)


MHA_CASES = {
    "self": {},
    "self causal": {"is_causal": True},
    "self bool mask": {"attn_mask": "bool"},
    "self float mask": {"attn_mask": "float"},
    "cross padding": {"cross": True, "key_padding_mask": True},
    "cross float mask, head mask (h,)": {"cross": True, "attn_mask": "float", "head_mask": (H,)},
    "self head mask (B, h)": {"head_mask": (B, H)},
    "self dropout": {"dropout_p": 0.25},
    "tiled self causal": {"tiled": True, "is_causal": True},
    "tiled cross bool mask": {"tiled": True, "cross": True, "attn_mask": "bool"},
}


def _mha_case(case, dt, rng):
    D, kdim = 8, 6
    cross = case.get("cross", False)
    query = rng.standard_normal((B, T, D)).astype(dt)
    key = rng.standard_normal((B, S, kdim)).astype(dt) if cross else query
    value = rng.standard_normal((B, S, kdim + 1)).astype(dt) if cross else query
    params = init_mha_params(D, key.shape[-1], value.shape[-1], True, np.dtype(dt), rng)
    params = {n: p + 0.1 * rng.standard_normal(p.shape).astype(dt) for n, p in params.items()}
    s = key.shape[1]
    kw = {"is_causal": case.get("is_causal", False), "tiled": case.get("tiled", False), "dropout_p": case.get("dropout_p", 0.0)}
    if "attn_mask" in case:
        m = _mask(case["attn_mask"], rng, (B, H, T, s), dt)
        kw["attn_mask"] = m[0, 0] if case["attn_mask"] == "bool" else m  # (T, S)
    if case.get("key_padding_mask"):
        pad = np.zeros((B, s), dtype=bool)
        pad[1, -3:] = True
        kw["key_padding_mask"] = pad
    if "head_mask" in case:
        kw["head_mask"] = rng.random(case["head_mask"]).astype(dt)
    return (query, key, value), params, kw


@pytest.mark.parametrize("backend", LEGS_AND_DTYPES, indirect=True)
@pytest.mark.parametrize("name", list(MHA_CASES))
def test_multi_head_attention_pair(backend, pooling, name):
    dt, rng = backend.dtype, np.random.default_rng(4)
    (query, key, value), params, kw = _mha_case(MHA_CASES[name], dt, rng)
    dout = rng.standard_normal((B, T, params["W_o"].shape[1])).astype(dt)
    cross = key is not query
    leg_x = [backend.asarray(a) for a in (query, key, value)] if cross else [backend.asarray(query)] * 3
    leg_kw = {n: (_put(backend, v) if isinstance(v, np.ndarray) else v) for n, v in kw.items()}
    leg_params = {n: backend.asarray(p) for n, p in params.items()}
    ref = multi_head_attention_forward(*leg_x, leg_params, H, rng=np.random.default_rng(9), **leg_kw)
    eng = K_mha.multi_head_attention_forward(query, key, value, params, H, rng=np.random.default_rng(9), **kw)
    _close(backend, eng[0], ref[0], dt, "out")
    if ref[1] is not None:
        _close(backend, eng[1], ref[1], dt, "weights")
    got, want = K_mha.multi_head_attention_backward(dout, eng[2]), multi_head_attention_backward(backend.asarray(dout), ref[2])
    for what, a, b in zip(("dquery", "dkey", "dvalue"), got[:3], want[:3], strict=True):
        _close(backend, a, b, dt, what)
    assert set(got[3]) == set(want[3])
    scale = max(float(np.max(np.abs(backend.to_numpy(g)))) for g in want[3].values())  # b_k's gradient is 0 but rounding
    for n in want[3]:
        _close(backend, got[3][n], want[3][n], dt, n, scale)
    if want[4] is not None:
        _close(backend, got[4], want[4], dt, "dhead_mask")


@pytest.mark.parametrize("backend", LEGS_AND_DTYPES, indirect=True)
def test_linear_pair(backend, pooling):
    rng, dt = np.random.default_rng(6), backend.dtype
    x, W, b, dout = (rng.standard_normal(s).astype(dt) for s in ((B, T, 5), (5, 7), (7,), (B, T, 7)))
    out_r, c_r = F.linear_forward(*(backend.asarray(a) for a in (x, W, b)))
    out_e, c_e = K_mha.linear_forward(x, W, b)
    _close(backend, out_e, out_r, dt, "out")
    for what, a, c in zip(
        ("dx", "dW", "db"), K_mha.linear_backward(dout, c_e), F.linear_backward(backend.asarray(dout), c_r), strict=True
    ):
        _close(backend, a, c, dt, what)


def test_the_engine_takes_plain_numpy_floats_only():
    x = np.zeros((2, 3, 4), np.float32)
    assert kernels.takes(x, None, x.astype(np.float64))
    assert not kernels.takes(x.astype(np.float16))  # float16 goes to the reference
    assert not kernels.takes(np.memmap)  # not an array
    assert not kernels.takes(x.view(np.matrix) if x.ndim == 2 else np.ma.masked_array(x))


def test_nn_chooses_in_one_branch_and_every_model_uses_it(backend):
    """``MultiHeadAttention`` and ``TransformerModel`` take the engine on NumPy (unless ``engine=False``) and the
    reference elsewhere; either way, the same numbers."""
    from mhattn.nn.transformer import ModelConfig, TransformerModel

    host = np.random.default_rng(7).standard_normal((2, 5, 8))
    mha_on, mha_off = (
        mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=1),
        mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=1, engine=False),
    )
    x = backend.asarray(host)
    fwd_on, _ = attention_steps(True, x, mha_on.params["W_q"])
    assert (fwd_on is kernels.multi_head_attention_forward) == (backend.name == "numpy")
    assert attention_steps(False, x)[0] is multi_head_attention_forward
    out_on, out_off = mha_on(x)[0], mha_off(x)[0]
    _close(backend, backend.to_numpy(out_on), out_off, "float64", "MultiHeadAttention out")
    cfg = ModelConfig(vocab_size=5, output_sizes=(3,), d_model=8, num_heads=2, d_ff=16, num_layers=2, causal=True)
    model = TransformerModel(cfg, seed=0, dtype="float64")
    assert (model.attention_steps()[0] is kernels.multi_head_attention_forward) == (backend.name == "numpy")
    ids = model.place(np.array([[0, 1, 4, 2], [2, 2, 3, 1]]))
    logits_on = model(ids)[0][0]
    model.backward([backend.asarray(np.ones((2, 4, 3)))])
    grads_on = dict(model.grads)
    model.engine = False
    logits_off = model(ids)[0][0]
    model.backward([backend.asarray(np.ones((2, 4, 3)))])
    _close(backend, backend.to_numpy(logits_on), logits_off, "float64", "TransformerModel logits")
    scale = max(float(np.max(np.abs(backend.to_numpy(g)))) for g in model.grads.values())
    for n, g in model.grads.items():
        _close(backend, backend.to_numpy(grads_on[n]), g, "float64", n, scale)
