"""The grader is honest: full marks for solutions/, zero for the stubs, and each wrong
submission loses the points of exactly the named checks it breaks (tests/grader/classroom_cases.py LOST).

Every grading run starts one worker process per exercise, so solutions/ and exercises/ are
graded once per session (module-scoped fixtures). Wrong submissions are small edits of a freshly
generated solutions/ (tests/grader/grader_attacks/cases.py); attacks on the grader: test_grade_attacks.py;
the hints a wrong answer gets: test_exercise_traps.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mhattn.grade import EXERCISES, grade, imports, sandbox
from mhattn.grade.harness import GradeFailure
from mhattn.grade.stubs import stubs_for

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from classroom_cases import LOST, lost_points  # noqa: E402
from exercise_files import write_copy  # noqa: E402
from grader_attacks.cases import WRONG  # noqa: E402
from grader_attacks.edits import apply  # noqa: E402

FULL = {ex.name: ex.points for ex in EXERCISES}
SOLUTIONS = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "solutions").glob("ex*.py")}

pytestmark = pytest.mark.grader


def points(report):
    return {r["name"]: r["points"] for r in report["exercises"]}


def reasons(report):
    return {r["name"]: r["reason"] for r in report["exercises"]}


def short(report):
    """The seed and each exercise below full marks with its reason: what a failing assert should print."""
    lost = {r["name"]: r["reason"] for r in report["exercises"] if r["points"] < r["max_points"]}
    return f"seed {report['seed']}: {lost}"


@pytest.fixture(scope="module")
def solutions_report():
    return grade(ROOT / "solutions")


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """Freshly generated exercises/: the tests never grade (or depend on) a learner's own copy."""
    return write_copy(ROOT, "exercises", tmp_path_factory.mktemp("stubs"))


@pytest.fixture(scope="module")
def exercises_report(stubs):
    return grade(stubs)


def with_edits(tmp_path, edits=(), files=None):
    """A copy of solutions/ in tmp_path with ``edits`` applied, then ``files`` (name -> text) put in."""
    folder = tmp_path / "submission"
    folder.mkdir()
    for name, text in {**apply(SOLUTIONS, edits), **(files or {})}.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_solutions_get_full_marks(solutions_report):
    assert points(solutions_report) == FULL, short(solutions_report)
    assert all(c["points"] == c["max_points"] for r in solutions_report["exercises"] for c in r["checks"])
    assert solutions_report["total"] == solutions_report["max_total"] == sum(FULL.values())


def test_untouched_exercises_get_zero(exercises_report):
    assert exercises_report["total"] == 0
    assert all("NotImplementedError" in r for r in reasons(exercises_report).values())


@pytest.mark.parametrize("case", WRONG, ids=[c.name for c in WRONG])
def test_wrong_submission_loses_exactly_its_checks(case, tmp_path):
    report = grade(with_edits(tmp_path, case.edits))
    assert points(report) == {**FULL, case.exercise: FULL[case.exercise] - lost_points(case)}, short(report)
    row = next(r for r in report["exercises"] if r["name"] == case.exercise)
    assert {c["name"] for c in row["checks"] if c["points"] == 0} == set(LOST[case.name]), row["checks"]
    assert all(c["points"] in (0, c["max_points"]) for c in row["checks"])
    assert "failed" in row["reason"] and case.words in row["reason"]


def test_every_call_counts_for_a_check_of_its_exercise():
    """The checks written in spec.EXERCISES are exactly those the calls name, and their points add up."""
    import numpy as np

    for ex in EXERCISES:
        names = [name for name, _ in ex.checks]
        used = {check for call in ex.visible() + ex.hidden(np.random.default_rng(0)) for check, _ in call.judged()}
        assert len(set(names)) == len(names) and used == set(names), ex.name
        assert all(pts > 0 for _, pts in ex.checks) and ex.points == sum(p for _, p in ex.checks)


ROBUSTNESS = {
    "ex01_split_heads.py": "def split_heads(x, num_heads):\n    while True:\n        pass\n",
    "ex02_softmax.py": "def softmax_forward(scores, mask=None):\n    return input('probs? ')\n\n\n"
    "def softmax_backward(dprobs, probs):\n    return dprobs\n",
    "ex03_attention_forward.py": "def make_causal_mask(T, S=None):\n    return 1 / 0\n\n\n"
    "def attention_forward(q, k, v, mask=None, causal=False):\n    return q, q\n",
    "ex04_attention_backward.py": "from mhattn.functional import scaled_dot_product_attention_backward\n\n\n"
    "def attention_backward(dout, q, k, v, weights):\n    return dout, dout, dout\n",
    "ex05_combine_heads.py": "from solutions.ex05_combine_heads import combine_heads\n",
    "ex06_mha_forward.py": SOLUTIONS["ex06_mha_forward.py"].replace(
        "    out = concat @ W_o  # (B, T, d_model)", "    out = concat @ W_o\n    concat[...] = 0.0"
    ),
    "ex07_mha_backward.py": "import importlib\n\n\n"
    "def mha_backward(dout, query, key, value, params, num_heads, attn_mask=None):\n"
    "    F = importlib.import_module('mhattn.functional')\n"
    "    _, _, cache = F.multi_head_attention_forward(query, key, value, params, num_heads, attn_mask=attn_mask)\n"
    "    dq, dk, dv, grads, _ = getattr(F, 'multi_head_attention_' + 'backward')(dout, cache)\n"
    "    return dq, dk, dv, grads\n",
    "ex09_head_importance.py": "def head_mask_gradient(heads, dconcat):\n    return heads\n",
    "ex10_random_removal.py": "from mhattn.grade.reference import expected_loss_change, removal_curve, removal_mask\n",
}


@pytest.fixture(scope="module")
def robustness_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("robust")
    for name, text in ROBUSTNESS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "ex08_count_parameters.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    return grade(folder, timeout=10.0)


@pytest.mark.parametrize(
    "name, words",
    [
        ("ex01_split_heads", "timed out after 10 s"),
        ("ex02_softmax", "EOFError"),
        ("ex03_attention_forward", "exception ZeroDivisionError: division by zero"),
        ("ex04_attention_backward", "imports scaled_dot_product_attention_backward from mhattn.functional"),
        ("ex05_combine_heads", "may not use anything under solutions/"),
        ("ex06_mha_forward", "output_projection modified its input concat in place"),  # that check only: below
        ("ex07_mha_backward", "is hidden while ex07_mha_backward is graded"),
        ("ex08_count_parameters", "SystemExit: 3"),
        ("ex09_head_importance", "missing function(s): head_importance"),
        ("ex10_random_removal", "may not use the grader's code"),
    ],
)
def test_each_bad_behaviour_scores_zero_with_a_reason(robustness_report, name, words):
    from mhattn.grade.checks_mha import PROJ

    row = next(r for r in robustness_report["exercises"] if r["name"] == name)
    lost = [c for c in row["checks"] if c["points"] == 0]
    if name == "ex06_mha_forward":  # mha_forward modifies no input of its own: its checks keep their points
        assert [c["name"] for c in lost] == [PROJ] and row["points"] == row["max_points"] - lost[0]["max_points"]
    else:
        assert row["points"] == 0 and len(lost) == len(row["checks"])
    assert words in row["reason"]


def test_the_learners_current_file_is_graded_every_time(tmp_path):
    folder = with_edits(tmp_path)
    assert grade(folder, only=["ex05"])["total"] == FULL["ex05_combine_heads"]
    path = folder / "ex05_combine_heads.py"
    path.write_text(path.read_text(encoding="utf-8").replace("x.transpose(0, 2, 1, 3)", "x.transpose(0, 2, 3, 1)"))
    assert grade(folder, only=["ex05"])["total"] == 0


def test_feedback_gives_the_error_not_the_expected_values(tmp_path):
    folder = with_edits(tmp_path, WRONG[3].edits)  # sqrt(d_model)
    reason = reasons(grade(folder, only=["ex03"], seed=7))["ex03_attention_forward"]
    assert "max |error| vs reference" in reason and "[" not in reason


def test_visible_tests_pass_on_solutions_and_fail_on_stubs(stubs):
    from mhattn.grade import run_visible

    for ex in EXERCISES:
        run_visible(ex.name, ROOT / "solutions")
        with pytest.raises((NotImplementedError, GradeFailure)):
            run_visible(ex.name, stubs)


def test_syntax_errors_and_exceptions_name_the_line(tmp_path):
    folder = with_edits(tmp_path, files={
        "ex05_combine_heads.py": "def combine_heads(x):\n    return (x\n",
        "ex01_split_heads.py": "def split_heads(x, num_heads):\n    return 1 / 0\n",
        "ex02_softmax.py": "x = 1\ny = 2\x00\n",
    })  # fmt: skip
    (folder / "ex08_count_parameters.py").write_bytes(b"# ok\n\ndef count_parameters():\n    return '\xe9'\n")
    why = reasons(grade(folder, only=["ex01", "ex02", "ex05", "ex08"]))
    assert "ex05_combine_heads.py line 2: SyntaxError" in why["ex05_combine_heads"]
    assert "ZeroDivisionError" in why["ex01_split_heads"] and "ex01_split_heads.py line 2" in why["ex01_split_heads"]
    assert why["ex02_softmax"] == "ex02_softmax.py line 2: a NUL byte (the file does not parse)"
    assert why["ex08_count_parameters"].startswith("ex08_count_parameters.py line 4: not valid UTF-8")


def test_the_worker_never_sees_the_seed(tmp_path):
    seed = 918273645
    code = (
        f"import os, sys\nseen = str({seed}) in repr(sys.argv) + repr(dict(os.environ)) + open('/proc/self/cmdline').read()\n"
        "raise ValueError(f'seen={seen}')\n"
    )
    folder = with_edits(tmp_path, files={"ex08_count_parameters.py": code})
    assert "seen=False" in reasons(grade(folder, only=["ex08"], seed=seed))["ex08_count_parameters"]


def test_the_grader_does_not_import_commands():
    for path in (ROOT / "mhattn" / "grade").glob("*.py"):
        assert "mhattn.commands" not in path.read_text(encoding="utf-8"), path.name


@pytest.mark.parametrize("ex", EXERCISES, ids=[e.name for e in EXERCISES])
def test_hidden_modules_are_stand_ins_that_still_import(ex):
    """With an exercise's stand-ins in place, mhattn still imports, and each hidden function raises."""
    stubs = stubs_for(ex.hidden_modules, ex.name)
    probe = (
        "import sys; sys.path.insert(0, {!r})\n"
        "from guard import install_finder; install_finder({!r}, {!r})\n"
        "import mhattn.functional, mhattn.nn, mhattn.heads, mhattn.course, mhattn.training\n"
        "import importlib\n"
        "for path in {!r}:\n"
        "    mod, name = path.split(':'); obj = importlib.import_module(mod)\n"
        "    for part in name.split('.'): obj = getattr(obj, part)\n"
        "    try: obj(); raise SystemExit('not hidden: ' + path)\n"
        "    except RuntimeError as e: assert 'is hidden while' in str(e)\n"
    ).format(str(ROOT / "mhattn" / "grade"), stubs, imports.allowed_modules(), list(ex.banned))
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


def test_the_docs_list_every_exercise_and_spell_out_no_count():
    """README's table and exercises/README.md's sections follow spec.EXERCISES; no "ten exercises" to go stale."""
    rows = re.findall(r"^\| (\d+) \| `(ex\d\d_\w+)\.py` \| .* \| (\d+) \|$", (ROOT / "README.md").read_text(), re.M)
    assert rows == [(str(i), ex.name, str(ex.points)) for i, ex in enumerate(EXERCISES, 1)]
    guide = (ROOT / "exercises_src" / "README.md").read_text(encoding="utf-8")
    assert all(f"(`{ex.filename}`, {ex.points} points)" in guide for ex in EXERCISES)
    docs = [ROOT / "README.md", ROOT / "exercises_src" / "README.md", ROOT / "exercises_src" / "test_visible.py",
            ROOT / "notebooks" / "00_setup_and_backends.py", *(ROOT / "mhattn" / "grade").glob("*.py")]  # fmt: skip
    # a count of exercises spelled out ("ten exercises", "eleven files"); "twelve heads" is not one
    counts = (
        r"\b(ten|eleven|twelve|thirteen|fourteen|fifteen) (graded )?(exercises?|files|steps)\b"
        r"|ex01 \.\.\. ex1\d|visible_ex01` \.\.\."
    )
    assert not [p.name for p in docs if re.search(counts, p.read_text(encoding="utf-8"), re.I)]


def test_an_exercise_named_twice_is_graded_once():
    report = grade(ROOT / "solutions", only=["ex05", "5", "ex05_combine_heads"], seed=1)
    assert [r["name"] for r in report["exercises"]] == ["ex05_combine_heads"] and report["max_total"] == 5


@pytest.mark.skipif(sandbox.tmp_args() is None, reason="no working bubblewrap here")
def test_the_private_tmp_is_mounted_before_the_binds_so_a_venv_under_tmp_stays_visible():
    """bwrap mounts in order: a --tmpfs /tmp after the binds would hide a venv or clone living under /tmp."""
    args = list(sandbox.base_args())
    tmp_at = max(i for i, a in enumerate(args) if a == "/tmp" and args[i - 1] == "--tmpfs")
    first_bind = next(i for i, a in enumerate(args) if a == "--ro-bind" and args[i + 1] != "/proc/sys")
    assert tmp_at < first_bind


def test_a_file_with_a_byte_order_mark_is_read_as_python_reads_it(tmp_path):
    """Windows editors may save UTF-8 with a BOM; Python runs such a file, so the grader grades it (a coding line too)."""
    folder = with_edits(tmp_path)
    path = folder / "ex05_combine_heads.py"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    ex01 = folder / "ex01_split_heads.py"
    ex01.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + ex01.read_bytes())
    report = grade(folder, only=["ex05", "ex01"], seed=2)
    assert report["total"] == 10, reasons(report)
    from mhattn.grade import run_visible

    run_visible("ex05_combine_heads", folder)
