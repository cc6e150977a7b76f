"""Tasks, optimisers, the training loop and checkpoints."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from xp_testing import xp_assert_close

from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.optim import SGD, Adam, clip_grad_norm
from mhattn.training import tasks as tasks_module
from mhattn.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from mhattn.training.loop import evaluate, head_dropout_mask, train
from mhattn.training.tasks import RolesTask, Task, TextTask, load_topics_text, task_from_meta

# What docs/models.md claims for the shipped checkpoints (its "Shipped checkpoints" table).
README_MIN_ROLE_ACC = 0.99


def test_roles_targets_on_a_hand_example():
    task = RolesTask(vocab_size=10, seq_len=4)
    prev, nxt, rare = task.targets(np.array([[3, 7, 1, 7]]))
    assert prev.tolist() == [[10, 3, 7, 1]]  # BOS = V at position 0
    assert nxt.tolist() == [[7, 1, 7, 11]]  # EOS = V + 1 at the end
    assert rare.tolist() == [[7, 7, 7, 7]]  # the largest id is the rarest token


def test_roles_tokens_follow_zipf():
    ids, _ = RolesTask().sample(4000, np.random.default_rng(0))
    freq = np.bincount(ids.ravel(), minlength=64) / ids.size
    assert freq[0] == pytest.approx(1 / np.sum(1 / np.arange(1, 65)), rel=0.03)
    assert freq[0] / freq[9] == pytest.approx(10, rel=0.15)


def test_text_split_is_fixed_and_targets_are_shifted():
    task = TextTask(seq_len=8)
    assert len(task.train) + len(task.val) == len(task.data) and len(task.val) == pytest.approx(0.1 * len(task.data), abs=1)
    assert np.array_equal(task.val, task.data[len(task.train) :])
    ids, (y,) = task.sample(3, np.random.default_rng(0), split="val")
    assert np.array_equal(ids[:, 1:], y[:, :-1])
    assert task.decode(task.data[:300]) == load_topics_text()[:300]
    with pytest.raises(ValueError, match=r"split must be 'train' or 'val', got 'test'"):
        task.sample(3, np.random.default_rng(0), split="test")


def test_both_tasks_follow_the_task_protocol():
    for task in (RolesTask(), TextTask(seq_len=8)):
        assert isinstance(task, Task)
        ids, targets = task.sample(2, np.random.default_rng(0))
        assert ids.shape == (2, task.seq_len) and len(targets) == len(task.output_sizes) == len(task.output_names)


def test_adam_first_step_moves_each_weight_by_lr_against_the_gradient_sign(backend):
    p = {"w": backend.asarray([[1.0, -2.0]]), "b": backend.asarray([0.5])}
    opt = Adam(p, lr=0.1, weight_decay=0.5)
    opt.step({"w": backend.asarray([[3.0, -0.01]]), "b": backend.asarray([-2.0])})
    # bias-corrected m/sqrt(v) = sign(g); decoupled decay only on the 2-D weight
    w, b = backend.to_numpy(p["w"]), backend.to_numpy(p["b"])
    xp_assert_close(w, [[1.0 - 0.1 * (1 + 0.5 * 1.0), -2.0 - 0.1 * (-1 + 0.5 * -2.0)]], rtol=1e-05, atol=1e-6)
    xp_assert_close(b, [0.6], rtol=1e-05, atol=1e-6)


def test_sgd_momentum_and_l2_decay(backend):
    p = {"w": backend.asarray([1.0])}
    opt = SGD(p, lr=0.1, momentum=0.9, weight_decay=0.1)
    opt.step({"w": backend.asarray([1.0])})  # v = 1.1 -> w = 0.89
    opt.step({"w": backend.asarray([1.0])})  # v = 0.9*1.1 + 1 + 0.089 = 2.079 -> w = 0.6821
    assert backend.to_numpy(p["w"])[0] == pytest.approx(0.6821)


def test_clip_grad_norm_rescales_to_max_norm(backend):
    g, norm = clip_grad_norm({"a": backend.asarray([3.0]), "b": backend.asarray([4.0])}, 1.0)
    g = {n: backend.to_numpy(v) for n, v in g.items()}
    assert norm == pytest.approx(5.0) and g["a"][0] == pytest.approx(0.6) and g["b"][0] == pytest.approx(0.8)


def test_head_dropout_mask_drops_p_and_keeps_expectation():
    m = head_dropout_mask(np.random.default_rng(0), 1, 5000, 12, 0.3, np.float32)
    assert m.shape == (1, 5000, 12) and m.dtype == np.float32
    assert (m == 0).mean() == pytest.approx(0.3, abs=0.01) and m.mean() == pytest.approx(1.0, abs=0.02)


def _small():
    task = RolesTask(vocab_size=8, seq_len=6)
    cfg = ModelConfig(vocab_size=8, output_sizes=task.output_sizes, d_model=16, num_heads=4, d_ff=32)
    return task, cfg


def test_training_is_seeded_and_lowers_the_loss(backend):
    task, cfg = _small()
    m1, info = train(task, cfg, steps=80, batch_size=32, lr=1e-2, seed=3, progress=False, log_every=79)
    m2, _ = train(task, cfg, steps=80, batch_size=32, lr=1e-2, seed=3, progress=False)
    assert all(backend.is_here(p) for p in m1.params.values())
    assert all(np.array_equal(backend.to_numpy(m1.params[n]), backend.to_numpy(m2.params[n])) for n in m1.params)
    first, last = info["history"][0][1], info["history"][-1][1]
    assert last < 0.7 * first


def test_checkpoint_round_trip(backend, tmp_path):
    task, cfg = _small()
    model = TransformerModel(cfg, seed=1)
    path = save_checkpoint(tmp_path / "m.npz", model, task.to_meta(), {"steps": 0})
    loaded, meta = load_checkpoint(path)  # onto the current backend and device
    assert meta["task"] == task.to_meta() and loaded.cfg == cfg
    assert all(backend.is_here(p) for p in loaded.params.values())
    ids = backend.asarray(task.sample(4, np.random.default_rng(0))[0])
    assert np.array_equal(backend.to_numpy(loaded.forward(ids)[0][2]), backend.to_numpy(model.forward(ids)[0][2]))


@pytest.fixture
def saved(tmp_path):
    task, cfg = _small()
    return save_checkpoint(tmp_path / "m.npz", TransformerModel(cfg, seed=1), task.to_meta())


def test_checkpoint_missing_truncated_corrupt(saved, tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "nope.npz")
    data = saved.read_bytes()
    (tmp_path / "t.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(tmp_path / "t.npz")
    (tmp_path / "c.npz").write_bytes(b"not a zip file at all" * 10)
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(tmp_path / "c.npz")


def _rewrite(path, out, meta_fn=None, param_fn=None):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("meta")))
    if meta_fn:
        meta_fn(meta)
    if param_fn:
        param_fn(arrays)
    np.savez(out, meta=np.array(json.dumps(meta)), **arrays)
    return out


def test_checkpoint_version_and_shape_mismatch(saved, tmp_path):
    bad = _rewrite(saved, tmp_path / "v.npz", meta_fn=lambda m: m.update(version=99))
    with pytest.raises(CheckpointError, match="version 99"):
        load_checkpoint(bad)
    bad = _rewrite(saved, tmp_path / "s.npz", param_fn=lambda a: a.update({"param/embed.W": np.zeros((9, 16), np.float32)}))
    with pytest.raises(CheckpointError, match=r"embed\.W"):
        load_checkpoint(bad)
    bad = _rewrite(saved, tmp_path / "m.npz", param_fn=lambda a: a.pop("param/ln_f.beta"))
    with pytest.raises(CheckpointError, match="missing"):
        load_checkpoint(bad)


def test_checkpoint_refuses_pickled_objects(tmp_path):
    path = tmp_path / "p.npz"
    np.savez(path, meta=np.array([{"evil": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="pickle"):
        load_checkpoint(path)
    assert zipfile.is_zipfile(path)


@pytest.mark.parametrize("name", ["roles-plain", "roles-headdropout"])
def test_shipped_roles_checkpoints_score_what_the_readme_says(name):
    model, meta = load_checkpoint(name)
    task = RolesTask(**{k: v for k, v in meta["task"].items() if k != "name"})
    r = evaluate(model, *task.eval_set(1024), names=task.output_names)
    assert r["min_acc"] >= README_MIN_ROLE_ACC, r
    assert r["acc/rare"] == pytest.approx(meta["training"]["val"]["acc/rare"], abs=1e-6)
    assert (model.cfg.num_heads, model.cfg.d_model) == (12, 96)


def test_shipped_text_checkpoint_scores_what_it_records():
    model, meta = load_checkpoint("text")
    task = TextTask(**{k: v for k, v in meta["task"].items() if k != "name"})
    r = evaluate(model, *task.eval_set(), names=task.output_names)
    assert r["loss"] == pytest.approx(meta["training"]["val"]["loss"], abs=1e-3)
    assert r["loss"] < 2.3  # well below the 4.6 nats of a uniform guess over ~100 characters


def test_shipped_checkpoints_are_small_enough_to_ship():
    from mhattn.training.checkpoint import DATA_DIR, SHIPPED

    for fname in SHIPPED.values():
        assert (DATA_DIR / fname).stat().st_size <= 2 * 1024 * 1024, fname


def test_every_shipped_task_is_known_by_its_name_whichever_module_comes_first():
    """The deep text task registers itself in textdata.py (tasks.py imports nothing of it: no import circle)."""
    for first in ("mhattn.training.tasks", "mhattn.training.textdata"):
        code = f"import {first}\nfrom mhattn.training.tasks import TASKS\nprint(sorted(TASKS))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
        assert out.strip() == "['roles', 'text', 'text-deep']", first
    tree = ast.parse(Path(tasks_module.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "mhattn.training.textdata" not in imported and imported  # the circle is gone
    with pytest.raises(ValueError, match=r"unknown task 'nope'; expected one of \['roles', 'text', 'text-deep'\]"):
        task_from_meta({"name": "nope"})
    assert isinstance(task_from_meta(RolesTask(vocab_size=12).to_meta()), RolesTask)
