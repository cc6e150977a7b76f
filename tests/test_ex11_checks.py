"""Exercise 11's checks, judged in this process: the solution passes, each usual mistake fails with its hint.

The calls go through the worker's own ``call_one`` on a module loaded from the (edited) solution text,
then through the grader's judges, as ``mhattn grade`` does but without a subprocess; the four classic
mistakes are also graded end to end (tests/grader_attacks/cases.py WRONG, in test_grade*.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mhattn.grade.checks_tiled import HIDDEN, hidden_ex11, visible_ex11
from mhattn.grade.runner import frame
from mhattn.grade.verdict import judge_one
from mhattn.grade.worker import call_one, load, read_frame

PATH = Path(__file__).resolve().parents[1] / "solutions" / "ex11_online_softmax.py"
SOLUTION = PATH.read_text(encoding="utf-8")


def first_failure(code, seed=0):
    """The reason of the first failing call (visible, then hidden with ``seed``), or None."""
    module = load(str(PATH), code)
    calls = visible_ex11() + hidden_ex11(np.random.default_rng(seed))
    for call in calls:
        args = read_frame(frame(list(call.args)))  # as the worker gets them
        with np.errstate(all="ignore"):
            why = judge_one(call, call_one(module, {"fn": call.fn, "args": args}, str(PATH)), "test", PATH.name, 0)
        if why:
            return why
    return None


@pytest.mark.parametrize("seed", range(4))
def test_the_solution_passes_visible_and_hidden_checks(seed):
    assert first_failure(SOLUTION, seed) is None


def test_hidden_inputs_cover_both_dtypes_both_tile_extremes_masks_and_s_not_t():
    calls = hidden_ex11(np.random.default_rng(1))
    assert len(calls) == len(HIDDEN)
    seen = set()
    for call in calls:
        q, k, _, block_k = call.args[:4]
        T, S = q.shape[-2], k.shape[-2]
        assert S != T
        mask = call.args[4] if len(call.args) == 5 else None
        if mask is not None:
            assert np.any(np.all(np.broadcast_to(mask, (*q.shape[:-1], S)), axis=-1))  # a row with no allowed key
        seen.add((q.dtype.name, {1: "1", S: "S"}.get(block_k, "mid"), mask is not None))
    assert {(d, t) for d, t, _ in seen} == {(d, t) for d in ("float32", "float64") for t in ("1", "mid", "S")}
    assert {(d, m) for d, _, m in seen} == {(d, m) for d in ("float32", "float64") for m in (True, False)}


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("alpha = np.exp(m - m_safe)", "alpha = np.ones_like(m)", "the running sum and output are not rescaled"),
        ("acc = acc * alpha +", "acc = acc +", "the running output is not rescaled by exp(m_old - m_new)"),
        ("l_sum = l_sum * alpha +", "l_sum = l_sum +", "the running sum is not rescaled by exp(m_old - m_new)"),
        ("lse[..., 0].astype(q.dtype)", "m[..., 0].astype(q.dtype)", "lse is each row's maximum score"),
        ("m + np.log(np.where(", "np.log(np.where(", "add the running maximum back"),
        ("m_safe = np.where(np.isfinite(m_new), m_new, 0.0)", "m_safe = m_new", "NaN where a row's keys so far are all masked"),
        ("np.sqrt(q.shape[-1])", "np.sqrt(k.shape[-2])", "a scaling by 1/sqrt(S), S keys instead of 1/sqrt(d_k)"),
        ("np.sqrt(q.shape[-1])", "1.0", "no scaling instead of 1/sqrt(d_k)"),
        ("lse = np.where(empty, -np.inf,", "lse = np.where(empty, 0.0,", "-inf exactly on the rows with no allowed key (1 here)"),
    ],
)
def test_a_wrong_online_softmax_fails_with_its_hint(old, new, words):
    assert SOLUTION.count(old) == 1, old
    why = first_failure(SOLUTION.replace(old, new))
    assert why is not None and words in why, why
