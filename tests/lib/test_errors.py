"""Bad input gets a clear error with the numbers in it, and nothing is mutated."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_equal

import mhattn
from mhattn import MultiHeadAttention
from mhattn import functional as F


@pytest.fixture
def mod():
    return MultiHeadAttention(8, 2, dtype="float64", seed=0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(d_model=10, num_heads=3), r"d_model=10 is not divisible by num_heads=3"),
        (dict(d_model=0, num_heads=1), r"d_model must be a positive integer, got 0"),
        (dict(d_model=8, num_heads=2, dropout=1.0), r"dropout must be a number in \[0, 1\), got 1.0"),
        (dict(d_model=8, num_heads=2, dtype="int32"), r"dtype must be float16, float32, float64 or .* got 'int32'"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_wrong_trailing_dimension(mod):
    with pytest.raises(ValueError, match=r"query has trailing dimension 7, but W_q expects 8"):
        mod(np.zeros((2, 3, 7)))
    with pytest.raises(ValueError, match=r"key has trailing dimension 5, but W_k expects 8"):
        mod(np.zeros((2, 3, 8)), np.zeros((2, 4, 5)))


def test_wrong_rank(mod):
    with pytest.raises(ValueError, match=r"query must be 3-D \(B, T, E\) or unbatched 2-D \(T, E\), got shape \(1, 3, 8, 1\)"):
        mod(np.zeros((1, 3, 8, 1)))
    with pytest.raises(ValueError, match=r"query is 2-D but key has shape \(1, 4, 8\)"):
        mod(np.zeros((3, 8)), np.zeros((1, 4, 8)))
    with pytest.raises(ValueError, match=r"query must be 3-D \(B, L, E\) \(batch first\), got shape \(3, 8\)"):
        F.multi_head_attention_forward(np.zeros((3, 8)), np.zeros((3, 8)), np.zeros((3, 8)), mod.params, 2)


def test_batch_and_length_mismatch(mod):
    with pytest.raises(ValueError, match=r"batch/length mismatch"):
        mod(np.zeros((2, 3, 8)), np.zeros((2, 4, 8)), np.zeros((2, 5, 8)))
    with pytest.raises(ValueError, match=r"batch/length mismatch"):
        mod(np.zeros((2, 3, 8)), np.zeros((1, 4, 8)))


def test_integer_input(mod):
    with pytest.raises(TypeError, match=r"query must be a float32 or float64 array, got int64"):
        mod(np.zeros((2, 3, 8), dtype=np.int64))
    with pytest.raises(
        TypeError, match=r"query must be an array \(NumPy, CuPy, torch or array-api-strict; see mhattn.asarray\), got list"
    ):
        mod([[[0.0] * 8]])


def test_dtype_mismatch(mod):
    with pytest.raises(TypeError, match=r"query has dtype float32 but the parameters are float64"):
        mod(np.zeros((2, 3, 8), dtype=np.float32))


@pytest.mark.parametrize(
    "mask,match",
    [
        (np.zeros((3, 5), bool), r"attn_mask has shape \(3, 5\); expected \(T, S\)=\(3, 4\)"),
        (np.zeros((2, 3, 3, 4), bool), r"attn_mask has shape \(2, 3, 3, 4\)"),
        (np.zeros((1, 1, 1, 3, 4), bool), r"attn_mask has shape \(1, 1, 1, 3, 4\)"),
        (np.zeros((3, 4), np.int64), r"attn_mask must be bool .* or float .*, got dtype int64"),
    ],
)
def test_attn_mask_errors(mod, mask, match):
    with pytest.raises((ValueError, TypeError), match=match):
        mod(np.zeros((2, 3, 8)), np.zeros((2, 4, 8)), attn_mask=mask)


def test_key_padding_mask_errors(mod):
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(2, 3\); expected \(B, S\)=\(2, 4\)"):
        mod(np.zeros((2, 3, 8)), np.zeros((2, 4, 8)), key_padding_mask=np.zeros((2, 3), bool))


def test_head_mask_errors(mod):
    with pytest.raises(ValueError, match=r"head_mask has shape \(3,\); expected \(h,\)=\(2,\) or \(B, h\)=\(2, 2\)"):
        mod(np.zeros((2, 3, 8)), head_mask=np.ones(3))


def test_torch_mask_layout_b_times_h_is_accepted(mod, rng):
    x = rng.standard_normal((2, 3, 8))
    m = rng.random((2, 2, 3, 3)) < 0.3
    a, _ = mod(x, attn_mask=m)
    b, _ = mod(x, attn_mask=m.reshape(4, 3, 3))
    xp_assert_equal(a, b)


def test_backward_before_forward(mod):
    with pytest.raises(RuntimeError, match=r"backward\(\) called before forward\(\)"):
        mod.backward(np.zeros((2, 3, 8)))


def test_backward_with_wrong_dout(mod):
    mod(np.zeros((2, 3, 8)))
    with pytest.raises(ValueError, match=r"dout must have the output's shape \(2, 3, 8\), got \(2, 3, 7\)"):
        mod.backward(np.zeros((2, 3, 7)))
    with pytest.raises(TypeError, match=r"dout has dtype float32, expected float64"):
        mod.backward(np.zeros((2, 3, 8), np.float32))


def test_state_dict_errors_leave_parameters_alone(mod):
    before = {k: v.copy() for k, v in mod.params.items()}
    sd = mod.to_torch_state_dict()
    bad_shape = dict(sd, **{"out_proj.weight": np.zeros((8, 7))})
    with pytest.raises(ValueError, match=r"out_proj.weight has shape \(8, 7\), expected \(8, 8\)"):
        mod.load_torch_state_dict(bad_shape)
    missing = {k: v for k, v in sd.items() if k != "in_proj_bias"}
    with pytest.raises(KeyError, match=r"in_proj_bias"):
        mod.load_torch_state_dict(missing)
    with pytest.raises(KeyError, match=r"add_bias_kv=False"):
        mod.load_torch_state_dict(dict(sd, bias_k=np.zeros((1, 1, 8))))
    for k in before:
        xp_assert_equal(before[k], mod.params[k])


def test_split_heads_errors():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by num_heads=4"):
        F.split_heads_forward(np.zeros((1, 2, 10)), 4)
    with pytest.raises(ValueError, match=r"split_heads: x must be \(B, T, d_model\), got shape \(2, 10\)"):
        F.split_heads_forward(np.zeros((2, 10)), 2)


def test_softmax_mask_errors():
    with pytest.raises(TypeError, match=r"mask must be boolean .* got dtype float64"):
        F.softmax_forward(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4\) does not broadcast to scores \(2, 3\)"):
        F.softmax_forward(np.zeros((2, 3)), np.zeros((2, 4), bool))


def test_causal_mask_errors():
    with pytest.raises(ValueError, match=r"causal_mask: T must be a positive int, got 0"):
        mhattn.causal_mask(0)


def test_nothing_is_mutated(rng):
    """Inputs, masks, dout and every cached activation are the same after forward and backward."""
    mod = MultiHeadAttention(8, 2, dtype="float64", seed=0, dropout=0.3)
    q, k, v, dout = (rng.standard_normal(s) for s in ((2, 3, 8), (2, 4, 8), (2, 4, 8), (2, 3, 8)))
    attn_mask, pad, hm = rng.standard_normal((3, 4)), np.zeros((2, 4), bool), np.array([0.5, 2.0])
    pad[0, -1] = True
    given = [q, k, v, dout, attn_mask, pad, hm]
    copies = [a.copy() for a in given]
    mod(q, k, v, attn_mask=attn_mask, key_padding_mask=pad, head_mask=hm, training=True)
    cached = _arrays(mod._cache)
    cached_copies = [a.copy() for a in cached]
    params = {n: p.copy() for n, p in mod.params.items()}
    grads1 = [g.copy() for g in mod.backward(dout)]
    grads2 = mod.backward(dout)  # a second backward over the same cache gives the same answer
    for a, c in zip(given + cached, copies + cached_copies, strict=True):
        xp_assert_equal(a, c)
    for n in params:
        xp_assert_equal(params[n], mod.params[n])
    for g1, g2 in zip(grads1, grads2, strict=True):
        xp_assert_equal(g1, g2)


def _arrays(obj):
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return [obj]
    if isinstance(obj, tuple):
        return [a for item in obj for a in _arrays(item)]
    return []


def test_state_dict_with_biases_refused_by_a_bias_free_module():
    with_bias = MultiHeadAttention(8, 2, seed=0).to_torch_state_dict()
    with pytest.raises(KeyError, match=r"does not use \(the module has bias=False\).*in_proj_bias"):
        MultiHeadAttention(8, 2, bias=False).load_torch_state_dict(with_bias)


def test_state_dict_with_both_layouts_or_integer_weights_is_refused(mod):
    sd = mod.to_torch_state_dict()
    both = dict(sd, q_proj_weight=sd["in_proj_weight"][:8])
    with pytest.raises(KeyError, match=r"q_proj_weight"):
        mod.load_torch_state_dict(both)
    with pytest.raises(TypeError, match=r"out_proj.weight has dtype int64; expected floating point"):
        mod.load_torch_state_dict(dict(sd, **{"out_proj.weight": np.zeros((8, 8), np.int64)}))


def test_returned_per_head_weights_are_not_the_cached_ones(mod, rng):
    x, dout = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))
    _, w = mod(x, average_attn_weights=False)
    g1 = mod.backward(dout)[0].copy()
    w *= 2.0  # the learner's copy; backward must not see it
    xp_assert_equal(mod.backward(dout)[0], g1)


def test_ambiguous_3d_mask_is_refused(rng):
    """(B, T, S) with B == h could mean per-batch or per-head: refuse it, as torch does."""
    m = MultiHeadAttention(4, 2, dtype="float64")
    with pytest.raises(ValueError, match=r"attn_mask has shape \(2, 3, 3\)"):
        m(rng.standard_normal((2, 3, 4)), attn_mask=np.zeros((2, 3, 3), bool))
    m(rng.standard_normal((2, 3, 4)), attn_mask=np.zeros((1, 3, 3), bool))  # a leading 1 is fine


def test_float_mask_with_nan_or_plus_inf_is_refused(mod):
    bad = np.zeros((3, 3))
    bad[0, 1] = np.inf
    with pytest.raises(ValueError, match=r"attn_mask holds NaN or \+inf"):
        mod(np.zeros((2, 3, 8)), attn_mask=bad)
    bad[0, 1] = np.nan
    with pytest.raises(ValueError, match=r"attn_mask holds NaN or \+inf"):
        mod(np.zeros((2, 3, 8)), attn_mask=bad)


def test_attention_op_checks_its_own_inputs(rng):
    q, k = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 5, 4))
    with pytest.raises(TypeError, match=r"mask must be bool .* got dtype int64"):
        F.scaled_dot_product_attention_forward(q, k, k, np.eye(3, 5, dtype=int))
    with pytest.raises(TypeError, match=r"k has dtype float32 but the parameters are float64"):
        F.scaled_dot_product_attention_forward(q, k.astype(np.float32), k)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4\) does not broadcast to the scores \(1, 2, 3, 5\)"):
        F.scaled_dot_product_attention_forward(q, k, k, np.zeros((3, 4)))


@pytest.mark.parametrize(
    "name,value,err,match",
    [
        ("W_k", np.zeros((8, 10)), ValueError, r"W_k has shape \(8, 10\), expected \(8, 8\)"),
        ("b_v", np.zeros(6), ValueError, r"b_v has shape \(6,\), expected \(8,\)"),
        ("W_o", np.zeros((8, 8), np.float32), TypeError, r"W_o has dtype float32 but the parameters are float64"),
        ("W_q", np.zeros(8), ValueError, r"W_q must be 2-D"),
        ("b_k", None, KeyError, r"all four biases"),
    ],
)
def test_wrong_parameters_are_named(mod, name, value, err, match):
    mod.params[name] = value
    with pytest.raises(err, match=match):
        mod(np.zeros((2, 3, 8)))


def test_non_arrays_are_refused_clearly(mod):
    with pytest.raises(TypeError, match=r"attn_mask must be an array \(NumPy, CuPy, torch or array-api-strict; .*\), got list"):
        mod(np.zeros((2, 3, 8)), attn_mask=[[False] * 3] * 3)
    with pytest.raises(TypeError, match=r"W_k must be an array \(NumPy, CuPy, torch or array-api-strict; .*\), got list"):
        F.multi_head_attention_forward(
            np.zeros((2, 3, 8)), np.zeros((2, 3, 8)), np.zeros((2, 3, 8)), {**mod.params, "W_k": [[0.0]]}, 2
        )


def test_two_libraries_in_one_call_are_named(mod):
    """A torch tensor is an array mhattn accepts, but not beside NumPy parameters: the error names both."""
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"arrays of two libraries in one call: numpy and torch"):
        mod(torch.zeros(2, 3, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"arrays of two libraries in one call: numpy and torch"):
        mod(np.zeros((2, 3, 8)), attn_mask=torch.zeros(3, 3, dtype=torch.bool))
    mod(np.zeros((2, 3, 8)))
    with pytest.raises(TypeError, match=r"arrays of two libraries in one call: numpy and torch"):
        mod.backward(torch.zeros(2, 3, 8, dtype=torch.float64))


def test_two_devices_in_one_call_are_named():
    strict = pytest.importorskip("array_api_strict")
    x = strict.asarray(np.zeros((2, 3, 8)), device=strict.Device("device1"))
    params = {n: strict.asarray(np.eye(8)) for n in ("W_q", "W_k", "W_v", "W_o")}  # the default device
    with pytest.raises(ValueError, match=r"arrays on two devices in one call: .*CPU_DEVICE.* and .*device1"):
        F.multi_head_attention_forward(x, x, x, params, 2)


def test_empty_keys_are_refused(mod):
    with pytest.raises(ValueError, match=r"no positions \(S=0\)"):
        mod(np.zeros((2, 3, 8)), np.zeros((2, 0, 8)))


def test_constructor_type_errors():
    with pytest.raises(ValueError, match=r"seed must be None or a non-negative integer, got -1"):
        MultiHeadAttention(8, 2, seed=-1)
    with pytest.raises(TypeError, match=r"bias must be True or False, got 'False'"):
        MultiHeadAttention(8, 2, bias="False")
