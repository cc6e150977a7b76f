"""The deep text model (``text-deep``: 4 layers x 8 heads) and its data file: a slice re-computed from the checkpoint.

``benchmarks/deep_pruning.py`` wrote ``mhattn/data/text-deep-pruning.json``; notebook 10 reads it. Here the shipped
checkpoint's validation loss, the costliest single-head ablation, the first importance scores and the first
point of the pruning curve by importance are measured again on the same 256 validation windows and compared.
Tolerance: the evaluation runs in float32, whose sums a CPU's BLAS may order differently between machines, so
losses agree to 1e-4 relative (float32 rounding over 16 K positions moves the sixth digit), not bit for bit.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest
from xp_testing import xp_assert_close

from mhattn.heads.importance import normalise_importance
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import _mask, michel_iterative
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint, shipped_path
from mhattn.training.tasks import task_from_meta
from mhattn.training.textdata import CHARSET, N_CHARS, DeepTextTask, load_python_text, split_blocks, text_sha256

DATA = json.loads((DATA_DIR / "text-deep-pruning.json").read_text())
REL = 1e-4


@pytest.fixture(scope="module")
def measured():
    if text_sha256() != DATA["text_sha256"]:
        pytest.skip("this Python's documentation differs from the text the data file was measured on")
    model, meta = load_checkpoint("text-deep")
    task = task_from_meta(meta["task"])
    ids, targets = task.eval_set(DATA["eval_size"])
    return model, task, ids, targets, HeadMaskEvaluator(model, ids, targets)


def test_checkpoint_is_small_float32_and_deep():
    assert shipped_path("text-deep").stat().st_size <= 5 * 2**20
    model, meta = load_checkpoint("text-deep")
    assert (model.cfg.num_layers, model.cfg.num_heads) == (4, 8) and model.cfg.causal
    with np.load(shipped_path("text-deep")) as z:
        assert {z[k].dtype for k in z.files if k.startswith("param/")} == {np.dtype("float32")}
    assert meta["task"]["name"] == "text-deep"


def test_corpus_is_fixed_and_split_by_blocks():
    text = load_python_text()
    assert len(text) == N_CHARS and set(text) <= set(CHARSET)
    train, val = split_blocks(np.arange(N_CHARS))
    assert len(val) == N_CHARS // 10 and val[0] == 90_000 and val[10_000] == 190_000  # blocks 9, 19, ...
    assert len(np.intersect1d(train, val)) == 0


def test_validation_loss_and_bigram_match_the_data_file(measured):
    model, task, ids, targets, ev = measured
    seed0 = DATA["seeds"][0]
    base = ev.evaluate()
    assert base["loss"] == pytest.approx(seed0["loss"], rel=REL)
    assert task.bigram_loss(ids, targets[0]) == pytest.approx(seed0["bigram_loss"], rel=1e-9)  # float64 counts
    assert base["loss"] < seed0["bigram_loss"] - 0.5  # the model is far better than a bigram on the same windows


@pytest.mark.slow  # over 10 s on 2 loaded cores (about 2 s on quiet ones)
def test_costliest_ablation_and_importance_match(measured):
    model, task, ids, targets, ev = measured
    seed0 = DATA["seeds"][0]
    dl = np.array(seed0["ablation_zero_dloss"])
    layer, head = np.unravel_index(np.argmax(dl), dl.shape)
    mask = np.ones(dl.shape)
    mask[layer, head] = 0.0
    assert ev.evaluate(mask)["loss"] - ev.evaluate()["loss"] == pytest.approx(dl[layer, head], rel=1e-3, abs=1e-5)
    raw = ev.importance_grads()
    xp_assert_close(raw, seed0["importance_raw"], rtol=1e-3, atol=1e-7)
    xp_assert_close(normalise_importance(raw), seed0["importance"], rtol=1e-3, atol=1e-7)


def test_first_point_of_the_importance_curve(measured):
    model, task, ids, targets, ev = measured
    curve = DATA["seeds"][0]["curve"]
    k = curve["heads_removed"][1]
    removed = michel_iterative(model, None, k, step=k, evaluator=ev)
    assert removed == curve["importance_order"][:k]
    L, h = model.cfg.num_layers, model.cfg.num_heads
    assert ev.evaluate(_mask(L, h, removed))["loss"] == pytest.approx(curve["importance_loss"][1], rel=REL)


def test_task_round_trips_through_meta():
    task = DeepTextTask(seq_len=16)
    again = task_from_meta(task.to_meta())
    assert isinstance(again, DeepTextTask) and again.seq_len == 16 and np.array_equal(again.val, task.val)


@pytest.mark.slow  # over 10 s on 2 loaded cores (about 2 s on quiet ones)
def test_half_removal_slice_matches_what_mhattn_prune_measures(measured):
    """Notebook 07's deep-model numbers are ``mhattn prune --task text-deep --remove 16 --gate-steps 0``'s: the
    first random halves drawn by the command's generator (seed 0), free and with the survivors frozen, re-measured."""
    from mhattn.heads.jobs import settings_for
    from mhattn.heads.prune import random_removals

    model, task, ids, targets, ev = measured
    stored = DATA["seeds"][0]["half_removal"]["details"]
    s = settings_for(task, {"n_remove": 16, "gate_steps": 0})
    assert stored["settings"] == asdict(s)
    again = random_removals(model, None, ev.evaluate(), 16, 3, np.random.default_rng(s.seed), evaluator=ev)
    assert again["subsets"] == stored["random"]["subsets"][:3]  # the command's first draws
    for key in ("dloss", "frozen_dloss"):
        xp_assert_close(again[key], stored["random"][key][:3], rtol=1e-3, check_namespace=False)
    assert not np.allclose(again["dloss"], again["frozen_dloss"], rtol=1e-6)  # four layers: freezing matters


def test_half_removal_report_rebuilds_from_its_measurements():
    """The stored conclusion is what :func:`model_report` writes from the stored measurements (same code, same words)."""
    from mhattn.heads.report import model_report

    for seed in DATA["seeds"]:
        stored = seed["half_removal"]
        assert model_report(stored["details"]).conclusion == stored["conclusion"]
