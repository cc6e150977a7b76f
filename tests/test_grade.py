"""The grader is honest: full marks for solutions/, zero for the stubs, and each wrong
submission loses the points of exactly the exercise it breaks.

Every grading run starts one subprocess per exercise, so solutions/ and exercises/ are
graded once per session (module-scoped fixtures) and each wrong submission is a copy of
solutions/ with one file swapped.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mhattn import cli
from mhattn.grade import EXERCISES, grade
from mhattn.grade.harness import GradeFailure

ROOT = Path(__file__).resolve().parents[1]
WRONG = Path(__file__).parent / "wrong_submissions"
FULL = {ex.name: ex.points for ex in EXERCISES}

pytestmark = pytest.mark.grader

# wrong submission folder -> the one exercise it must lose
BREAKS = {
    "split_no_transpose": "ex01_split_heads",
    "softmax_query_axis": "ex02_softmax",
    "softmax_backward_diagonal": "ex02_softmax",
    "scale_sqrt_d_model": "ex03_attention_forward",
    "causal_hides_diagonal": "ex03_attention_forward",
    "concat_wrong_order": "ex05_combine_heads",
    "hardcoded_count": "ex08_count_parameters",
}


def points(report):
    return {r["name"]: r["points"] for r in report["exercises"]}


def reasons(report):
    return {r["name"]: r["reason"] for r in report["exercises"]}


@pytest.fixture(scope="module")
def solutions_report():
    return grade(ROOT / "solutions")


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """Freshly generated exercises/: the tests never grade (or depend on) a learner's own copy."""
    from mhattn.grade.generate import write_copy

    return write_copy(ROOT, "exercises", tmp_path_factory.mktemp("stubs"))


@pytest.fixture(scope="module")
def exercises_report(stubs):
    return grade(stubs)


def with_swapped(tmp_path, files):
    """A copy of solutions/ in tmp_path with ``files`` (name -> text or Path) put in."""
    folder = tmp_path / "submission"
    shutil.copytree(ROOT / "solutions", folder)
    for name, content in files.items():
        text = content.read_text(encoding="utf-8") if isinstance(content, Path) else content
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_solutions_get_full_marks(solutions_report):
    assert points(solutions_report) == FULL, f"seed {solutions_report['seed']}: {reasons(solutions_report)}"
    assert solutions_report["total"] == solutions_report["max_total"] == sum(FULL.values())


def test_untouched_exercises_get_zero(exercises_report):
    assert exercises_report["total"] == 0
    assert all("NotImplementedError" in r for r in reasons(exercises_report).values())


def test_wrong_submissions_are_all_tested():
    assert sorted(p.name for p in WRONG.iterdir() if p.is_dir()) == sorted(BREAKS)


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_wrong_submission_loses_exactly_its_exercise(case, tmp_path):
    files = {p.name: p for p in (WRONG / case).glob("*.py")}
    report = grade(with_swapped(tmp_path, files))
    broken = BREAKS[case]
    assert points(report) == {**FULL, broken: 0}, f"seed {report['seed']}: {reasons(report)}"
    assert "failed" in reasons(report)[broken]


def test_a_hard_coded_answer_passes_the_visible_test_but_not_the_hidden_ones(tmp_path):
    folder = with_swapped(tmp_path, {"ex08_count_parameters.py": WRONG / "hardcoded_count" / "ex08_count_parameters.py"})
    report = grade(folder, only=["ex08"])
    assert reasons(report)["ex08_count_parameters"].startswith("hidden test failed: count_parameters(")


ROBUSTNESS = {
    "ex01_split_heads.py": "def split_heads(x, num_heads):\n    while True:\n        pass\n",
    "ex02_softmax.py": "def softmax_forward(scores, mask=None):\n    return input('probs? ')\n\n\n"
    "def softmax_backward(dprobs, probs):\n    return dprobs\n",
    "ex03_attention_forward.py": "def make_causal_mask(T, S=None):\n    return 1 / 0\n\n\n"
    "def attention_forward(q, k, v, mask=None, causal=False):\n    return q, q\n",
    "ex04_attention_backward.py": "from mhattn.functional import scaled_dot_product_attention_backward\n\n\n"
    "def attention_backward(dout, q, k, v, weights):\n    return dout, dout, dout\n",
    "ex05_combine_heads.py": "from solutions.ex05_combine_heads import combine_heads\n",
    "ex06_mha_forward.py": (ROOT / "solutions" / "ex06_mha_forward.py")
    .read_text(encoding="utf-8")
    .replace("    out = concat @ W_o  # (B, T, d_model)", "    out = concat @ W_o\n    concat[...] = 0.0"),
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
        ("ex06_mha_forward", "output_projection modified its input concat in place"),
        ("ex07_mha_backward", "calls mhattn's own multi_head_attention_backward"),
        ("ex08_count_parameters", "SystemExit: 3"),
        ("ex09_head_importance", "missing function(s): head_importance"),
        ("ex10_random_removal", "may not use the grader's code"),
    ],
)
def test_each_bad_behaviour_scores_zero_with_a_reason(robustness_report, name, words):
    assert points(robustness_report)[name] == 0
    assert words in reasons(robustness_report)[name]


def test_the_learners_current_file_is_graded_every_time(tmp_path):
    folder = with_swapped(tmp_path, {})
    assert grade(folder, only=["ex05"])["total"] == FULL["ex05_combine_heads"]
    path = folder / "ex05_combine_heads.py"
    path.write_text(path.read_text(encoding="utf-8").replace("x.transpose(0, 2, 1, 3)", "x.transpose(0, 2, 3, 1)"))
    assert grade(folder, only=["ex05"])["total"] == 0


def test_feedback_gives_the_error_not_the_expected_values(tmp_path):
    folder = with_swapped(tmp_path, {"ex03_attention_forward.py": WRONG / "scale_sqrt_d_model" / "ex03_attention_forward.py"})
    reason = reasons(grade(folder, only=["ex03"], seed=7))["ex03_attention_forward"]
    assert "max |error| vs reference" in reason and "[" not in reason


def test_cli_json_has_the_documented_keys(capsys):
    assert cli.main(["grade", str(ROOT / "solutions"), "--json", "--only", "ex08", "ex01"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"exercises", "total", "max_total"}
    assert [set(r) for r in report["exercises"]] == [{"name", "points", "max_points", "reason"}] * 2
    assert report["total"] == report["max_total"] == 10


def test_cli_table_ends_with_the_total(capsys, stubs):
    cli.main(["grade", str(stubs), "--only", "ex10"])
    out = capsys.readouterr().out
    assert "ex10_random_removal" in out and "0/10" in out and "total" in out


def test_visible_tests_pass_on_solutions_and_fail_on_stubs(stubs):
    from mhattn.grade import run_visible

    for ex in EXERCISES:
        run_visible(ex.name, ROOT / "solutions")
        with pytest.raises((NotImplementedError, GradeFailure)):
            run_visible(ex.name, stubs)


def test_syntax_errors_and_exceptions_name_the_line(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "ex05_combine_heads.py").write_text("def combine_heads(x):\n    return (x\n", encoding="utf-8")
    (folder / "ex01_split_heads.py").write_text("def split_heads(x, num_heads):\n    return 1 / 0\n", encoding="utf-8")
    why = reasons(grade(folder, only=["ex01", "ex05"]))
    assert "ex05_combine_heads.py line 2: SyntaxError" in why["ex05_combine_heads"]
    assert "ZeroDivisionError" in why["ex01_split_heads"] and "ex01_split_heads.py line 2" in why["ex01_split_heads"]


def test_a_missing_transpose_gets_a_hint_not_the_answer(tmp_path):
    folder = with_swapped(tmp_path, {"ex01_split_heads.py": WRONG / "split_no_transpose" / "ex01_split_heads.py"})
    why = reasons(grade(folder, only=["ex01"]))["ex01_split_heads"]
    assert "the values are right but in the wrong places" in why
