"""The local grader: ``mhattn grade [PATH]`` / ``python -m mhattn.grade [PATH]``.

Each exercise file is graded in its own subprocess (:mod:`mhattn.grade.worker`) by
visible tests (fixed inputs) and hidden tests (fresh random shapes and seeds), against
mhattn's own implementation. See :mod:`mhattn.grade.spec` for the ten exercises.
"""

from mhattn.grade.runner import format_table, grade, to_json
from mhattn.grade.spec import EXERCISES

__all__ = ["EXERCISES", "format_table", "grade", "run_visible", "to_json"]


def run_visible(name: str, folder) -> None:
    """Run one exercise's visible tests on ``folder/<name>.py`` in this process (for pytest).

    Raises:
        mhattn.grade.harness.GradeFailure: a visible test failed (the message says why).
        NotImplementedError: the exercise is not done yet.
    """
    from pathlib import Path

    from mhattn.grade.harness import Sandbox
    from mhattn.grade.spec import find
    from mhattn.grade.worker import load

    ex = find(name)
    path = Path(folder) / ex.filename
    box = Sandbox()
    module = load(path, path.read_text(encoding="utf-8"), box)
    ex.visible(module, box)
