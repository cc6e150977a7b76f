"""The visible tests, run on the exercise files in this folder.

    python -m pytest exercises/test_visible.py            # every exercise
    python -m pytest exercises/test_visible.py -m ex03    # one exercise

The hidden tests (fresh random shapes every run) run only in ``mhattn grade``.
"""

from pathlib import Path

import pytest

from mhattn.grade import EXERCISES, run_visible
from mhattn.grade.harness import GradeFailure

HERE = Path(__file__).parent


@pytest.mark.parametrize("name", [pytest.param(ex.name, marks=getattr(pytest.mark, ex.marker)) for ex in EXERCISES])
def test_visible(name):
    why = None
    try:
        run_visible(name, HERE)
    except (GradeFailure, NotImplementedError) as err:
        why = str(err)
    if why:  # the one line that says what is wrong, not the grader's insides
        pytest.fail(why, pytrace=False)
