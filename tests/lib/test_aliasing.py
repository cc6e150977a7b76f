"""No functional forward hands back an array its backward reads: writing into what a forward
returned changes neither a later backward nor the forward's inputs."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_equal

import mhattn
from mhattn import functional as F
from mhattn.functional.dropout import dropout_backward, dropout_forward
from mhattn.functional.embedding import embedding_backward, embedding_forward
from mhattn.functional.encoder import BLOCK_PARAM_NAMES, encoder_block_backward, encoder_block_forward
from mhattn.functional.feedforward import feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.functional.positional import positional_encoding_backward, positional_encoding_forward
from mhattn.functional.transformer import transformer_backward, transformer_forward
from mhattn.nn.init import init_encoder_block, init_mha_params
from mhattn.nn.transformer import ModelConfig, init_params

B, T, D, H = 2, 3, 8, 2


def _r(rng, *shape):
    return mhattn.asarray(rng.standard_normal(shape))


def _case(name, rng):
    """(forward's returned arrays, its inputs, a function running its backward on fresh upstream gradients)."""
    x, g = _r(rng, B, T, D), _r(rng, B, T, D)
    if name == "softmax":
        p, c = F.softmax_forward(x)
        return [p], [x], lambda: [F.softmax_backward(g, c)]
    if name == "attention":
        q4, d4 = _r(rng, B, H, T, 4), _r(rng, B, H, T, 4)
        out, w, c = F.scaled_dot_product_attention_forward(q4, q4, q4, mhattn.causal_mask(T))
        return [out, w], [q4], lambda: F.scaled_dot_product_attention_backward(d4, c)
    if name == "mha":
        host = init_mha_params(D, D, D, True, np.dtype("float64"), np.random.default_rng(0))
        params = {n: mhattn.asarray(v) for n, v in host.items()}
        out, w, c = F.multi_head_attention_forward(x, x, x, params, H, attn_mask=mhattn.causal_mask(T))

        def backward():
            dq, dk, dv, grads, _ = F.multi_head_attention_backward(g, c)
            return [dq, dk, dv, *grads.values()]

        return [out, w], [x, *params.values()], backward
    if name in ("dropout p=0", "dropout p=0.5"):
        out, c = dropout_forward(x, 0.0 if name == "dropout p=0" else 0.5, np.random.default_rng(0))
        return [out], [x], lambda: [dropout_backward(g, c)]
    if name == "linear":
        W = _r(rng, D, 5)
        out, c = F.linear_forward(x, W)
        return [out], [x, W], lambda: F.linear_backward(_r(np.random.default_rng(1), B, T, 5), c)[:2]
    if name == "layernorm":
        gamma, beta = _r(rng, D), _r(rng, D)
        out, c = layernorm_forward(x, gamma, beta)
        return [out], [x, gamma, beta], lambda: layernorm_backward(g, c)
    if name == "feedforward":
        W1, b1, W2, b2 = _r(rng, D, 6), _r(rng, 6), _r(rng, 6, D), _r(rng, D)
        out, c = feedforward_forward(x, W1, b1, W2, b2)
        return [out], [x, W1, b1, W2, b2], lambda: feedforward_backward(g, c)
    if name == "embedding":
        ids, W = mhattn.asarray(np.array([[0, 1, 1], [2, 0, 3]])), _r(rng, 4, D)
        out, c = embedding_forward(ids, W)
        return [out], [W], lambda: [embedding_backward(g, c)]
    if name == "positional":
        out, c = positional_encoding_forward(x)
        return [out], [x], lambda: [positional_encoding_backward(g, c)]
    if name == "encoder block":
        params = {n: mhattn.asarray(v) for n, v in init_encoder_block(D, 16, np.random.default_rng(0), "float64").items()}
        out, w, c = encoder_block_forward(x, params, H, attn_mask=mhattn.causal_mask(T))
        return [out, w], [x, *(params[n] for n in BLOCK_PARAM_NAMES)], lambda: [encoder_block_backward(g, c)[0]]
    assert name == "transformer"
    cfg = ModelConfig(vocab_size=5, output_sizes=(3,), d_model=D, num_heads=H, d_ff=16, causal=True)
    params = init_params(cfg, np.random.default_rng(0), "float64")
    ids = mhattn.asarray(np.array([[0, 1, 4], [2, 2, 3]]))
    (logits,), weights, c = transformer_forward(ids, params, H, 1, 1, causal=True)
    dl = _r(rng, B, T, 3)
    return [logits, *weights], list(params.values()), lambda: list(transformer_backward([dl], c)[0].values())


CASES = [
    "softmax", "attention", "mha", "dropout p=0", "dropout p=0.5", "linear", "layernorm", "feedforward",
    "embedding", "positional", "encoder block", "transformer",
]  # fmt: skip


def _scribble(a):
    """Write into ``a`` if it lets us; a read-only array (NumPy) refuses with ValueError."""
    try:
        a[...] = 7.0
    except ValueError:
        assert not a.flags.writeable


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("name", CASES)
def test_writing_into_a_forward_output_changes_no_backward_and_no_input(rng, name):
    returned, inputs, backward = _case(name, rng)
    inputs_before = [mhattn.to_numpy(a).copy() for a in inputs]
    grads_before = [mhattn.to_numpy(a).copy() for a in backward()]
    for a in returned:
        _scribble(a)
    for before, after in zip(grads_before, backward(), strict=True):
        xp_assert_equal(after, before, check_namespace=False)
    for before, a in zip(inputs_before, inputs, strict=True):
        xp_assert_equal(a, before, check_namespace=False)


def test_dropout_with_p_zero_does_not_return_its_input():
    x = np.ones(3)
    out, _ = dropout_forward(x, 0.0)
    assert out is not x and not out.flags.writeable
