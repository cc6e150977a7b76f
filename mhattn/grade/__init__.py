"""The local grader: ``mhattn grade [PATH]`` / ``python -m mhattn.grade [PATH]``.

Two processes, one trusted: the grader (:mod:`mhattn.grade.runner`) draws inputs, computes the
expected results with mhattn's own functions, compares and scores; a worker per exercise
(:mod:`mhattn.grade.worker`) imports the learner's file, makes the calls and sends back plain
data, in a bubblewrap sandbox where there is one. See :mod:`mhattn.grade.spec` for the exercises.
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

    from mhattn.grade.harness import GradeFailure
    from mhattn.grade.runner import frame
    from mhattn.grade.scan import read_source
    from mhattn.grade.spec import find
    from mhattn.grade.verdict import judge_one
    from mhattn.grade.worker import call_one, load, read_frame

    ex = find(name)
    path = Path(folder) / ex.filename
    source, why = read_source(path)  # as Python reads it (a byte-order mark, a coding line)
    if why:
        raise GradeFailure(why)
    module = load(str(path), source)
    for call in ex.visible():
        args = read_frame(frame(list(call.args)), allow_fn=True)  # as the worker gets them
        res = call_one(module, {"fn": call.fn, "args": args, "probe": call.probe}, str(path))
        if "raised" in res and "NotImplementedError" in res["raised"]["mro"] and not call.raises:
            raise NotImplementedError(f"{ex.name}: {res['raised']['function']} is not written yet")
        why = judge_one(call, res, "visible test", path.name, 0)
        if why:
            raise GradeFailure(why)
