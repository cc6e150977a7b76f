"""Edge cases of layers, optimisers and checkpoints, from public bug reports and from what learners ran into.

Loading copies into the live parameter arrays (torch's ``load_state_dict``); a tied array gets one step;
``lr = 0`` is a learning rate; a shipped name and a local file never silently stand in for each other;
``check_backward`` refuses float32; an optimiser takes ``mha.grads`` after a backward with a head mask.
"""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close, xp_assert_equal

import mhattn
from mhattn.gradcheck import check_backward
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.optim import SGD, Adam
from mhattn.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint, shipped_path
from mhattn.training.loop import multi_loss

np_ = mhattn.to_numpy
TINY = ModelConfig(vocab_size=5, output_sizes=(4,), d_model=8, num_heads=2, num_layers=1, d_ff=16)


def _snapshot(params):
    return {n: np_(p).copy() for n, p in params.items()}


# (a) loading copies into the existing arrays -------------------------------------------------------------


def test_torch_state_dict_is_copied_into_the_arrays_an_optimiser_holds(backend):
    mha = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
    source = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=1).to_torch_state_dict()
    arrays = dict(mha.params)
    opt = SGD(mha.params, lr=0.5)
    mha.load_torch_state_dict(source)
    assert all(mha.params[n] is arrays[n] for n in arrays)  # the same objects, new values
    assert backend.is_here(mha.params["W_q"])
    xp_assert_equal(np_(mha.params["W_q"]), source["in_proj_weight"][:8].T)
    mha(backend.floats(np.ones((1, 3, 8))))
    mha.backward(backend.floats(np.ones((1, 3, 8))))
    loaded = _snapshot(mha.params)
    opt.step(mha.grads)  # the optimiser built before the load moves the loaded values
    xp_assert_close(np_(mha.params["W_o"]), loaded["W_o"] - 0.5 * np_(mha.grads["W_o"]), rtol=1e-12)


def test_a_state_dict_that_does_not_fit_changes_nothing():
    mha = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
    before = _snapshot(mha.params)
    good = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=1).to_torch_state_dict()
    with pytest.raises(ValueError, match=r"out_proj.weight has shape \(8, 7\), expected \(8, 8\)"):
        mha.load_torch_state_dict({**good, "out_proj.weight": np.zeros((8, 7))})
    with pytest.raises(TypeError, match=r"out_proj.bias has dtype int64; expected floating point"):
        mha.load_torch_state_dict({**good, "out_proj.bias": np.zeros(8, np.int64)})
    for n, p in mha.params.items():
        xp_assert_equal(np_(p), before[n])


def test_a_float32_state_dict_is_cast_to_the_modules_dtype_as_torch_does():
    mha = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
    source = {k: v.astype(np.float32) for k, v in mhattn.MultiHeadAttention(8, 2, seed=1).to_torch_state_dict().items()}
    mha.load_torch_state_dict(source)
    assert mha.params["W_q"].dtype == np.float64
    xp_assert_equal(mha.params["W_o"], source["out_proj.weight"].T.astype(np.float64))


def test_checkpoint_loaded_into_a_model_keeps_its_arrays_and_optimiser(backend, tmp_path):
    saved = TransformerModel(TINY, seed=1, dtype="float64")
    save_checkpoint(tmp_path / "m.npz", saved, {"name": "roles"})
    model = TransformerModel(TINY, seed=0, dtype="float64")
    arrays, opt = dict(model.params), Adam(model.params, lr=0.1)
    same, _ = load_checkpoint(tmp_path / "m.npz", into=model)
    assert same is model and all(model.params[n] is arrays[n] for n in arrays)
    assert backend.is_here(model.params["embed.W"]) and model.params["embed.W"].dtype == backend.xp.float64
    xp_assert_equal(model.params["out.0.W"], saved.params["out.0.W"])
    ids, y = np.array([[0, 1, 2, 3]]), np.array([[1, 2, 3, 0]])
    logits, _ = model.forward(model.place(ids))
    opt.step(model.backward(multi_loss(logits, (model.place(y),))[1]))
    # Adam's first step moves every parameter with a gradient by lr (times m/sqrt(v) = ±1) from the loaded values
    delta = np.abs(np_(model.params["out.0.W"]) - np_(saved.params["out.0.W"]))
    xp_assert_close(delta.max(), 0.1, rtol=1e-6, check_namespace=False)


def test_a_checkpoint_of_another_config_changes_nothing(tmp_path):
    other = TransformerModel(ModelConfig(**{**TINY.to_dict(), "d_ff": 32}), seed=1, dtype="float64")
    save_checkpoint(tmp_path / "other.npz", other, {"name": "roles"})
    model = TransformerModel(TINY, seed=0, dtype="float64")
    before = _snapshot(model.params)
    with pytest.raises(CheckpointError, match=r"config .*d_ff=32.* differs from the model's .*d_ff=16"):
        load_checkpoint(tmp_path / "other.npz", into=model)
    with pytest.raises(ValueError, match=r"dtype='float32' differs from the model's \(float64\)"):
        load_checkpoint(tmp_path / "other.npz", "float32", into=model)
    bad = {**before, "out.0.b": np.zeros(3)}  # every entry fits but the last
    with pytest.raises(ValueError, match=r"out.0.b has shape \(3,\), the model's has \(4,\); nothing was loaded"):
        model.load_params(bad)
    for n, p in model.params.items():
        xp_assert_equal(p, before[n])


# (b) tied weights: one array, one step ---------------------------------------------------------------------


def test_a_tied_array_gets_one_adam_step_with_its_summed_gradient(backend):
    w = backend.floats(np.zeros(3))
    opt = Adam({"embed": w, "unembed": w}, lr=0.1)
    g1, g2 = backend.floats([1.0, -2.0, 3.0]), backend.floats([1.0, 1.0, -4.0])
    norm = opt.step({"embed": g1, "unembed": g2})
    # one first Adam step moves by lr * sign(g1 + g2); two steps would move 0.2 where the signs agree
    xp_assert_close(np_(w), [-0.1, 0.1, 0.1], rtol=1e-6)
    assert opt.steps == {"embed": 1} and set(opt.m) == {"embed"}
    assert norm == pytest.approx(np.linalg.norm([2.0, -1.0, -1.0]))


def test_a_tied_array_gets_one_weight_decay_with_sgd():
    w = np.array([1.0])
    SGD({"a": w, "b": w}, lr=0.1, weight_decay=0.5).step({"a": np.array([2.0]), "b": np.array([4.0])})
    # one step: 1 - 0.1 * (6 + 0.5 * 1) = 0.35; decaying once per name would give 0.3 or less
    xp_assert_close(w, [0.35], rtol=1e-12)


def test_equal_but_distinct_arrays_are_two_parameters():
    a, b = np.array([1.0]), np.array([1.0])
    opt = SGD({"a": a, "b": b}, lr=0.1, weight_decay=0.5)
    opt.step({"a": np.array([2.0]), "b": np.array([4.0])})
    xp_assert_close([a[0], b[0]], [1 - 0.1 * 2.5, 1 - 0.1 * 4.5], rtol=1e-12, check_namespace=False)


# (c) lr = 0 is a learning rate, a negative one is not ----------------------------------------------------------


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_lr_zero_is_accepted_and_moves_nothing(cls):
    p = {"w": np.array([1.0, -2.0])}
    opt = cls(p, lr=0)
    opt.step({"w": np.array([3.0, 4.0])})
    xp_assert_equal(p["w"], [1.0, -2.0])
    opt.lr = 0.5  # a warm-up schedule goes on from 0
    opt.step({"w": np.array([3.0, 4.0])})
    assert p["w"][0] < 1.0


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_negative_lr_says_must_be_at_least_zero(cls):
    with pytest.raises(ValueError, match=r"^lr must be a finite number >= 0, got -1$"):
        cls({"w": np.zeros(2)}, lr=-1)
    opt = cls({"w": np.zeros(2)}, lr=0.1)
    with pytest.raises(ValueError, match=r"lr must be a finite number >= 0, got -0.5"):
        opt.lr = -0.5
    assert opt.lr == 0.1  # a refused value changes nothing


def test_cli_lr_reads_the_same_as_the_optimiser():
    from argparse import ArgumentTypeError

    from mhattn.commands import non_negative_float

    assert non_negative_float("0") == 0.0
    with pytest.raises(ArgumentTypeError, match=r"must be a finite number >= 0, got -1"):
        non_negative_float("-1")


# (d) a shipped name against a local file ----------------------------------------------------------------------


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_bare_shipped_name_loads_the_shipped_checkpoint(here):
    model, meta = load_checkpoint("roles-plain")
    shipped = np.load(shipped_path("roles-plain"))["param/embed.W"]
    xp_assert_equal(model.params["embed.W"], shipped)


@pytest.mark.parametrize("local_name", ["roles-plain.npz", "roles-plain"])
def test_a_local_file_named_like_a_shipped_one_is_never_silently_chosen(here, local_name):
    save_checkpoint(here / local_name, TransformerModel(TINY, seed=0), {"name": "roles"})
    with pytest.raises(
        CheckpointError,
        match=rf"'roles-plain' names both the shipped checkpoint .*roles-plain.npz and the local file .*{local_name}",
    ):
        load_checkpoint("roles-plain")
    for as_path in (f"./{local_name}", here / local_name):  # a path: the local file
        assert load_checkpoint(as_path)[0].cfg == TINY
    if local_name.endswith(".npz"):
        assert load_checkpoint(local_name)[0].cfg == TINY  # a suffix makes it a path
    assert load_checkpoint(shipped_path("roles-plain"))[0].cfg.num_heads == 12  # the shipped one, asked for by path


def test_a_missing_path_that_looks_shipped_is_not_replaced_by_the_shipped_file(here):
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint("roles-plain.npz")


# what learners ran into ------------------------------------------------------------------------------------


def test_check_backward_refuses_float32_and_passes_a_correct_backward_in_float64(rng):
    from mhattn.functional import linear_backward, linear_forward

    x, W, b = (rng.standard_normal(s) for s in ((2, 3), (3, 4), (4,)))
    assert max(check_backward(linear_forward, linear_backward, [x, W, b])) < 1e-7
    with pytest.raises(TypeError, match=r"check_backward needs float64 inputs: input 1 has dtype float32.*astype"):
        check_backward(linear_forward, linear_backward, [x, W.astype(np.float32), b])


def test_check_backward_runs_on_each_leg(backend):
    from mhattn.functional import softmax_backward, softmax_forward

    x = backend.floats(np.random.default_rng(0).standard_normal((2, 5)))
    assert check_backward(softmax_forward, softmax_backward, [x])[0] < 1e-7


@pytest.mark.parametrize("cls", [SGD, Adam])
@pytest.mark.parametrize("head_mask_shape", [(2,), (3, 2)])
def test_an_optimiser_takes_mha_grads_after_a_backward_with_a_head_mask(backend, cls, head_mask_shape):
    mha = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
    x = backend.floats(np.random.default_rng(0).standard_normal((3, 4, 8)))
    mha(x, head_mask=backend.floats(np.ones(head_mask_shape)))
    mha.backward(backend.floats(np.ones((3, 4, 8))))
    assert set(mha.grads) == set(mha.params) and tuple(mha.head_mask_grad.shape) == head_mask_shape
    before = np_(mha.params["W_q"]).copy()
    cls(mha.params, lr=0.01).step(mha.grads)
    assert np.abs(np_(mha.params["W_q"]) - before).max() > 0
    with pytest.raises(KeyError, match="head_mask"):  # a name the optimiser does not hold is still an error
        cls(mha.params, lr=0.01).step({"head_mask": mha.head_mask_grad})


# the training loop and the head analysis run where the parameters live ------------------------------------------


def _train_and_analyse():
    """A tiny float64 model trained 3 steps (head dropout), then every head-analysis number, on the host."""
    from mhattn.heads import HeadMaskEvaluator, ablation_deltas, attention_maps, head_importance
    from mhattn.heads.gates import train_gates
    from mhattn.heads.redundancy import head_similarity
    from mhattn.training.loop import evaluate, train
    from mhattn.training.tasks import RolesTask

    task = RolesTask(vocab_size=8, seq_len=6)
    cfg = ModelConfig(vocab_size=8, output_sizes=task.output_sizes, d_model=8, num_heads=2, num_layers=2, d_ff=16)
    model, _ = train(task, None, model=TransformerModel(cfg, dtype="float64"), steps=3, batch_size=4, head_dropout=0.3,
                     progress=False)  # fmt: skip
    ids, targets = task.eval_set(10)
    mask = np.array([[1.0, 0.0], [1.0, 1.0]])
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=4)
    maps = attention_maps(model, ids[:3])
    out = {
        "evaluate": evaluate(model, ids, targets, head_mask=mask)["loss"], "evaluator": ev.evaluate(mask)["loss"],
        "frozen": ev.evaluate(mask, frozen=True)["loss"],
        "frozen_ablation": ablation_deltas(model, ids, targets, evaluator=ev, frozen=True)[0],
        "importance": ev.importance_grads(batch_size=2), "head_importance": head_importance(model, ids, targets, batch_size=5)[1],
        "maps": maps, "mean_ablation": ablation_deltas(model, ids, targets, mode="mean", evaluator=ev)[0],
        "similarity": np.array(head_similarity(model, ids[:3], maps)["output"]),
    }  # fmt: skip
    out["gates"] = train_gates(model, task, steps=2, batch_size=4)["log_alpha"]
    out["W_o"] = np_(model.params["blocks.1.attn.W_o"])
    return model, out


def test_training_and_head_analysis_on_each_leg_match_numpy(backend):
    model, got = _train_and_analyse()
    assert backend.is_here(model.params["blocks.1.attn.W_o"])  # trained where it was made
    with mhattn.use_backend("numpy"):
        _, want = _train_and_analyse()
    for name in want:
        xp_assert_close(np.asarray(got[name]), np.asarray(want[name]), rtol=1e-10, atol=1e-12, err_msg=name)
