"""exercises/ and solutions/ are generated from exercises_src/ and must not drift from it."""

from pathlib import Path

import pytest

from mhattn.grade.generate import out_of_sync, render

ROOT = Path(__file__).resolve().parents[1]


def test_exercises_and_solutions_match_their_source():
    problems = out_of_sync(ROOT)
    assert not problems, f"run `python scripts/make_exercises.py`; out of sync: {problems}"


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
