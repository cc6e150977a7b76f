"""A step's reference is refused by every route that computes it (mhattn.grade.routes).

The refused modules of each exercise are derived from a static call graph of mhattn (everything below the
grader that the exercise's own file does not need); these tests check that derivation against the exercise
files, against the references each exercise bans, and against every public mhattn function tried in a worker
as the implementation of each of the exercise's functions.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mhattn.grade import grade, imports, routes, runner
from mhattn.grade.guard import REFUSED
from mhattn.grade.harness import GradeFailure
from mhattn.grade.spec import EXERCISES
from mhattn.grade.stubs import stubs_for
from mhattn.grade.worker import Fn, read_frame, write_frame

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))
from grader_attacks.cases import ROUTES  # noqa: E402
from test_grade_attacks import write_submission  # noqa: E402

pytestmark = pytest.mark.grader
IDS = [e.name for e in EXERCISES]


def _file_imports(path: Path) -> set[str]:
    """The mhattn objects a file imports, resolved to where they are defined."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mhattn"):
            found |= {n for a in node.names for n in routes.resolve(f"{node.module}:{a.name}")}
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("mhattn") for a in node.names), path
    return found


def _uses_callables(ex) -> bool:
    calls = ex.visible() + ex.hidden(np.random.default_rng(0))
    return any(isinstance(a, Fn) for c in calls for a in c.args)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_what_an_exercise_may_use_is_what_its_file_imports(ex):
    """routes.USES is the skeleton's imports (and the worker's loss functions exactly where a call passes one)."""
    expected = _file_imports(ROOT / "exercises_src" / ex.filename)
    assert _file_imports(ROOT / "solutions" / ex.filename) <= expected
    if _uses_callables(ex):
        expected |= {n for u in routes.worker_uses() for n in routes.resolve(u)}
    declared = {n for u in routes.entries(ex.name) for n in routes.resolve(u)} - set(routes.UTILITIES)
    assert declared == expected
    assert (routes.WORKER in routes.USES.get(ex.name, ())) == _uses_callables(ex)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_every_function_that_reaches_a_banned_reference_is_refused(ex):
    """The banned references' modules are refused, and so is each public function whose call graph reaches one;
    no module the exercise keeps defines a banned reference."""
    refused, keep = set(routes.refused(ex.name)), routes.needed(ex.name)
    assert set(ex.hidden_modules) <= refused
    banned = [b for b in ex.banned]
    for name, mod in routes.graph().items():
        for fn in mod.defines:
            if not fn.startswith("_") and banned and routes.reaches(f"{name}:{fn}", banned):
                assert name in refused, f"{name}:{fn} reaches a reference of {ex.name}"
    assert not {b.split(":")[0] for b in banned} & keep
    assert set(routes.UTILITIES) <= keep and not keep & refused


def test_the_tiled_routes_of_the_issue_are_refused():
    assert "mhattn.functional.attention_tiled" in routes.refused("ex04_attention_backward")
    assert "mhattn.functional.attention_tiled" in routes.refused("ex02_softmax")
    assert routes.refused("no such exercise") == tuple(sorted(n for n, m in routes.graph().items() if m.defines
                                                              and n not in routes.UTILITIES))  # fmt: skip


def test_the_call_graph_follows_aliases_re_exports_and_local_imports():
    """A few edges a wrong graph would miss: module aliases, package re-exports, imports inside a function."""
    sdpa = "mhattn.functional.attention:scaled_dot_product_attention_forward"
    assert routes.reaches(sdpa, ["mhattn.functional:softmax_forward"])  # the softmax step's one entry (issue 33)
    assert not routes.reaches(sdpa, ["mhattn.functional.mha:multi_head_attention_forward"])
    mha = "mhattn.nn.attention:MultiHeadAttention"
    assert routes.reaches(mha, ["mhattn.kernels.pool:matmul"])  # the engine calls pool.<helper> (a module alias)
    assert "mhattn.functional.mha" in {n.partition(":")[0] for n in routes.closure(["mhattn.nn.attention:MultiHeadAttention"])}
    assert "mhattn.plots.attention" in {n.partition(":")[0] for n in routes.closure(["mhattn.heads.jobs:attention_pngs"])}


_PROBE = """
import json, signal, sys, importlib
sys.path.insert(0, {grade_dir!r})
from worker import Opaque, _plain, read_frame, write_frame
from guard import install_finder
request = json.loads(open({request!r}).read())
data = open({args!r}, "rb").read()
install_finder(request["stubs"], request["allowed"])
signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("slow")))
out = {{"imports": {{}}, "above": {{}}, "tried": {{}}}}
for name in request["above"]:
    try:
        importlib.import_module(name)
        out["above"][name] = "imported"
    except ModuleNotFoundError as err:
        out["above"][name] = str(err)
for modname in request["modules"]:
    try:
        module = importlib.import_module(modname)
    except ModuleNotFoundError as err:
        out["imports"][modname] = str(err)
        continue
    out["imports"][modname] = "ok"
    for attr, obj in sorted(vars(module).items()):
        if attr.startswith("_") or not callable(obj) or getattr(obj, "__module__", None) != modname:
            continue
        results = []
        for args in read_frame(data, allow_fn=True):
            signal.alarm(5)
            try:
                value = obj(*args)
                items = value[:3] if isinstance(value, tuple) else ()
                results.append({{"values": [_plain(value)] + [_plain(v) for v in items]}})
            except BaseException as err:
                results.append({{"raised": type(err).__name__, "hidden": "is hidden while" in str(err)}})
            finally:
                signal.alarm(0)
        out["tried"][modname + ":" + attr] = results
with open({reply!r}, "wb") as f:
    write_frame(f, out)
"""


def _passes(call, value) -> bool:
    """Whether ``value`` passes every judge of ``call``."""
    try:
        for _, judge in call.judged():
            judge((value, {"peak": 0, "warning": ""}) if call.probe else value)
    except (GradeFailure, Exception):  # noqa: BLE001 - a judge meeting a value of another kind fails it
        return False
    return True


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_no_public_mhattn_function_scores_an_exercise(ex, tmp_path):
    """Every public function and class of every mhattn module, called in a worker with the exercise's own
    arguments (visible and hidden) as the implementation of the exercise's function, its result or any of
    its first three items taken as the answer: a refused one raises that it is hidden, every other one lives
    in a module the exercise keeps, and none passes all the calls of any check."""
    calls = ex.visible() + ex.hidden(np.random.default_rng(0))
    with open(tmp_path / "args", "wb") as f:
        write_frame(f, [list(c.args) for c in calls])
    request = {"stubs": stubs_for(ex.hidden_modules, ex.name), "allowed": list(imports.allowed_modules()),
               "modules": sorted(routes.graph()), "above": [f"mhattn.{n}" for n in REFUSED]}  # fmt: skip
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    probe = _PROBE.format(grade_dir=str(ROOT / "mhattn" / "grade"), request=str(tmp_path / "request.json"),
                          args=str(tmp_path / "args"), reply=str(tmp_path / "reply"))  # fmt: skip
    res = subprocess.run([sys.executable, "-I", "-c", textwrap.dedent(probe)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"})  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = read_frame((tmp_path / "reply").read_bytes())
    assert all("not available while grading" in why for why in out["above"].values()), out["above"]
    refused, keep = set(routes.refused(ex.name)), routes.needed(ex.name)
    for modname, how in out["imports"].items():  # every stand-in imports (or says it is hidden, as the original would fail)
        assert how == "ok" or "is hidden while" in how, (modname, how)
    live = set()
    for node, results in out["tried"].items():
        modname = node.partition(":")[0]
        if any(r.get("hidden") for r in results):
            assert modname in refused, node
            continue
        assert modname in keep, f"{node} runs while {ex.name} is graded"
        live.add(node)
        for i, call in enumerate(calls):
            values = results[i].get("values", [])
            results[i]["passes"] = [_passes(call, v) for v in values]
    for check, _ in ex.checks:  # no live function (with any one way of reading its result) passes a whole check
        group = [i for i, c in enumerate(calls) if check in {name for name, _ in c.judged()} and c.raises is None]
        for node in live:
            for k in range(4):
                assert not (group and all(k < len(out["tried"][node][i].get("passes", [])) and
                                          out["tried"][node][i]["passes"][k] for i in group)), (check, node, k)  # fmt: skip
    assert {n.partition(":")[0] for n in live} <= keep


@pytest.mark.parametrize("case", ROUTES, ids=[c.name for c in ROUTES])
def test_each_route_case_is_a_route(case, tmp_path, monkeypatch):
    """With no module hidden, each route of tests/grader/grader_attacks scores full marks: it computes the step."""
    monkeypatch.setattr(runner, "stubs_for", lambda modules, exercise: {})
    report = grade(write_submission(tmp_path, case.edits), only=[case.exercise], seed=4, sandbox_mode=False)
    assert report["total"] == report["max_total"], report["exercises"][0]["reason"]


def test_solutions_score_full_marks_without_a_sandbox(tmp_path):
    """The refused modules never break what a solution imports (the sandboxed run: tests/grader/test_grade.py)."""
    report = grade(write_submission(tmp_path, ()), seed=7, sandbox_mode=False)
    assert report["total"] == report["max_total"], [r["reason"] for r in report["exercises"] if r["points"] < r["max_points"]]


def test_course_materials_shipped_as_data_are_not_modules(tmp_path):
    """The wheel ships the notebooks' sources as data (``mhattn/course_materials/notebooks/03_...py``): they are
    not importable modules, so the grader neither hides nor imports (runs) them."""
    from mhattn.grade.routes import module_names

    pkg = tmp_path / "mhattn"
    (pkg / "functional").mkdir(parents=True)
    (pkg / "course_materials" / "notebooks").mkdir(parents=True)
    for f in ("__init__.py", "functional/__init__.py", "functional/softmax.py", "course_materials/notebooks/03_backprop.py",
              "course_materials/notebooks/helper.py"):  # fmt: skip
        (pkg / f).write_text("print('ran')\n")
    assert sorted(module_names(pkg)) == ["mhattn", "mhattn.functional", "mhattn.functional.softmax"]
