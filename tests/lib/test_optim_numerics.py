"""Optimisers, clipping, the loss and the gates: dtypes kept, no overflow, updates in place."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close

import mhattn
from mhattn.course import sweep
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.heads import gates
from mhattn.nn.attention import MultiHeadAttention
from mhattn.optim import SGD, Adam, clip_grad_norm


def _mha_with_grads():
    """On the current backend (the test's leg): parameters, input and gradients are its arrays."""
    mha = MultiHeadAttention(8, 2, seed=0)  # float32
    x = mhattn.asarray(np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32))
    out, _ = mha.forward(x)
    mha.backward(mhattn.asarray(np.ones((2, 3, 8), np.float32)))
    return mha, x, {n: g for n, g in mha.grads.items() if n in mha.params}


@pytest.mark.parametrize(
    "make", [lambda p: Adam(p, lr=np.float64(5e-4)), lambda p: SGD(p, lr=np.float64(0.05), momentum=np.float64(0.9)),
             lambda p: Adam(p, lr=1e-3, clip=np.float64(0.5)), lambda p: SGD(p, lr=0.1, clip=np.float64(0.5))],
)  # fmt: skip
def test_optimisers_keep_float32_whatever_the_scalar_types(backend, make):
    mha, x, grads = _mha_with_grads()
    opt = make(mha.params)
    opt.step(grads)
    opt.step(grads)
    assert all(p.dtype == backend.xp.float32 for p in mha.params.values())
    assert all(backend.is_here(p) for p in mha.params.values())
    mha.forward(x)  # the next forward still accepts the parameters


def test_clip_grad_norm_keeps_dtype_and_does_not_overflow(backend):
    g, norm = clip_grad_norm({"W": backend.asarray(np.full((10, 10), 1e20, np.float32))}, 1.0)
    assert norm == pytest.approx(1e21, rel=1e-6)
    assert g["W"].dtype == backend.xp.float32 and np.allclose(backend.to_numpy(g["W"]), 0.1, rtol=1e-6)
    g, norm = clip_grad_norm({"W": backend.asarray(np.full((4,), 1e-30, np.float32))}, np.float64(1.0))
    assert norm == pytest.approx(2e-30, rel=1e-6) and g["W"].dtype == backend.xp.float32  # squares underflow float32
    g, norm = clip_grad_norm({"a": backend.asarray([3.0]), "b": backend.asarray([4.0])}, np.float64(1.0))
    g = {n: backend.to_numpy(v) for n, v in g.items()}
    assert norm == pytest.approx(5.0) and g["a"][0] == pytest.approx(0.6) and g["b"][0] == pytest.approx(0.8)


def test_sgd_on_a_subset_trains_the_modules_own_array(backend):
    mha, _, _ = _mha_with_grads()
    before = {n: backend.to_numpy(p) for n, p in mha.params.items()}
    opt = SGD({"W_o": mha.params["W_o"]}, lr=0.05)
    opt.step({"W_o": mha.grads["W_o"]})
    after = {n: backend.to_numpy(p) for n, p in mha.params.items()}
    xp_assert_close(after["W_o"], before["W_o"] - 0.05 * backend.to_numpy(mha.grads["W_o"]), rtol=1e-6)
    assert all(np.array_equal(after[n], before[n]) for n in before if n != "W_o")


def test_adam_skips_parameters_without_a_gradient_and_counts_steps_per_parameter(backend):
    p = {"a": backend.asarray([1.0]), "b": backend.asarray([1.0])}
    opt = Adam(p, lr=0.1)
    opt.step({"a": backend.asarray([2.0])})
    opt.step({"a": backend.asarray([2.0]), "b": backend.asarray([-3.0])})
    # b's first update is a first Adam step (bias-corrected m / sqrt(v) = sign(g)), not a second one
    assert backend.to_numpy(p["a"])[0] == pytest.approx(0.8) and backend.to_numpy(p["b"])[0] == pytest.approx(1.1)
    assert opt.steps == {"a": 2, "b": 1} and opt.t == 2


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_a_gradient_that_does_not_fit_is_an_error_naming_it(cls):
    opt = cls({"W_o": np.zeros((2, 2), np.float32)}, lr=0.1)
    with pytest.raises(KeyError, match="W_q"):
        opt.step({"W_q": np.zeros((2, 2), np.float32)})
    with pytest.raises(ValueError, match=r"W_o.*\(3, 2\)"):
        opt.step({"W_o": np.zeros((3, 2), np.float32)})
    with pytest.raises(TypeError, match="W_o.*float64"):
        opt.step({"W_o": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="lr"):
        cls({"W_o": np.zeros((2, 2), np.float32)}, lr=-1.0)


def test_training_loop_updates_the_models_own_arrays(backend):
    from mhattn.nn.transformer import ModelConfig, TransformerModel
    from mhattn.training.loop import train
    from mhattn.training.tasks import RolesTask

    task = RolesTask(vocab_size=8, seq_len=6)
    model = TransformerModel(ModelConfig(vocab_size=8, output_sizes=task.output_sizes, d_model=16, num_heads=4, d_ff=32))
    W = model.params["blocks.0.attn.W_o"]
    before = backend.to_numpy(W)
    tuned, _ = train(task, None, model=model, steps=3, batch_size=4, progress=False)
    assert tuned.params["blocks.0.attn.W_o"] is W and not np.array_equal(backend.to_numpy(W), before)
    assert backend.is_here(W)


@pytest.mark.parametrize("bad", [np.nan, -np.inf, np.inf])
def test_ignored_rows_cannot_matter_whatever_they_hold(bad):
    z = np.array([[2.0, 0.0, -1.0], [bad] * 3, [0.5, 0.5, 3.0]])
    loss, cache = cross_entropy_forward(z, np.array([0, -100, 2]))
    assert loss == pytest.approx(0.160927, abs=1e-6)
    d = cross_entropy_backward(1.0, cache)
    assert np.isfinite(d).all() and np.all(d[1] == 0.0)
    clean = cross_entropy_backward(1.0, cross_entropy_forward(z[[0, 2]], np.array([0, 2]))[1])
    xp_assert_close(d[[0, 2]], clean, rtol=1e-12)


def test_sweep_uses_the_exact_log_softmax_loss():
    loss, d = sweep.cross_entropy(np.array([[14.4, 50.1, 3.5]]), np.array([0]))
    assert loss == pytest.approx(35.7, abs=1e-9)  # log(p + 1e-12) would give 27.63
    assert sweep.Adam is Adam


def test_gates_at_extreme_log_alpha_without_overflow():
    la = np.array([[-800.0, 800.0, 0.0]])
    z = gates.deterministic_gates(la)  # RuntimeWarnings are errors in this suite
    assert z[0, 0] == 0.0 and z[0, 1] == 1.0 and z[0, 2] == pytest.approx(0.5)
    zs, dz = gates.sample_gates(la, 3, np.random.default_rng(0))
    assert np.all(zs[0, :, 0] == 0.0) and np.all(zs[0, :, 1] == 1.0) and np.isfinite(dz).all()
    l0, dl0 = gates.expected_l0(la)
    assert l0 == pytest.approx(1.0 + gates._sigmoid(-gates.BETA * np.log(-gates.LOW / gates.HIGH)))
    assert dl0[0, 0] == 0.0 and dl0[0, 1] == 0.0


def test_no_test_named_function_in_the_package():
    """pytest collects any ``test_*`` function a test module imports; the package has none."""
    import mhattn.heads.gates as g

    assert not [n for n in dir(g) if n.startswith("test")]
