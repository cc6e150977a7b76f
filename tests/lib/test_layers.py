"""Gradient checks (float64, centred differences) for every Transformer layer, and their textbook claims."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xp_testing import xp_assert_close, xp_assert_equal

from mhattn.functional.dropout import dropout_backward, dropout_forward
from mhattn.functional.embedding import embedding_backward, embedding_forward
from mhattn.functional.encoder import BLOCK_PARAM_NAMES, encoder_block_backward, encoder_block_forward
from mhattn.functional.feedforward import feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.functional.positional import positional_encoding_backward, positional_encoding_forward, sinusoidal_encoding
from mhattn.gradcheck import check_backward, numerical_gradient, rel_error
from mhattn.nn.init import init_embedding, init_encoder_block, init_linear
from mhattn.nn.transformer import ModelConfig, TransformerModel, init_params, param_shapes

TOL = 1e-7


def test_embedding_scatter_add_accumulates_repeated_ids(backend):
    W = backend.asarray(np.arange(12.0).reshape(4, 3))
    ids = backend.asarray([[1, 1, 3], [1, 0, 3]])
    out, cache = embedding_forward(ids, W)
    xp_assert_close(backend.to_numpy(out)[0, 0], [3, 4, 5], rtol=1e-05, atol=1e-08, check_dtype=False)
    dW = backend.to_numpy(embedding_backward(backend.asarray(np.ones((2, 3, 3))), cache))
    # id 1 appears three times, id 3 twice, id 0 once, id 2 never
    assert np.array_equal(dW[:, 0], [1.0, 3.0, 0.0, 2.0])


def test_embedding_gradcheck(backend, rng):
    ids = rng.integers(0, 5, (3, 4))
    ids[0, :] = 2  # repeats
    ids = backend.asarray(ids)
    (err,) = check_backward(
        lambda W: embedding_forward(ids, W),
        lambda d, c: (embedding_backward(d, c),),
        [backend.asarray(rng.standard_normal((5, 6)))],
    )
    assert err < TOL


def test_embedding_rejects_out_of_range_and_float_ids():
    W = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        embedding_forward(np.array([[4]]), W)
    with pytest.raises(TypeError, match="integer"):
        embedding_forward(np.array([[1.0]]), W)


def test_sinusoidal_table_matches_vaswani_formula():
    pe = sinusoidal_encoding(5, 8, np.zeros(1))
    assert pe[3, 2] == pytest.approx(np.sin(3 / 10000 ** (2 / 8)))
    assert pe[3, 5] == pytest.approx(np.cos(3 / 10000 ** (4 / 8)))
    assert pe.dtype == np.float64 and sinusoidal_encoding(5, 8, np.zeros(1, np.float32)).dtype == np.float32


def test_positional_gradcheck(backend, rng):
    (err,) = check_backward(
        positional_encoding_forward,
        lambda d, c: (positional_encoding_backward(d, c),),
        [backend.asarray(rng.standard_normal((2, 3, 4)))],
    )
    assert err < TOL


def test_layernorm_output_is_normalised_and_gradcheck(backend, rng):
    x = backend.asarray(rng.standard_normal((2, 3, 6)) * 5 + 2)
    out, _ = layernorm_forward(x, backend.asarray(np.ones(6)), backend.asarray(np.zeros(6)))
    out = backend.to_numpy(out)
    assert np.allclose(out.mean(-1), 0, atol=1e-12) and np.allclose(out.var(-1), 1, atol=1e-4)
    errs = check_backward(
        layernorm_forward, layernorm_backward, [x, *(backend.asarray(rng.standard_normal(6)) for _ in range(2))]
    )
    assert max(errs) < TOL


def test_layernorm_keeps_float32(rng):
    x = rng.standard_normal((2, 4)).astype(np.float32)
    out, _ = layernorm_forward(x, np.ones(4, np.float32), np.zeros(4, np.float32))
    assert out.dtype == np.float32


def test_feedforward_gradcheck(backend, rng):
    x = rng.standard_normal((2, 3, 4))
    inputs = [x, rng.standard_normal((4, 7)), rng.standard_normal(7), rng.standard_normal((7, 4)), rng.standard_normal(4)]
    inputs = [backend.asarray(a) for a in inputs]
    assert max(check_backward(feedforward_forward, feedforward_backward, inputs)) < TOL


def test_dropout_keeps_expectation_and_gradient_uses_same_mask(rng):
    x = np.ones((200, 200))
    out, cache = dropout_forward(x, 0.3, np.random.default_rng(0))
    assert abs(out.mean() - 1.0) < 0.02 and abs((out == 0).mean() - 0.3) < 0.01
    assert np.array_equal(dropout_backward(np.ones_like(x), cache), out)


def test_dropout_gradcheck(backend, rng):
    f = lambda x: dropout_forward(x, 0.5, np.random.default_rng(1))
    (err,) = check_backward(f, lambda d, c: (dropout_backward(d, c),), [backend.asarray(rng.standard_normal((3, 4)))])
    assert err < TOL


def test_cross_entropy_ignore_index_and_gradcheck(backend, rng):
    z_host = rng.standard_normal((2, 3, 5))
    z, y = backend.asarray(z_host), backend.asarray(np.array([[0, 4, -100], [2, -100, 1]]))
    loss, cache = cross_entropy_forward(z, y)
    logp = z_host - np.log(np.exp(z_host).sum(-1, keepdims=True))
    assert loss == pytest.approx(-(logp[0, 0, 0] + logp[0, 1, 4] + logp[1, 0, 2] + logp[1, 2, 1]) / 4)
    d = backend.to_numpy(cross_entropy_backward(1.0, cache))
    assert np.all(d[0, 2] == 0) and np.all(d[1, 1] == 0)
    num = numerical_gradient(lambda z: backend.asarray([cross_entropy_forward(z, y)[0]]), z, backend.asarray(np.ones(1)))
    assert rel_error(d, num) < TOL


def _block_inputs(rng, d=8, f=12):
    cfg = ModelConfig(vocab_size=3, output_sizes=(2,), d_model=d, num_heads=2, d_ff=f)
    p = init_params(cfg, rng, "float64")
    return {n: p[f"blocks.0.{n}"] + 0.1 * rng.standard_normal(p[f"blocks.0.{n}"].shape) for n in BLOCK_PARAM_NAMES}


@pytest.mark.parametrize("causal", [False, True])
def test_encoder_block_gradcheck(rng, causal):
    params = _block_inputs(rng)
    mask = np.triu(np.ones((4, 4), bool), 1) if causal else None
    names = [n for n in BLOCK_PARAM_NAMES if n != "attn.b_k"]  # b_k's true gradient is 0 (softmax shift invariance)

    def fwd(x, hm, *vals):
        p = {**params, **dict(zip(names, vals, strict=True))}
        return encoder_block_forward(x, p, 2, attn_mask=mask, head_mask=hm)

    def bwd(d, c):
        dx, g, dhm = encoder_block_backward(d, c)
        assert np.abs(g["attn.b_k"]).max() < 1e-12
        return (dx, dhm, *(g[n] for n in names))

    x = rng.standard_normal((2, 4, 8))
    errs = check_backward(fwd, bwd, [x, rng.uniform(0.5, 1.5, (2, 2)), *(params[n] for n in names)])
    assert max(errs) < TOL


def test_whole_tiny_model_gradcheck_float64(rng):
    """Every parameter and the head mask of a 2-layer causal model with two classifiers."""
    from mhattn.training.loop import multi_loss

    cfg = ModelConfig(vocab_size=7, output_sizes=(5, 3), d_model=8, num_heads=2, num_layers=2, d_ff=12, causal=True)
    model = TransformerModel(cfg, seed=0, dtype="float64")
    for p in model.params.values():  # move away from the init so every gradient is sizeable
        p += 0.5 * rng.standard_normal(p.shape)
    ids = rng.integers(0, 7, (2, 4))
    targets = (rng.integers(0, 5, (2, 4)), rng.integers(0, 3, (2, 4)))
    hm = rng.uniform(0.5, 1.5, (2, 2))

    def loss():
        return multi_loss(model.forward(ids, head_mask=hm)[0], targets)

    _, dlogits = loss()
    grads = dict(model.backward(dlogits))
    dhm = model.head_mask_grad
    for name, p in list(model.params.items()) + [("head_mask", hm)]:
        orig = p.copy()

        def f(v, p=p):
            p[...] = v  # the model reads its parameters in place
            return np.array([loss()[0]])

        num = numerical_gradient(f, orig, np.ones(1))
        p[...] = orig  # numerical_gradient's last call leaves one entry perturbed
        analytic = dhm if name == "head_mask" else grads[name]
        if name.endswith("attn.b_k"):
            assert np.abs(analytic).max() < 1e-12 and np.abs(num).max() < 1e-7
        else:
            assert rel_error(analytic, num) < TOL, name


def test_model_parameters_come_from_the_per_layer_initialisers():
    """One initialiser per layer: the model composes them in order, and param_shapes reads the shapes off them."""
    cfg = ModelConfig(vocab_size=7, output_sizes=(3, 5), d_model=8, num_heads=2, num_layers=2, d_ff=12)
    params = init_params(cfg, np.random.default_rng(0), "float64")
    rng = np.random.default_rng(0)
    expected = {"embed.W": init_embedding(7, 8, rng, "float64")["W"]}
    for layer in range(2):
        expected.update({f"blocks.{layer}.{n}": v for n, v in init_encoder_block(8, 12, rng, "float64").items()})
    expected.update({"ln_f.gamma": np.ones(8), "ln_f.beta": np.zeros(8)})
    for k, c in enumerate((3, 5)):
        expected.update({f"out.{k}.{n}": v for n, v in init_linear(8, c, rng, "float64").items()})
    assert sorted(params) == sorted(expected)
    for name, value in expected.items():
        xp_assert_equal(params[name], value, err_msg=name)
    assert param_shapes(cfg) == {n: v.shape for n, v in params.items()}
    # nn.Linear's bounds U(±1/sqrt(fan_in)): fan_in 8 for W1 and the classifiers, 12 for W2
    assert 0.8 / math.sqrt(8) < np.abs(params["blocks.1.ff.W1"]).max() <= 1 / math.sqrt(8)
    assert 0.8 / math.sqrt(12) < np.abs(params["blocks.1.ff.W2"]).max() <= 1 / math.sqrt(12)
    assert np.abs(params["out.1.W"]).max() <= 1 / math.sqrt(8) and not params["out.1.b"].any()


def test_causal_model_cannot_see_the_future(rng):
    """Changing the tokens after position t leaves the causal model's outputs up to t unchanged (and not otherwise)."""
    for causal in (True, False):
        cfg = ModelConfig(vocab_size=9, output_sizes=(9,), d_model=8, num_heads=2, num_layers=2, d_ff=12, causal=causal)
        model = TransformerModel(cfg, seed=0, dtype="float64")
        ids = rng.integers(0, 9, (1, 6))
        changed = ids.copy()
        changed[0, 4:] = (ids[0, 4:] + 1) % 9
        same = np.allclose(model.forward(ids)[0][0][0, :4], model.forward(changed)[0][0][0, :4])
        assert same == causal
