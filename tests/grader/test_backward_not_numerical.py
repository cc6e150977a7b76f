"""A backward exercise pays for a backward (issue 34): exercise 4 by complex-step derivatives of a hand-written
forward (exact to rounding, so every small case passes) cannot finish its large hidden case within the time limit,
while the written backward takes a fraction of a second there."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mhattn.grade import checks_steps as S
from mhattn.grade import grade

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS  # noqa: E402

pytestmark = pytest.mark.grader
EX04 = "ex04_attention_backward.py"

# every (example, head) perturbed at once, and every query row (its loss is its own): as fast as such a thing goes
COMPLEX_STEP = """
import numpy as np

H = 1e-30


def _losses(dout, q, k, v, masked):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (B, h, T, S)
    s = np.where(masked, -np.inf, s)
    p = np.exp(s - s.real.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return ((p @ v) * dout).sum(axis=-1)  # (B, h, T): each query row's part of the loss


def attention_backward(dout, q, k, v, weights):
    masked = weights == 0
    grads = [np.zeros_like(a, dtype=np.float64) for a in (q, k, v)]
    for which, a in enumerate((q, k, v)):
        for i in range(a.shape[-2]):
            for j in range(a.shape[-1]):
                args = [x.astype(np.complex128) for x in (q, k, v)]
                args[which][..., i, j] += 1j * H
                rows = _losses(dout, *args, masked).imag / H
                grads[which][..., i, j] = rows[..., i] if which == 0 else rows.sum(axis=-1)
    return tuple(g.astype(q.dtype) for g in grads)
"""


def test_the_written_backward_finishes_the_large_case_in_a_fraction_of_a_second(tmp_path):
    (tmp_path / EX04).write_text(SOLUTIONS[EX04], encoding="utf-8")
    start = time.process_time()
    report = grade(tmp_path, only=["ex04"], seed=3, timeout=5.0, sandbox_mode=False)
    assert report["total"] == 10 and time.process_time() - start < 5
    large = S.hidden_ex04(np.random.default_rng(3))[-1]
    assert large.args[1].shape == (1, 2, 64, 64) and large.args[2].shape == (1, 2, 1024, 64)  # q, k: S d_k = 65536


@pytest.mark.slow
def test_complex_step_derivatives_cannot_finish_the_large_case(tmp_path):
    (tmp_path / EX04).write_text(COMPLEX_STEP, encoding="utf-8")
    small = grade(tmp_path, only=["ex04"], seed=3, timeout=5.0, sandbox_mode=False, jobs=1)
    row = small["exercises"][0]
    assert row["points"] == 0 and row["reason"].startswith("timed out after 5 s of CPU time"), row["reason"]
