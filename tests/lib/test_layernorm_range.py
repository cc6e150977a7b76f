"""LayerNorm is right for every finite input of its dtype, forward and backward.

The variance of a float32 row near 1e20 squares to 1e40, past float32's 3.4e38, and a float16 row near 300 to
9e4, past float16's 65504: written plainly, both gave all-zero outputs (torch gets float16 right by computing in
float32, pytorch/pytorch#66707). mhattn divides each row by a power of two near its largest entry (exact) and
computes 16-bit inputs in float32. The reference here is the textbook formula in extended precision
(``np.longdouble``, whose range holds the squares), and torch's ``layer_norm`` where its own range allows.
Tolerances: float64 1e-12 relative; float32 2e-6 absolute on outputs of size about 1 (a few float32 roundings);
float16 one float16 spacing of the exact value (the float32 result rounded once).
"""

from __future__ import annotations

import numpy as np
import pytest

from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.gradcheck import check_backward

D = 16


def _exact(x, gamma, beta, dout, eps=1e-5):
    """Forward and ``dx`` of the textbook LayerNorm in ``np.longdouble``: ``(out, dx, dgamma)``."""
    x, gamma, beta, dout = (np.asarray(a, np.longdouble) for a in (x, gamma, beta, dout))
    xc = x - x.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xhat = xc * inv_std
    dxhat = dout * gamma
    dx = inv_std * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return xhat * gamma + beta, dx, (dout * xhat).reshape(-1, x.shape[-1]).sum(0)


def _inputs(dtype, scale, rng, shape=(4, 3, D)):
    """Rows of size about ``scale`` (the largest entry of the first at the dtype's maximum), gain, bias, dout."""
    x = rng.standard_normal(shape) * scale
    top = float(np.finfo(dtype).max)
    x[0, 0, 0] = top if scale * 4 > top else x[0, 0, 0]
    x = np.clip(x, -top, top).astype(dtype)
    gamma, beta, dout = (rng.standard_normal(s).astype(dtype) for s in ((D,), (D,), shape))
    return x, gamma, beta, dout


@pytest.mark.parametrize(
    "dtype,scale",
    [("float32", 1e20), ("float32", 1e37), ("float32", 3.4e38), ("float32", 1e-30), ("float64", 1e300), ("float64", 1e-300)],
)
def test_forward_and_backward_are_right_at_the_edges_of_the_dtype(dtype, scale, rng):
    x, gamma, beta, dout = _inputs(np.dtype(dtype), scale, rng)
    out, cache = layernorm_forward(x, gamma, beta)
    dx, dgamma, dbeta = layernorm_backward(dout, cache)
    want, want_dx, want_dgamma = _exact(x, gamma, beta, dout)
    assert out.dtype == dx.dtype == np.dtype(dtype)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == "float64" else dict(rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(out, want.astype(np.float64), **tol)
    np.testing.assert_allclose(dgamma, want_dgamma.astype(np.float64), rtol=tol["rtol"], atol=100 * tol["atol"])
    np.testing.assert_allclose(dbeta, dout.sum((0, 1)), rtol=tol["rtol"])
    # dx scales as 1/scale: compare it in units of its own size
    unit = np.abs(want_dx).max()
    np.testing.assert_allclose(dx / unit, (want_dx / unit).astype(np.float64), **tol)


@pytest.mark.parametrize("scale", [1.0, 300.0, 6e4])
def test_float16_is_the_exact_result_rounded_to_float16(scale, rng):
    x, gamma, beta, dout = _inputs(np.dtype("float16"), scale, rng)
    out, cache = layernorm_forward(x, gamma, beta)
    dx, dgamma, dbeta = layernorm_backward(dout, cache)
    want, want_dx, _ = _exact(x, gamma, beta, dout)
    assert out.dtype == dx.dtype == dgamma.dtype == dbeta.dtype == np.float16
    spacing = np.spacing(np.abs(want.astype(np.float16)))  # one float16 step at each value
    assert np.all(np.abs(out - want) <= spacing), np.abs(out - want).max()
    unit = np.abs(want_dx).max()
    assert np.all(np.abs(dx - want_dx) / unit <= 2e-3)  # float16 keeps 11 bits: 2^-11 = 4.9e-4 per rounding


@pytest.mark.torch
@pytest.mark.parametrize("scale", [1.0, 300.0, 6e4])
def test_float16_agrees_with_torch_float16(scale, rng):
    torch = pytest.importorskip("torch")
    x, gamma, beta, _ = _inputs(np.dtype("float16"), scale, rng)
    out, _ = layernorm_forward(x, gamma, beta)
    ref = torch.nn.functional.layer_norm(*(torch.tensor(a) for a in (x,)), (D,), torch.tensor(gamma), torch.tensor(beta))
    spacing = np.spacing(np.abs(ref.numpy()))
    assert np.all(np.abs(out.astype(np.float32) - ref.numpy().astype(np.float32)) <= spacing)  # within one rounding


@pytest.mark.torch
@pytest.mark.parametrize("scale", [1e-3, 1.0, 7.0, 1e3, 1e100])
def test_float64_forward_and_backward_match_torch_to_1e_9(scale, rng):
    torch = pytest.importorskip("torch")
    x, gamma, beta, dout = _inputs(np.dtype("float64"), scale, rng)
    out, cache = layernorm_forward(x, gamma, beta)
    dx, dgamma, dbeta = layernorm_backward(dout, cache)
    xt, gt, bt = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    ref = torch.nn.functional.layer_norm(xt, (D,), gt, bt, eps=1e-5)
    ref.backward(torch.tensor(dout))
    np.testing.assert_allclose(out, ref.detach().numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dx * scale, xt.grad.numpy() * scale, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dgamma, gt.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dbeta, bt.grad.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("scale", [1e-3, 50.0, 1e6])
def test_gradcheck_passes_in_float64_on_the_scaled_path(scale, rng):
    x, gamma, beta, _ = _inputs(np.dtype("float64"), scale, rng, shape=(2, 3, 6))
    gamma, beta = gamma[:6], beta[:6]
    errs = check_backward(layernorm_forward, layernorm_backward, [x, gamma, beta], eps=1e-6 * max(scale, 1.0))
    assert max(errs) < 1e-7, errs


def test_large_rows_on_every_leg_match_numpy(backend, rng):
    x, gamma, beta, dout = _inputs(np.dtype("float32"), 1e20, rng)
    with np.errstate(over="raise"):
        want = [layernorm_forward(x, gamma, beta)[0], *layernorm_backward(dout, layernorm_forward(x, gamma, beta)[1])]
    out, cache = layernorm_forward(*(backend.asarray(a) for a in (x, gamma, beta)))
    got = [out, *layernorm_backward(backend.asarray(dout), cache)]
    for g, w in zip(got, want, strict=True):
        assert backend.is_here(g)
        np.testing.assert_allclose(backend.to_numpy(g), w, rtol=1e-5, atol=1e-6 * np.abs(w).max())


def test_huge_and_tiny_rows_in_one_batch_are_each_right(rng):
    x, gamma, beta, dout = _inputs(np.dtype("float32"), 1.0, rng)
    x[0] *= np.float32(1e30)  # the rows of the first sequence near 1e30, the rest near 1e-3 or 1
    x[1] *= np.float32(1e-3)
    out, cache = layernorm_forward(x, gamma, beta)
    dx = layernorm_backward(dout, cache)[0]
    want, want_dx, _ = _exact(x, gamma, beta, dout)
    np.testing.assert_allclose(out, want.astype(np.float64), rtol=1e-5, atol=2e-6)
    for rows in (0, 1, 2):  # dx per sequence, in units of its own size (it scales as 1 / the row's size)
        unit = np.abs(want_dx[rows]).max()
        np.testing.assert_allclose(dx[rows] / unit, (want_dx[rows] / unit).astype(np.float64), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ordinary_rows_give_the_bits_of_the_plain_formula(dtype, rng):
    x, gamma, beta, _ = _inputs(np.dtype(dtype), 1e4, rng)
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    xhat = xc * (1.0 / ((np.mean(xc * xc, axis=-1, keepdims=True) + 1e-5) ** 0.5))
    np.testing.assert_array_equal(layernorm_forward(x, gamma, beta)[0], xhat * gamma + beta)  # nothing scaled
