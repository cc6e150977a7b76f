"""Exercise 11's "no floating-point warning" point is lost by silencing the warning, however it is done (issue 34):
code compiled under numpy's file name (or run in numpy's namespace) is not numpy's own, and a warnings hook
replaced at import time is seen before the call, in both modes.

Each submission is the solution, plus a ``log(0)`` in every call (a divide warning, as a learner's ``0/0`` would
give) hidden a different way, spelled so that the grader's reading of the text (:func:`mhattn.grade.scan.silencing`)
does not see it: only the worker's watch (:class:`mhattn.grade.probe.QuietWatch`) can.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mhattn.grade import checks_tiled as TL
from mhattn.grade import grade
from mhattn.grade.scan import silencing

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS  # noqa: E402
from test_grading_trust import MODES  # noqa: E402

pytestmark = pytest.mark.grader
EX11 = "ex11_online_softmax.py"
WRAP = """
import sys

_right = online_attention_forward
_NAME = "".join(map(chr, (101, 114, 114, 115, 116, 97, 116, 101)))  # the name of numpy's error-state manager
_MOD = "".join(map(chr, (119, 97, 114, 110, 105, 110, 103, 115)))  # the name of the module of warnings
{hide}

def online_attention_forward(q, k, v, block_k, mask=None):
    hide(lambda: np.log(np.zeros(1)))
    return _right(q, k, v, block_k, mask)
"""
HIDES = {
    "numpy_file_name": (  # forgiven as numpy's own frame when frames were trusted by their file name
        "_ns = {'np': np}\n"
        "exec(compile(f'def hide(f):\\n    with np.{_NAME}(all=\"ignore\"):\\n        f()\\n', np.__file__, 'exec'), _ns)\n"
        "hide = _ns['hide']"
    ),
    "numpy_namespace": (  # run in numpy's own namespace, under its file name
        "exec(compile(f'def _mhattn_hide(f):\\n    with {_NAME}(all=\"ignore\"):\\n        f()\\n', np.__file__, 'exec'),"
        " vars(np))\n"
        "hide = np._mhattn_hide"
    ),
    "showwarnmsg_at_import": (  # the hook every warning passes through, replaced before any call
        "setattr(sys.modules[_MOD], '_show' + 'warnmsg', lambda msg: None)\nhide = lambda f: f()"
    ),
}


def _warn_check(tmp_path, hide: str, use_sandbox: bool) -> dict:
    text = SOLUTIONS[EX11] + WRAP.format(hide=hide)
    assert silencing(text) is None  # the text gives nothing away: the watch must see it
    (tmp_path / EX11).write_text(text, encoding="utf-8")
    row = grade(tmp_path, only=["ex11"], seed=1, sandbox_mode=use_sandbox)["exercises"][0]
    return {c["name"]: c for c in row["checks"]}


@pytest.mark.parametrize("use_sandbox", MODES)
def test_an_unhidden_warning_loses_the_point_and_only_it(tmp_path, use_sandbox):
    checks = _warn_check(tmp_path, "hide = lambda f: f()", use_sandbox)
    assert checks[TL.WARN]["points"] == 0 and "divide by zero encountered in log" in checks[TL.WARN]["reason"]
    assert all(c["points"] == c["max_points"] for name, c in checks.items() if name != TL.WARN)


@pytest.mark.parametrize("use_sandbox", MODES)
@pytest.mark.parametrize("how", HIDES)
def test_a_hidden_warning_loses_the_point(tmp_path, how, use_sandbox):
    checks = _warn_check(tmp_path, HIDES[how], use_sandbox)
    assert checks[TL.WARN]["points"] == 0, checks[TL.WARN]
    assert "silenced floating-point warnings" in checks[TL.WARN]["reason"], checks[TL.WARN]["reason"]
    assert all(c["points"] == c["max_points"] for name, c in checks.items() if name != TL.WARN)
