"""An encoder block is its attention's heads followed by its tail (issue 33): the head analysis reruns only the tail
when only the head mask ξ changes, so the tail must give the block's own output and the block's own dξ."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close

from mhattn.functional.encoder import (
    block_tail_backward,
    block_tail_forward,
    encoder_block_backward,
    encoder_block_forward,
)
from mhattn.nn.init import init_encoder_block


@pytest.mark.parametrize("xi_shape", [(2,), (3, 2), None])
def test_the_block_is_its_heads_then_its_tail(backend, xi_shape):
    rng = np.random.default_rng(0)
    params = {n: backend.asarray(v) for n, v in init_encoder_block(8, 16, rng, "float64").items()}
    x, dout = (backend.asarray(rng.standard_normal((3, 5, 8))) for _ in range(2))
    xi = None if xi_shape is None else backend.asarray(rng.random(xi_shape))
    out, _, cache = encoder_block_forward(x, params, 2, head_mask=xi)
    tail_out, tail = block_tail_forward(x, cache.attn.heads, xi, params)
    xp_assert_close(tail_out, out, rtol=1e-13, atol=1e-13)
    want_dxi = encoder_block_backward(dout, cache)[2]
    dx1, dxi = block_tail_backward(dout, tail)
    assert dx1.shape == x.shape
    if xi is None:
        assert dxi is None and want_dxi is None
    else:
        xp_assert_close(dxi, want_dxi, rtol=1e-12, atol=1e-13)
