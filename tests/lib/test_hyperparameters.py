"""Sizes and rates are numbers of any kind Python calls numbers, stored as plain Python numbers; a bool is none.

``num_heads=np.int64(4)`` (a size read from an array, a sweep over ``np.arange``) is an integer, and
``dropout=np.float32(0.1)`` a real number: ``ModelConfig`` and ``MultiHeadAttention`` take any
``numbers.Integral`` / ``numbers.Real`` and keep ``int`` / ``float``, so a model built from them runs, compares
equal to one built from Python numbers, and saves as JSON. ``True`` is refused where a number is meant, and so is
``8.0`` where a size is meant. Head dropout refuses p outside [0, 1) before any work, as the attention dropout does.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mhattn
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.checkpoint import load_checkpoint, save_checkpoint
from mhattn.training.loop import head_dropout_mask, train
from mhattn.training.tasks import RolesTask

PLAIN = dict(vocab_size=8, output_sizes=(8, 3), d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.25)
NUMPY = dict(vocab_size=np.int64(8), output_sizes=np.array([8, 3]), d_model=np.int32(16), num_heads=np.int64(4),
             num_layers=np.uint8(2), d_ff=np.int16(32), dropout=np.float32(0.25), causal=np.bool_(False))  # fmt: skip


def test_a_config_of_numpy_numbers_is_the_config_of_python_numbers(tmp_path):
    cfg = ModelConfig(**NUMPY)
    assert cfg == ModelConfig(**PLAIN)
    for name, value in cfg.to_dict().items():
        kinds = {"output_sizes": list, "dropout": float, "causal": bool}
        assert type(value) is kinds.get(name, int), (name, type(value))
    assert all(type(c) is int for c in cfg.output_sizes)
    model = TransformerModel(cfg, seed=0, dtype="float64")
    ids = np.random.default_rng(0).integers(0, 8, (3, 5))
    logits, _ = model.forward(ids, training=True)
    want, _ = TransformerModel(ModelConfig(**PLAIN), seed=0, dtype="float64").forward(ids, training=True)
    for got, ref in zip(logits, want, strict=True):
        np.testing.assert_array_equal(got, ref)
    path = save_checkpoint(tmp_path / "m.npz", model, {"n": np.int64(3)}, {"lr": np.float32(0.5), "ok": np.True_})
    loaded, meta = load_checkpoint(path)
    assert loaded.cfg == cfg and meta["task"] == {"n": 3} and meta["training"] == {"lr": 0.5, "ok": True}


def test_multi_head_attention_takes_numpy_sizes_and_rates():
    kwargs = dict(kdim=np.int16(6), vdim=np.uint32(5), dropout=np.float32(0.5), bias=np.bool_(True), seed=np.int64(1))
    mha = mhattn.MultiHeadAttention(np.int64(8), np.int32(2), dtype="float64", **kwargs)
    ref = mhattn.MultiHeadAttention(8, 2, kdim=6, vdim=5, dropout=0.5, bias=True, seed=1, dtype="float64")
    for name in ("d_model", "num_heads", "d_k", "kdim", "vdim", "dropout", "bias"):
        assert type(getattr(mha, name)) is type(getattr(ref, name)) and getattr(mha, name) == getattr(ref, name)
    assert repr(mha) == repr(ref)
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 4, 5))
    out, _ = mha.forward(q, k, v, training=True)
    np.testing.assert_array_equal(out, ref.forward(q, k, v, training=True)[0])
    for got, want in zip(mha.backward(np.ones_like(out)), ref.backward(np.ones_like(out)), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(num_heads=True), TypeError, r"num_heads must be a positive integer, got True"),
        (dict(d_model=16.0), TypeError, r"d_model must be a positive integer, got 16.0"),
        (dict(d_ff=np.float64(32)), TypeError, r"d_ff must be a positive integer, got np.float64\(32.0\)"),
        (dict(output_sizes=(8, True)), TypeError, r"output_sizes\[1\] must be a positive integer, got True"),
        (dict(output_sizes=(8, 2.5)), TypeError, r"output_sizes\[1\] must be a positive integer, got 2.5"),
        (dict(num_layers=0), ValueError, r"num_layers must be a positive integer, got 0"),
        (dict(dropout=True), TypeError, r"dropout must be a number in \[0, 1\), got True"),
        (dict(dropout="0.1"), TypeError, r"dropout must be a number in \[0, 1\), got '0.1'"),
        (dict(dropout=1.0), ValueError, r"dropout must be a number in \[0, 1\), got 1.0"),
        (dict(dropout=float("nan")), ValueError, r"dropout must be a number in \[0, 1\), got nan"),
        (dict(causal=1), TypeError, r"causal must be True or False, got 1"),
    ],
)
def test_config_refuses_what_is_not_the_number_it_needs(kwargs, error, match):
    with pytest.raises(error, match=match):
        ModelConfig(**{**PLAIN, **kwargs})


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(d_model=True, num_heads=1), TypeError, r"d_model must be a positive integer, got True"),
        (dict(d_model=8, num_heads=2.0), TypeError, r"num_heads must be a positive integer, got 2.0"),
        (dict(d_model=8, num_heads=2, kdim=False), TypeError, r"kdim must be a positive integer, got False"),
        (dict(d_model=8, num_heads=2, dropout=True), TypeError, r"dropout must be a number in \[0, 1\), got True"),
        (dict(d_model=8, num_heads=2, dropout=np.float32(1.5)), ValueError, r"dropout must be a number in \[0, 1\)"),
    ],
)
def test_multi_head_attention_refuses_bools_and_fractions_as_sizes(kwargs, error, match):
    with pytest.raises(error, match=match):
        mhattn.MultiHeadAttention(**kwargs)


def test_checkpoint_metadata_that_is_not_json_is_refused_before_writing(tmp_path):
    model = TransformerModel(ModelConfig(**PLAIN))
    with pytest.raises(TypeError, match="checkpoint metadata must be JSON data .* got ndarray"):
        save_checkpoint(tmp_path / "m.npz", model, {"ids": np.arange(3)})
    assert not list(tmp_path.iterdir())
    json.loads(str(np.load(save_checkpoint(tmp_path / "ok.npz", model, {"n": np.int8(1)}))["meta"]))


@pytest.mark.parametrize("p", [1.0, 1.5, -0.2, np.float32(1.0), float("inf")])
def test_head_dropout_refuses_p_outside_0_1_before_any_work(p):
    task = RolesTask(vocab_size=8, seq_len=6)
    cfg = ModelConfig(vocab_size=8, output_sizes=task.output_sizes, d_model=8, num_heads=2, d_ff=16)
    with pytest.raises(ValueError, match=r"head_dropout must be a number in \[0, 1\), got"):
        train(task, cfg, steps=2, batch_size=4, head_dropout=p, progress=False)
    with pytest.raises(ValueError, match=r"head_dropout must be a number in \[0, 1\), got"):
        head_dropout_mask(np.random.default_rng(0), 1, 4, 2, p, np.float32)
    with pytest.raises(TypeError, match=r"head_dropout must be a number in \[0, 1\), got True"):
        train(task, cfg, steps=2, batch_size=4, head_dropout=True, progress=False)


def test_head_dropout_takes_a_numpy_rate():
    task = RolesTask(vocab_size=8, seq_len=6)
    cfg = ModelConfig(vocab_size=8, output_sizes=task.output_sizes, d_model=8, num_heads=2, d_ff=16)
    a, _ = train(task, cfg, steps=3, batch_size=4, head_dropout=np.float32(0.5), progress=False)
    b, _ = train(task, cfg, steps=3, batch_size=4, head_dropout=float(np.float32(0.5)), progress=False)
    assert all(np.array_equal(a.params[n], b.params[n]) for n in a.params)
