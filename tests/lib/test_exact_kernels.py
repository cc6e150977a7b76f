"""The faster kernels of the main job give the very bits of the plain NumPy calls they replace.

``mhattn prune``'s report must not change when its steps get faster, so each rewrite is
checked bit for bit against the call it stands in for, not within a tolerance (``np.array_equal``, which
counts -0.0 and +0.0 as equal: an in-place ReLU gives +0.0 where ``h * (h > 0)`` gave -0.0).

Bit for bit holds only where the arithmetic is the same: a reference that multiplies with a batched 3-D matmul
where the code makes one 2-D GEMM sums in another order on some BLAS kernels (``OPENBLAS_CORETYPE=Haswell``),
so each reference below makes the very GEMM calls the code makes and differs only in the step under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from mhattn.functional.feedforward import feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.kernels.rows import max_last


def row_max(z):
    return max_last(z)


@pytest.mark.parametrize("shape", [(3, 1), (4, 2), (5, 3), (2, 7), (6, 16), (3, 66), (2, 4, 17)])
def test_row_max_is_max_bit_for_bit(shape):
    z = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    z[0, ..., -1] = -np.inf
    if shape[-1] > 2:
        z[-1, ..., 1] = np.nan  # NaN wins, as in max
    got, want = row_max(z), z.max(axis=-1, keepdims=True)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want, equal_nan=True)


def _gemm(a, W):
    """``a @ W`` as linear_forward/backward make it: one 2-D GEMM over all positions."""
    return (a.reshape(-1, a.shape[-1]) @ W).reshape(*a.shape[:-1], W.shape[-1])


def test_relu_gives_the_masked_product_and_its_gradient():
    rng = np.random.default_rng(2)
    x, W1, b1 = rng.standard_normal((4, 5, 6)), rng.standard_normal((6, 9)), rng.standard_normal(9)
    W2, b2 = rng.standard_normal((9, 6)), rng.standard_normal(6)
    out, cache = feedforward_forward(x, W1, b1, W2, b2)
    hidden = _gemm(x, W1) + b1
    assert np.array_equal(out, _gemm(hidden * (hidden > 0), W2) + b2)
    dout = rng.standard_normal(out.shape)
    dx = feedforward_backward(dout, cache)[0]
    assert np.array_equal(dx, _gemm(_gemm(dout, W2.T) * (hidden > 0), W1.T))


def test_layernorm_in_place_steps_give_the_textbook_formula():
    rng = np.random.default_rng(3)
    x, g, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 5, 12), (12,), (12,)))
    out, cache = layernorm_forward(x, g, b)
    xc = x - x.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / (((xc * xc).mean(axis=-1, keepdims=True) + 1e-5) ** 0.5)
    xhat = xc * inv_std
    assert np.array_equal(out, xhat * g + b)
    dout = rng.standard_normal(x.shape).astype(np.float32)
    dxhat = dout * g
    want = inv_std * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    assert np.array_equal(layernorm_backward(dout, cache)[0], want)


def test_cross_entropy_picks_the_log_softmax_and_its_gradient_is_softmax_minus_onehot():
    rng = np.random.default_rng(4)
    z = rng.standard_normal((6, 7)).astype(np.float32)
    y = rng.integers(0, 7, 6)
    shifted = z - z.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss, cache = cross_entropy_forward(z, y)
    assert loss == -float(logp[np.arange(6), y].sum()) / 6
    want = np.exp(logp)
    want[np.arange(6), y] -= 1.0
    assert np.array_equal(cross_entropy_backward(1.0, cache), want * np.float32(1.0 / 6))


@pytest.mark.parametrize("S", [1, 64, 65, 300])
def test_row_max_outside_the_halving_range_is_max_itself_and_fresh(S):
    z = np.random.default_rng(6).standard_normal((3, 4, S)).astype(np.float32)
    got = row_max(z)
    assert np.array_equal(got, z.max(axis=-1, keepdims=True)) and not np.shares_memory(got, z)


def test_cross_entropy_with_ignored_rows_matches_the_textbook_steps():
    rng = np.random.default_rng(7)
    z = rng.standard_normal((6, 5)).astype(np.float32)
    y = np.array([0, -100, 4, 2, -100, 1])
    valid = y != -100
    shifted = z - z.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss, cache = cross_entropy_forward(z, y)
    assert loss == -float((logp[np.arange(6), np.where(valid, y, 0)] * valid).sum()) / 4
    want = np.exp(logp)
    want[np.arange(6), np.where(valid, y, 0)] -= 1.0
    want *= (valid * np.float32(1.0 / 4))[:, None]
    got = cross_entropy_backward(1.0, cache)
    assert np.array_equal(got, want) and np.all(got[~valid] == 0)
