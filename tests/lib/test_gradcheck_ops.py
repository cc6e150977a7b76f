"""Every op's backward against centred differences, in float64 (relative error < 1e-7)."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close

import mhattn
from mhattn import functional as F
from mhattn.gradcheck import check_backward, numerical_gradient, rel_error

TOL = 1e-7


def arr(rng, *shape):
    return mhattn.asarray(rng.standard_normal(shape))


@pytest.mark.usefixtures("backend")
def test_linear(rng):
    errs = check_backward(F.linear_forward, F.linear_backward, [arr(rng, 2, 3, 5), arr(rng, 5, 4), arr(rng, 4)])
    assert max(errs) < TOL, errs


@pytest.mark.usefixtures("backend")
def test_linear_without_bias(rng):
    x, W = arr(rng, 2, 3, 5), arr(rng, 5, 4)
    errs = check_backward(lambda x, W: F.linear_forward(x, W), lambda d, c: F.linear_backward(d, c)[:2], [x, W])
    assert max(errs) < TOL, errs


@pytest.mark.usefixtures("backend")
def test_split_and_combine_heads(rng):
    split = lambda x: F.split_heads_forward(x, 3)
    assert check_backward(split, lambda d, c: (F.split_heads_backward(d, c),), [arr(rng, 2, 4, 6)])[0] < TOL
    combine_bwd = lambda d, c: (F.combine_heads_backward(d, c),)
    assert check_backward(F.combine_heads_forward, combine_bwd, [arr(rng, 2, 3, 4, 2)])[0] < TOL


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("masked", [False, True])
def test_softmax(rng, masked):
    mask = None
    if masked:
        mask = mhattn.asarray(rng.random((3, 4, 5)) < 0.4)
        mask[1, 2, ...] = True  # one row with nothing allowed
    fwd = lambda s: F.softmax_forward(s, mask)
    errs = check_backward(fwd, lambda d, c: (F.softmax_backward(d, c),), [arr(rng, 3, 4, 5) * 3])
    assert errs[0] < TOL, errs


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("mask_kind", [None, "bool", "float", "causal_with_empty_row"])
def test_scaled_dot_product_attention(rng, mask_kind):
    mask = None
    if mask_kind == "bool":
        mask = mhattn.asarray(rng.random((2, 1, 4, 6)) < 0.3)
    elif mask_kind == "float":
        mask = arr(rng, 4, 6)
    elif mask_kind == "causal_with_empty_row":
        mask = mhattn.causal_mask(4, 6)
        mask[2, ...] = True
    fwd = lambda q, k, v: F.scaled_dot_product_attention_forward(q, k, v, mask)
    q, k, v = arr(rng, 2, 3, 4, 5), arr(rng, 2, 3, 6, 5), arr(rng, 2, 3, 6, 2)
    errs = check_backward(fwd, F.scaled_dot_product_attention_backward, [q, k, v])
    assert max(errs) < TOL, errs


@pytest.mark.usefixtures("backend")
def test_attention_with_dropout_reuses_the_mask(rng):
    q, k, v = arr(rng, 1, 2, 3, 4), arr(rng, 1, 2, 5, 4), arr(rng, 1, 2, 5, 4)
    seed = 5
    # a fresh generator with the same seed on every call: the same dropout mask each time
    fwd = lambda q, k, v: F.scaled_dot_product_attention_forward(q, k, v, None, 0.5, np.random.default_rng(seed))
    errs = check_backward(fwd, F.scaled_dot_product_attention_backward, [q, k, v])
    assert max(errs) < TOL, errs


def mha_op(params, num_heads, self_attention, **kw):
    """forward/backward over (query, key, value, *params, head_mask) for check_backward."""
    names = list(params)

    def forward(q, k, v, *rest):
        p = dict(zip(names, rest[: len(names)], strict=True))
        hm = rest[len(names)] if len(rest) > len(names) else None
        k, v = (q, q) if self_attention else (k, v)
        return F.multi_head_attention_forward(q, k, v, p, num_heads, head_mask=hm, **kw)

    def backward(dout, cache):
        dq, dk, dv, grads, dhm = F.multi_head_attention_backward(dout, cache)
        if self_attention:
            dq, dk, dv = dq + dk + dv, dk * 0, dv * 0
        return (dq, dk, dv, *[grads[n] for n in names]) + ((dhm,) if dhm is not None else ())

    return forward, backward


@pytest.mark.parametrize("self_attention", [True, False])
@pytest.mark.parametrize("masks", [False, True])
def test_multi_head_attention(backend, rng, self_attention, masks):
    if backend.name != "numpy" and not masks:
        pytest.skip("~500 centred differences: other legs check the masked variant, whose paths include the unmasked")
    B, T, S, d, h = 2, 3, 4, 6, 2
    S = T if self_attention else S
    kdim, vdim = (d, d) if self_attention else (5, 3)
    mod = mhattn.MultiHeadAttention(d, h, kdim=kdim, vdim=vdim, dtype="float64", seed=1)
    params = {k: v + mhattn.asarray(0.1 * rng.standard_normal(v.shape)) for k, v in mod.params.items()}
    kw = {}
    if masks:
        kw["attn_mask"] = mhattn.causal_mask(T, S)
        pad = np.zeros((B, S), dtype=bool)
        pad[1, -1] = True
        kw["key_padding_mask"] = mhattn.asarray(pad)
    fwd, bwd = mha_op(params, h, self_attention, **kw)
    inputs = [arr(rng, B, T, d), arr(rng, B, S, mod.kdim), arr(rng, B, S, mod.vdim), *params.values(), arr(rng, B, h)]
    errs = dict(zip(["query", "key", "value", *params, "head_mask"], check_backward(fwd, bwd, inputs), strict=True))
    if self_attention:
        del errs["key"], errs["value"]  # they are the query itself there
    del errs["b_k"]  # its gradient is exactly 0: see test_key_bias_gets_no_gradient
    assert max(errs.values()) < TOL, errs


@pytest.mark.usefixtures("backend")
def test_key_bias_gets_no_gradient(rng):
    """q . b_k adds the same number to a whole row of scores, and softmax ignores that shift."""
    mod = mhattn.MultiHeadAttention(6, 2, dtype="float64", seed=0)
    x = arr(rng, 2, 3, 6)
    mod.forward(x)
    mod.backward(arr(rng, 2, 3, 6))
    b_k, b_q = mhattn.to_numpy(mod.grads["b_k"]), mhattn.to_numpy(mod.grads["b_q"])
    assert abs(b_k).max() < 1e-12 * abs(b_q).max()
    assert abs(b_q).max() > 1e-3  # while the query bias does get one


@pytest.mark.usefixtures("backend")
def test_numerical_gradient_of_a_known_function(rng):
    x = arr(rng, 3, 4)
    dout = arr(rng, 3, 4)
    g = numerical_gradient(lambda x: x**3, x, dout)
    xp_assert_close(g, 3 * x**2 * dout, rtol=1e-6, atol=1e-8)
    assert rel_error(g, 3 * x**2 * dout) < 1e-8


def test_rel_error_catches_a_wrong_gradient(rng):
    a = rng.standard_normal(10)
    assert rel_error(a, a) == 0.0
    assert rel_error(a, 2 * a) == pytest.approx(1 / 3)
    assert rel_error(np.zeros(3), np.zeros(3)) == 0.0


def test_check_backward_flags_a_wrong_backward(rng):
    """A softmax backward that keeps only the Jacobian's diagonal must fail the check."""
    wrong = lambda d, c: (d * c.probs * (1 - c.probs),)
    errs = check_backward(lambda s: F.softmax_forward(s), wrong, [rng.standard_normal((2, 5))])
    assert errs[0] > 1e-2
