"""exercises/ and solutions/ are generated from exercises_src/ and must not drift from it."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # maintainer tooling, not part of the package

from exercise_files import out_of_sync, render  # noqa: E402


def test_exercises_and_solutions_match_their_source():
    """Checks what git has committed (a learner's edits in exercises/ are not drift)."""
    problems = out_of_sync(ROOT)
    assert not problems, f"regenerate with `python scripts/make_exercises.py` and commit; out of sync: {problems}"


def test_regenerating_keeps_a_learners_work(tmp_path):
    import shutil

    from exercise_files import write

    shutil.copytree(ROOT / "exercises_src", tmp_path / "exercises_src")
    write(tmp_path)
    mine = tmp_path / "exercises" / "ex01_split_heads.py"
    mine.write_text("# my answer\n")
    report = write(tmp_path)
    assert "kept exercises/ex01_split_heads.py (it has edits; --force overwrites them)" in report
    assert mine.read_text() == "# my answer\n"
    write(tmp_path, force=True)
    assert "NotImplementedError" in mine.read_text()


def test_solution_regions_become_stubs_and_answers():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
    assert render(src, solution=True) == "def f(x):\n    return x + 1\n"
    stub = render(src, solution=False, name="ex00")
    assert "raise NotImplementedError" in stub and "x + 1" not in stub


@pytest.mark.parametrize(
    "src", ["    ### BEGIN SOLUTION\n", "    ### END SOLUTION\n", "### BEGIN SOLUTION\n### BEGIN SOLUTION\n"]
)
def test_unbalanced_markers_are_refused(src):
    with pytest.raises(ValueError):
        render(src, solution=True)
