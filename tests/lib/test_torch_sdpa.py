"""``scaled_dot_product_attention_forward``/``_backward`` against ``torch.nn.functional.scaled_dot_product_attention``.

Follows PyTorch's ``test/test_transformers.py`` (``TestSDPA.test_scaled_dot_product_attention_math_with_negative_scale``
-style ``scale=`` checks, ``test_causal_variants`` for upper-left/lower-right, and the broadcast-shape cases of
``test_scaled_dot_product_attention`` in ``test_ops.py``'s sample generator): every broadcast pattern of q, k, v
and of the mask; each gradient has its input's shape, summed over the dimensions broadcasting added or stretched,
equal to torch autograd's to 1e-9 in float64. Bool masks are flipped for torch (mhattn: True = not allowed; torch's
SDPA: True = allowed).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import LEGS
from xp_testing import xp_assert_close

from mhattn import functional as F
from mhattn.functional.attention import attention_scale_gradient
from mhattn.gradcheck import numerical_gradient, rel_error

TOL = dict(rtol=1e-9, atol=1e-9)
B, H, T, S, D, DV = 2, 3, 4, 5, 6, 7
LEADS = ((B, H), (H,), (1, H), (B, 1), ())  # every way a leading shape broadcasts to (B, H)
MASKS = ((T, S), (1, S), (1, 1, T, S), (B, 1, 1, S), (B, H, T, S), (H, T, S), (B, 1, T, 1))


def _torch_sdpa(torch, q, k, v, dout, mask=None, **kw):
    """torch's output and gradients of the host arrays, as host arrays."""
    t = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    tm = None if mask is None else torch.as_tensor(~mask if mask.dtype == bool else mask)
    out = torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=tm, **kw)
    out.backward(torch.as_tensor(dout))
    return [out.detach().numpy(), *(a.grad.numpy() for a in t)]


def _ours(backend, q, k, v, dout, mask=None, **kw):
    a = [backend.asarray(x) for x in (q, k, v, dout)]
    m = None if mask is None else backend.asarray(mask)
    out, _, cache = F.scaled_dot_product_attention_forward(*a[:3], m, **kw)
    grads = F.scaled_dot_product_attention_backward(a[3], cache)
    assert all(backend.is_here(g) for g in (out, *grads))
    return [backend.to_numpy(x) for x in (out, *grads)]


def _inputs(rng, lq, lk, lv):
    q, k, v = (rng.standard_normal((*lead, n, d)) for lead, n, d in ((lq, T, D), (lk, S, D), (lv, S, DV)))
    out_lead = np.broadcast_shapes(lq, lk, lv)
    return q, k, v, rng.standard_normal((*out_lead, T, DV))


def _mask(rng, shape, kind):
    if kind == "bool":
        m = rng.random(shape) < 0.4
        m[..., 0] = False  # every query keeps a key
        return m
    return rng.standard_normal(shape)


@pytest.mark.torch
@pytest.mark.parametrize("backend", LEGS, indirect=True)
def test_every_broadcast_pattern_of_q_k_v_matches_torch(backend):
    """Follows the broadcast-shape samples of ``sample_inputs_scaled_dot_product_attention`` (test_ops) and issue 35's
    q (4, 3, 8) against k, v (4, 4, 6, 8): all 125 patterns of three leading shapes; each gradient has its input's
    shape and torch's values."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for lq, lk, lv in itertools.product(LEADS, repeat=3):
        q, k, v, dout = _inputs(rng, lq, lk, lv)
        got, want = _ours(backend, q, k, v, dout), _torch_sdpa(torch, q, k, v, dout)
        for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
            assert g.shape == w.shape, (lq, lk, lv, name)
            xp_assert_close(g, w, err_msg=f"{lq} {lk} {lv} {name}", **TOL)


@pytest.mark.torch
@pytest.mark.parametrize("backend", LEGS, indirect=True)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_every_broadcast_pattern_of_the_mask_matches_torch(backend, kind):
    """Follows ``test_scaled_dot_product_attention``'s attn_mask samples (test_ops): bool and float masks of every
    shape that broadcasts to (B, h, T, S) (at least 2-D: see the next test), with q, k, v of three broadcast
    patterns."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    for shape, leads in itertools.product(MASKS, [((B, H),) * 3, ((H,), (B, H), (B, 1)), ((), (B, H), ())]):
        q, k, v, dout = _inputs(rng, *leads)
        m = _mask(rng, shape, kind)
        got, want = _ours(backend, q, k, v, dout, m), _torch_sdpa(torch, q, k, v, dout, m)
        for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
            xp_assert_close(g, w, err_msg=f"mask {shape}, {leads}, {name}", **TOL)


@pytest.mark.torch
@pytest.mark.parametrize("backend", LEGS, indirect=True)
@pytest.mark.parametrize("t_s", [(4, 4), (3, 6), (6, 3)])
def test_scale_and_both_causal_alignments_match_torch(backend, t_s):
    """Follows ``test_causal_variants`` (upper-left ``is_causal``, ``causal_lower_right`` for T != S) and the
    ``scale=`` samples of test_transformers: torch's lower-right bias is passed to it as its mask."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention.bias import causal_lower_right

    t, s = t_s
    rng = np.random.default_rng(t * 10 + s)
    q, k, v = rng.standard_normal((B, H, t, D)), rng.standard_normal((B, H, s, D)), rng.standard_normal((B, H, s, DV))
    dout = rng.standard_normal((B, H, t, DV))
    for scale in (None, 0.3, 2.0):
        got = _ours(backend, q, k, v, dout, is_causal=True, scale=scale)
        want = _torch_sdpa(torch, q, k, v, dout, is_causal=True, scale=scale)
        for g, w in zip(got, want, strict=True):
            xp_assert_close(g, w, err_msg=f"upper-left scale={scale}", **TOL)
        if t <= s:  # lower-right with T > S leaves the first queries no key (NaN in torch, 0 here)
            lr = ~causal_lower_right(t, s)._materialize().numpy()  # mhattn's convention: True = not allowed
            got = _ours(backend, q, k, v, dout, is_causal=True, causal="lower_right", scale=scale)
            want = _torch_sdpa(torch, q, k, v, dout, lr, scale=scale)
            for g, w in zip(got, want, strict=True):
                xp_assert_close(g, w, err_msg=f"lower-right scale={scale}", **TOL)


def test_gradients_summed_over_broadcast_dimensions_equal_finite_differences(rng):
    """mhattn's own check of the same claim, torch-free: q (T, d_k) used by every (b, h), k (h, S, d_k), v
    (B, 1, S, d_v), a (B, 1, 1, S) float mask: each gradient equals centred differences of its input."""
    q, k, v = rng.standard_normal((T, D)), rng.standard_normal((H, S, D)), rng.standard_normal((B, 1, S, DV))
    m = rng.standard_normal((B, 1, 1, S))
    dout = rng.standard_normal((B, H, T, DV))
    _, _, cache = F.scaled_dot_product_attention_forward(q, k, v, m, scale=0.7)
    grads = F.scaled_dot_product_attention_backward(dout, cache)
    inputs = [q, k, v]
    for i, g in enumerate(grads):

        def f(x, i=i):
            args = [x if j == i else a for j, a in enumerate(inputs)]
            return F.scaled_dot_product_attention_forward(*args, m, scale=0.7)[0]

        assert g.shape == inputs[i].shape
        assert rel_error(g, numerical_gradient(f, inputs[i], dout)) < 1e-8


def test_scale_gradient_equals_finite_differences(rng):
    """``attention_scale_gradient``: ∂L/∂scale for a caller that learns the scale, against centred differences."""
    q, k, v = rng.standard_normal((B, H, T, D)), rng.standard_normal((B, H, S, D)), rng.standard_normal((B, H, S, DV))
    dout = rng.standard_normal((B, H, T, DV))
    mask = np.triu(np.ones((T, S), bool), 1)
    scale = 0.45
    _, _, cache = F.scaled_dot_product_attention_forward(q, k, v, mask, scale=scale)
    dq, _, _ = F.scaled_dot_product_attention_backward(dout, cache)
    got = float(attention_scale_gradient(dq, q, scale))
    loss = lambda s: float(np.sum(F.scaled_dot_product_attention_forward(q, k, v, mask, scale=s)[0] * dout))  # noqa: E731
    want = (loss(scale + 1e-6) - loss(scale - 1e-6)) / 2e-6
    assert abs(got - want) < 1e-7 * max(1.0, abs(want))


def test_scaled_dot_product_attention_refuses_what_torch_refuses():
    """Follows ``test_invalid_inputs`` (test_transformers): a 1-D mask (torch: IndexError), ``is_causal`` with a
    mask, a scale that is no positive number; each error names the argument."""
    q = np.zeros((1, 1, 2, 4))
    with pytest.raises(ValueError, match=r"mask must be at least 2-D \(..., T, S\), got shape \(2,\)"):
        F.scaled_dot_product_attention_forward(q, q, q, np.zeros(2, bool))
    with pytest.raises(ValueError, match=r"leading dimensions of q \(2, 2, 4\), k \(3, 2, 4\), v \(3, 2, 4\)"):
        F.scaled_dot_product_attention_forward(np.zeros((2, 2, 4)), np.zeros((3, 2, 4)), np.zeros((3, 2, 4)))
    with pytest.raises(ValueError, match=r"give attn_mask or is_causal=True, not both"):
        F.scaled_dot_product_attention_forward(q, q, q, np.zeros((2, 2), bool), is_causal=True)
    for bad in (0.0, -1.0, "0.5", True):
        with pytest.raises(ValueError, match=r"scale must be None or a positive real number"):
            F.scaled_dot_product_attention_forward(q, q, q, scale=bad)
    with pytest.raises(ValueError, match=r"causal must be 'upper_left' or 'lower_right', got 'lower'"):
        F.scaled_dot_product_attention_forward(q, q, q, is_causal=True, causal="lower")
