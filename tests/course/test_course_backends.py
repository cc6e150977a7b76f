"""The course's helpers run on every array-library leg: the walkthrough (and its command), the counting and
the head-count sweep's training, each equal to the NumPy run.

The legs are tests/conftest.py's: NumPy, array-api-strict on ``Device("device1")`` (which refuses every silent
trip to the host, as a GPU would), torch on the CPU (skipped without torch), and CuPy and torch on CUDA where a
GPU is there. Tolerances as tests/lib/test_array_api.py: float32 rtol 1e-5, atol 5e-6 (the walkthrough); the sweep
trains in float64, and 15 Adam steps on another library's reduction order stay within 1e-9 of NumPy's loss.
"""

from __future__ import annotations

import numpy as np
import pytest

import mhattn
from mhattn.cli import main
from mhattn.course import counting, sweep, walkthrough

SENTENCE = "the cat sat on the mat"


def _on_numpy(f):
    with mhattn.use_backend("numpy"):
        return f()


def test_walkthrough_steps_run_on_every_leg(backend):
    wt = walkthrough.run(SENTENCE, d_model=32, num_heads=4, seed=3)
    ref = _on_numpy(lambda: walkthrough.run(SENTENCE, d_model=32, num_heads=4, seed=3))
    assert [(n, s) for n, s, _ in wt.steps] == [(n, s) for n, s, _ in ref.steps]
    for (name, _, got), (_, _, want) in zip(wt.steps, ref.steps, strict=True):
        assert backend.is_here(got), name
        np.testing.assert_allclose(backend.to_numpy(got), want, rtol=1e-5, atol=5e-6, err_msg=name)
    assert wt.max_diff_vs_module < 1e-5


def test_walkthrough_command_prints_the_same_on_every_leg(backend, tmp_path, capsys):
    argv = ["walkthrough", "--sentence", SENTENCE, "--d-model", "32", "--num-heads", "4", "--out", str(tmp_path)]
    assert main(argv) == 0
    got = capsys.readouterr().out
    assert _on_numpy(lambda: main(argv[:-2])) == 0
    want = capsys.readouterr().out
    same = lambda text: [line for line in text.split("\nheatmaps")[0].splitlines() if "max |difference|" not in line]
    assert same(got) == same(want) and "(1, 4, 6, 8)" in got
    assert (tmp_path / "attention_heads.png").stat().st_size > 5_000


def test_block_diagonal_counting_on_every_leg(backend):
    d, h = 32, 4
    block = counting.block_diagonal_mha(d, h, seed=0)
    mask = counting.block_diagonal_mask(d, h)
    assert all(backend.is_here(p) for p in block.params.values())
    W = backend.to_numpy(block.params["W_k"])
    assert np.all(W[~mask] == 0) and np.all(W[mask] != 0)
    for masks in (mask, backend.asarray(mask)):  # a host mask or one on the leg
        free = counting.free_parameters(block, {n: masks for n in ("W_q", "W_k", "W_v")})
        assert free == counting.count_block_diagonal(d, h, bias=True)
    assert counting.free_parameters(block) == counting.standard_count(d, h)


def test_sweep_trains_on_every_leg_as_on_numpy(backend):
    cfg = sweep.SweepConfig(vocab=4, seq_len=4, batch=8, steps=15, offsets=(1, 2))
    model, result = sweep.train_model(cfg, 2, seed=1, eval_batches=2)
    want = _on_numpy(lambda: sweep.train_model(cfg, 2, seed=1, eval_batches=2)[1])
    assert all(backend.is_here(p) for p in (*model.mha.params.values(), *model.readout.values()))
    assert result["final_loss"] == pytest.approx(want["final_loss"], rel=1e-9)
    assert result["accuracy"] == want["accuracy"] and {**result, "final_loss": 0} == {**want, "final_loss": 0}


def test_sweep_cross_entropy_keeps_the_legs_arrays(backend, rng):
    logits = backend.asarray(rng.standard_normal((2, 3, 5)))
    loss, dlogits = sweep.cross_entropy(logits, rng.integers(0, 5, (2, 3)))  # host targets are moved beside
    assert backend.is_here(dlogits) and np.isfinite(loss)
