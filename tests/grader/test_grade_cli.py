"""``mhattn grade`` on the command line: the JSON report's keys, the table, the limits' checks, where it looks
for the exercises, and the one line a failing visible test prints. The scoring itself: test_grade.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_grade import FULL, ROOT, SOLUTIONS, with_edits

from mhattn import cli
from mhattn.grade import sandbox

sys.path.insert(0, str(ROOT / "scripts"))

from exercise_files import write_copy  # noqa: E402
from grader_attacks.cases import WRONG  # noqa: E402

pytestmark = pytest.mark.grader


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """Freshly generated exercises/: the tests never grade (or depend on) a learner's own copy."""
    return write_copy(ROOT, "exercises", tmp_path_factory.mktemp("stubs"))


def test_cli_json_has_the_documented_keys(capsys):
    assert cli.main(["grade", str(ROOT / "solutions"), "--json", "--only", "ex08", "ex01"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"exercises", "total", "max_total", "seed", "sandbox"}
    assert [set(r) for r in report["exercises"]] == [{"name", "points", "max_points", "reason", "checks"}] * 2
    assert all(set(c) == {"name", "points", "max_points", "reason"} for r in report["exercises"] for c in r["checks"])
    assert report["total"] == report["max_total"] == 10
    assert report["sandbox"] is sandbox.available()


@pytest.mark.parametrize("argv", [["grade", "--help"], None])
def test_help_lists_every_json_key(argv, capsys):
    from mhattn.grade.cli import run

    with pytest.raises(SystemExit) as exit_:
        cli.main(argv) if argv else run(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert all(f"  {key}" in out for key in ("exercises", "total", "max_total", "seed", "sandbox"))


@pytest.mark.parametrize(
    "option, value", [("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "inf"), ("--memory", "0"), ("--jobs", "0")]
)
def test_limits_must_be_positive(option, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["grade", str(ROOT / "solutions"), option, value])
    assert exit_.value.code == 2 and f"argument {option}: must be " in capsys.readouterr().err


def test_cli_table_ends_with_the_total(capsys, stubs):
    assert cli.main(["grade", str(stubs), "--only", "ex10"]) == 0
    out = capsys.readouterr().out
    assert "ex10_random_removal" in out and "0/10" in out and "total" in out


def test_a_partly_right_exercise_lists_its_failed_checks(tmp_path, capsys):
    """The table names each failed check of a partly right exercise under it, with its points and reason."""
    folder = with_edits(tmp_path, WRONG[2].edits)  # softmax backward: only the Jacobian's diagonal
    assert cli.main(["grade", str(folder), "--only", "ex02", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "ex02_softmax" in out and "6/10" in out and "  - backward" in out and "0/4" in out


def test_grade_inside_the_exercises_folder_and_on_one_file(tmp_path, monkeypatch, capsys):
    """`mhattn grade` run inside exercises/ grades that folder; given one exercise file, that exercise."""
    folder = with_edits(tmp_path)
    monkeypatch.chdir(folder)
    assert cli.main(["grade", "--only", "ex08", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == FULL["ex08_count_parameters"]
    assert cli.main(["grade", "ex05_combine_heads.py", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in report["exercises"]] == ["ex05_combine_heads"] and report["total"] == 5
    monkeypatch.chdir(tmp_path)
    (folder / "notes.py").write_text("x = 1\n")
    assert cli.main(["grade", str(folder / "notes.py")]) == 2
    assert "is not an exercise file" in capsys.readouterr().err
    assert cli.main(["grade"]) == 2
    assert "or one exercise file such as exercises/ex01_split_heads.py" in capsys.readouterr().err


@pytest.mark.slow  # over 10 s on 2 loaded cores
def test_a_failing_visible_test_prints_its_one_line(tmp_path):
    """pytest on exercises/test_visible.py shows the reason, not a traceback through the grader."""
    folder = write_copy(ROOT, "exercises", tmp_path / "exercises")
    (folder / "ex01_split_heads.py").write_text(SOLUTIONS["ex01_split_heads.py"].replace(".transpose(0, 2, 1, 3)", ""))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore",
            "test_visible.py", "-k", "ex01 or ex02"]  # fmt: skip
    res = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=300)
    failures = res.stdout.split("= FAILURES =")[1].split("short test summary")[0]
    body = [ln for ln in failures.splitlines() if ln.strip() and not ln.startswith(("_", "="))]
    assert body == [
        "visible test failed: split_heads(x (2, 3, 4), num_heads=2): shape (2, 3, 2, 2), expected (2, 2, 3, 2)",
        "ex02_softmax: softmax_forward is not written yet",
    ], failures
