"""Exercise 11's grader checks pass the solution and catch the classic mistakes of the online softmax."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from mhattn.grade.checks_tiled import hidden_ex11, visible_ex11
from mhattn.grade.harness import GradeFailure, Sandbox

SOLUTION = (Path(__file__).resolve().parents[1] / "solutions" / "ex11_online_softmax.py").read_text()


def _module(code):
    mod = types.ModuleType("submission")
    exec(compile(code, "submission", "exec"), mod.__dict__)
    return mod


def test_the_solution_passes_visible_and_hidden_checks():
    mod = _module(SOLUTION)
    visible_ex11(mod, Sandbox())
    for seed in range(3):
        hidden_ex11(mod, Sandbox(), np.random.default_rng(seed))


@pytest.mark.parametrize(
    "old, new, why",
    [
        ("alpha = np.exp(m - m_safe)", "alpha = np.ones_like(m)", "no rescaling when the maximum grows"),
        ("lse[..., 0].astype(q.dtype)", "m[..., 0].astype(q.dtype)", "returns the maximum as the log-sum-exp"),
        ("m_safe = np.where(np.isfinite(m_new), m_new, 0.0)", "m_safe = m_new", "NaN on a fully masked row"),
        ("np.sqrt(q.shape[-1])", "np.sqrt(k.shape[-2])", "scales by sqrt(S), not sqrt(d_k)"),
    ],
)
def test_a_wrong_online_softmax_fails(old, new, why):
    assert old in SOLUTION, why
    mod = _module(SOLUTION.replace(old, new))
    with pytest.raises(GradeFailure), np.errstate(all="ignore"):
        visible_ex11(mod, Sandbox())
        hidden_ex11(mod, Sandbox(), np.random.default_rng(0))
