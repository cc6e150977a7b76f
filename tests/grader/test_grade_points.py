"""Points only for right answers: a right-shaped stub scores 0 on every exercise, a check that qualifies a result
(no warning, memory, block size) scores only beside the values it qualifies, silencing a warning does not keep the
warning point, and exercise 11's memory cap stops an untiled answer whatever allocator holds its scores.

A stub here is the solution's answer thrown away: each function of the exercise calls the solution and returns a
value of the same structure, shape and dtype made of zeros, ones, uniform weights or random numbers (or ``None``, or
its own first input), so only the values can tell it from the answer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mhattn.grade import EXERCISES, grade, sandbox
from mhattn.grade import checks_tiled as TL
from mhattn.grade.scan import silencing
from mhattn.grade.verdict import QUALIFIED, checks_row, qualify

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS  # noqa: E402

pytestmark = pytest.mark.grader
KINDS = ("zeros", "ones", "uniform", "random", "none", "own_input")
MODES = [pytest.param(True, id="sandbox", marks=pytest.mark.skipif(not sandbox.available(), reason="no bubblewrap")),
         pytest.param(False, id="plain")]  # fmt: skip
EX11 = "ex11_online_softmax.py"

SHAPED = '''

import numpy as _np

_RNG = _np.random.default_rng(0)


def _shaped(value, kind):
    """A value of ``value``'s structure, shape and dtype, made of ``kind``."""
    if isinstance(value, dict):
        return {key: _shaped(v, kind) for key, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_shaped(v, kind) for v in value)
    a = _np.asarray(value)
    if a.dtype == bool:
        made = {"zeros": _np.zeros(a.shape, bool), "ones": _np.ones(a.shape, bool)}.get(kind, _RNG.random(a.shape) < 0.5)
    elif kind == "uniform":
        made = _np.full(a.shape, 1.0 / (a.shape[-1] if a.ndim else 2))
    elif kind == "random":
        made = _RNG.integers(0, 1000, a.shape) if a.dtype.kind in "iu" else _RNG.standard_normal(a.shape)
    else:
        made = _np.zeros(a.shape) if kind == "zeros" else _np.ones(a.shape)
    made = made.astype(a.dtype)
    return made if isinstance(value, _np.ndarray) else made.item()
'''


def stub_source(ex, kind: str) -> str:
    """The solution of ``ex`` with each of its functions answering ``kind`` instead (see the module docstring)."""
    text = SOLUTIONS[ex.filename] + SHAPED
    for fn in ex.functions:
        answer = {"none": "None", "own_input": "args[0]"}.get(kind, f"_shaped(_real_{fn}(*args, **kwargs), {kind!r})")
        text += f"\n\n_real_{fn} = {fn}\n\n\ndef {fn}(*args, **kwargs):\n    return {answer}\n"
    return text


@pytest.fixture(scope="module", params=KINDS)
def stub_report(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"stub_{request.param}")
    for ex in EXERCISES:
        (folder / ex.filename).write_text(stub_source(ex, request.param), encoding="utf-8")
    return request.param, grade(folder, seed=5)


@pytest.mark.parametrize("ex", EXERCISES, ids=[e.marker for e in EXERCISES])
def test_a_right_shaped_stub_scores_zero(stub_report, ex):
    kind, report = stub_report
    row = next(r for r in report["exercises"] if r["name"] == ex.name)
    assert row["points"] == 0, (kind, [(c["name"], c["points"]) for c in row["checks"] if c["points"]])


def test_the_stubs_are_the_solutions_answers_thrown_away(tmp_path):
    """The stub wrapper itself is sound: with the real answer passed through, the solutions keep full marks."""
    for ex in EXERCISES:
        text = stub_source(ex, "zeros").replace("_shaped(_real_", "(lambda v, k: v)(_real_")
        (tmp_path / ex.filename).write_text(text, encoding="utf-8")
    report = grade(tmp_path, only=["ex02", "ex07", "ex08", "ex11"], seed=5)
    assert report["total"] == report["max_total"], [r["reason"] for r in report["exercises"]]


# ---- the qualifier rule, on its own ---------------------------------------------------------
def test_a_qualifier_scores_only_beside_its_values():
    checks = (("out", 2), ("lse", 1), ("memory", 2), ("warning", 1))
    rows = checks_row(checks, {"lse": "hidden test failed: lse: wrong"})
    got = {c["name"]: c for c in qualify(rows, {"memory": ("out",), "warning": ("out", "lse")})}
    assert [got[n]["points"] for n, _ in checks] == [2, 0, 2, 0]
    assert got["warning"]["reason"].startswith(QUALIFIED) and "lse: wrong" in got["warning"]["reason"]
    from_text = {c["name"]: c["points"] for c in qualify(rows, {}, {"warning": "line 3: the file uses errstate"})}
    assert from_text == {"out": 2, "lse": 0, "memory": 2, "warning": 0}


@pytest.mark.parametrize("code, words", [
    ("import numpy as np\nwith np.errstate(all='ignore'):\n    pass\n", "line 2: the file uses errstate"),
    ("import warnings\n", "uses warnings"),
    ("from numpy import seterr as quiet\n", "uses seterr"),
    ("import numpy as np\nf = getattr(np, 'errstate')\n", "line 2: the file uses errstate"),
])  # fmt: skip
def test_silencing_is_read_from_the_text(code, words):
    assert words in (silencing(code) or "")


def test_a_docstring_that_mentions_errstate_is_not_silencing():
    assert silencing('def f():\n    """No np.errstate here: the -inf rows are avoided."""\n    return 1\n') is None
    assert silencing(SOLUTIONS[EX11]) is None


# ---- exercise 11: values first, no silenced warning, memory from outside tracemalloc's sight -------
FN = "def online_attention_forward(q, k, v, block_k, mask=None):\n"
BODY = "    S = k.shape[-2]\n"
NAN_FIX = (("m_safe = np.where(np.isfinite(m_new), m_new, 0.0)", "m_safe = m_new"),
           ("p = np.exp(s - m_safe)", "p = np.nan_to_num(np.exp(s - m_safe))"),
           ("alpha = np.exp(m - m_safe)", "alpha = np.nan_to_num(np.exp(m - m_safe))"))  # fmt: skip
UNTILED = """

def _untiled(q, k, v, mask, s):
    np.matmul(q, k.swapaxes(-1, -2), out=s)  # the full (..., T, S) scores, in the buffer s
    s *= 1.0 / np.sqrt(q.shape[-1])
    if mask is not None:
        s[...] = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    np.exp(np.subtract(s, m, out=s), out=s)
    l_sum = s.sum(axis=-1, keepdims=True)
    out = (s @ v) / np.where(l_sum == 0, 1.0, l_sum)
    lse = np.where(l_sum == 0, -np.inf, m + np.log(np.where(l_sum == 0, 1.0, l_sum)))
    return out.astype(q.dtype), lse[..., 0].astype(q.dtype)
"""
SHAPE = "    shape = (*q.shape[:-1], k.shape[-2])\n    n = int(np.prod(shape))\n"
BUFFERS = {
    "numpy": "    return _untiled(q, k, v, mask, np.empty((*q.shape[:-1], k.shape[-2])))\n",
    "mmap": SHAPE + "    import mmap\n    s = np.frombuffer(mmap.mmap(-1, n * 8), dtype=np.float64).reshape(shape)\n"
    "    return _untiled(q, k, v, mask, s)\n",
    "ctypes": SHAPE + "    import ctypes\n    s = np.ctypeslib.as_array((ctypes.c_double * n)()).reshape(shape)\n"
    "    return _untiled(q, k, v, mask, s)\n",
}


def silenced(wrapper: str) -> str:
    """The solution with its -inf guard removed (NaN patched away afterwards), run inside ``wrapper``."""
    text = SOLUTIONS[EX11]
    for old, new in NAN_FIX:
        text = text.replace(old, new)
    return text.replace(
        BODY, f"    {wrapper}\n        return _inner(q, k, v, block_k, mask)\n\n\ndef _inner(q, k, v, block_k, mask):\n{BODY}"
    )


CHEATS = {
    "return_none": (FN + "    return None\n", set(TL.VALUES) | {TL.MEMORY, TL.BLOCK, TL.WARN}),
    "zeros_and_a_tile": ("import numpy as np\n\n\n" + FN + "    scratch = np.ones((*q.shape[:-1], block_k)) * 2\n"
                         "    return np.zeros((*q.shape[:-1], v.shape[-1]), q.dtype), np.zeros(q.shape[:-1], q.dtype)\n",
                         set(TL.VALUES) | {TL.MEMORY, TL.BLOCK, TL.WARN}),
    "errstate": (silenced("with np.errstate(all='ignore'):"), {TL.WARN}),
    "errstate_by_getattr": (silenced("with getattr(np, 'err' + 'state')(all='ignore'):"), {TL.WARN}),
    "catch_warnings": (silenced("with __import__('warn' + 'ings').catch_warnings(record=True):"), {TL.WARN}),
    **{f"untiled_{kind}": (SOLUTIONS[EX11].replace(BODY, code) + UNTILED, {TL.MEMORY, TL.BLOCK, TL.WARN})
       for kind, code in BUFFERS.items()},
}  # fmt: skip


@pytest.mark.parametrize("name", list(CHEATS))
@pytest.mark.parametrize("use_sandbox", MODES)
def test_exercise_11_gives_no_point_without_the_right_answer_and_the_right_way(name, use_sandbox, tmp_path):
    text, lost = CHEATS[name]
    (tmp_path / EX11).write_text(text, encoding="utf-8")
    row = grade(tmp_path, only=["ex11"], seed=7, sandbox_mode=use_sandbox)["exercises"][0]
    assert {c["name"] for c in row["checks"] if c["points"] == 0} == lost, row["checks"]
    if name.startswith("untiled"):
        assert "memory cap" in next(c["reason"] for c in row["checks"] if c["name"] == TL.MEMORY)
    if name.startswith(("errstate", "catch")):
        assert "silenc" in next(c["reason"] for c in row["checks"] if c["name"] == TL.WARN)


@pytest.mark.parametrize("use_sandbox", MODES)
def test_the_solution_passes_under_the_cap_every_time(use_sandbox, tmp_path):
    (tmp_path / EX11).write_text(SOLUTIONS[EX11], encoding="utf-8")
    for seed in (1, 2, 3):
        report = grade(tmp_path, only=["ex11"], seed=seed, sandbox_mode=use_sandbox, jobs=1)
        assert report["total"] == report["max_total"], report["exercises"][0]["reason"]
