"""``mhattn gradebook`` for an instructor: one odd hand-in (any name a file system allows, any kind of entry) costs
only its student, with a reason; the gradebook is written whatever happens; no CSV cell runs as a formula; and
``summary.md`` names every fault kind with its students, unfinished exercises and hand-in problems apart."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import pytest

from mhattn.classroom import grade_class, gradebook
from mhattn.classroom.names import csv_cell, display, file_stem
from mhattn.classroom.summary import NOT_WRITTEN, PROBLEMS, SHOWN, class_summary, fault, faults
from mhattn.grade.spec import EXERCISES
from mhattn.grade.verdict import all_failed, checks_row, row

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS  # noqa: E402

EX08 = "ex08_count_parameters.py"
LATIN1 = os.fsdecode(b"caf\xe9")  # as unzip leaves a Latin-1 name: not UTF-8
ODD = {LATIN1: 5, "x" * 255: 5, "-rf": 5, "a.b..c": 5, "=2+5": 5, '=HYPERLINK("x")': 5}


# ---- names, without grading -----------------------------------------------------------------
@pytest.mark.parametrize("sid", [*ODD, "alice", "\tbob", "\rcarol", "+1", "@sum", "line\nbreak"])
def test_each_id_has_a_safe_file_name_and_a_readable_form(sid):
    stem = file_stem(sid)
    assert len(stem.encode()) <= 200 and not stem.startswith((".", "-")) and stem.isprintable()
    stem.encode("utf-8")  # no surrogates left
    assert (stem == sid) == (sid in ("alice", "a.b..c", "=2+5", "+1", "@sum"))  # capitals: hashed (macOS ignores case)
    assert display(sid).isprintable() and display(LATIN1) == "caf\\xe9"
    assert file_stem(sid) != file_stem(sid + "x")


@pytest.mark.parametrize("text", ["=2+5", "+1", "-rf", "@SUM(A1)", "\tx", "\rx", '=HYPERLINK("x")'])
def test_a_cell_that_would_be_a_formula_starts_with_a_quote(text):
    assert csv_cell(text) == "'" + text and csv_cell("alice") == "alice" and csv_cell(5) == 5


# ---- the summary, from made-up results ----------------------------------------------------------
def report(reasons: dict[str, dict[str, str]]) -> dict:
    """A student's report where ``reasons[exercise][check]`` failed (``"*"``: every check of it)."""
    rows = []
    for ex in EXERCISES:
        failed = reasons.get(ex.name, {})
        checks = all_failed(ex.checks, failed["*"]) if "*" in failed else checks_row(ex.checks, failed)
        rows.append(row(ex.name, checks))
    return {"exercises": rows, "total": sum(r["points"] for r in rows), "error": None}


E1, E2, E5 = EXERCISES[0], EXERCISES[1], EXERCISES[4]
CASES = {
    "time-out": "timed out after 30 s (an endless loop, or far too slow?)",
    "missing file": f"file not found: {E5.filename}",
    "encoding problem": f"{E5.filename} line 3: not valid UTF-8 text (save the file as UTF-8)",
    "in-place edit": "hidden test failed: combine_heads modified its input x in place (inputs must be left unchanged)",
    "oversize output": "its results were larger than the 16 MiB limit (print's output is cut, not counted; ...)",
}


def test_every_problem_kind_is_listed_with_its_students():
    results = {f"p{i}": report({E5.name: {"*": why}}) for i, why in enumerate(CASES.values())}
    text = class_summary(results)
    for i, problem in enumerate(PROBLEMS):
        line = next(ln for ln in text.splitlines() if problem in ln and "`p" in ln)
        assert f"`p{i}`" in line and "1 student," in line, line
    assert "None: every check that was written passed." in text


def test_a_syntax_error_is_one_fault_and_unfinished_work_is_apart():
    syntax = f"{E2.filename} line 4: SyntaxError: invalid syntax (the file does not parse)"
    results = {"a": report({E2.name: {"*": syntax}}), "b": report({E1.name: {"*": "not implemented yet: split_heads"}})}
    found = faults(results)
    assert found[(E2.name, fault(syntax))] == {"a": [c for c, _ in E2.checks]}
    text = class_summary(results)
    faults_part = text.split("## Faults")[1]
    assert faults_part.count("syntax error") == 1 and NOT_WRITTEN not in faults_part
    assert f"1 student, {E1.name}" in text.split("## Not written yet")[1].split("##")[0]


def test_a_common_fault_names_its_first_students_and_links_the_rest():
    axis = "this is a softmax over axis -2; the softmax runs over the last axis (-1, the keys)"
    why = f"hidden test failed: softmax_forward(scores (2, 3, 4, 5)): max |error| vs reference 3.1e-01 (tolerance 1e-09); {axis}"
    results = {f"s{i:02d}": report({E2.name: {E2.checks[0][0]: why}}) for i in range(SHOWN + 5)}
    text = class_summary(results)
    line = next(ln for ln in text.splitlines() if axis in ln)
    assert line.startswith(f"- {SHOWN + 5} students, {E2.name}") and "and 5 more" in line and "faults.csv" in line
    assert "`s00`" in line and "`s14`" not in line


def test_a_qualifier_is_not_counted_as_a_fault_of_its_own():
    assert fault("scores only together with the right values (out); failed: out: ...") is None


# ---- a class of odd names and entries, graded ---------------------------------------------------
@pytest.fixture(scope="module")
def odd_class(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("odd")
    sub = tmp / "sub"
    sub.mkdir()
    for sid in ODD:
        os.mkdir(os.fsencode(sub) + b"/" + os.fsencode(sid))
        (sub / sid / EX08).write_text(SOLUTIONS[EX08], encoding="utf-8")
    os.mkfifo(sub / "fifo")
    (sub / "link").symlink_to(sub / "-rf", target_is_directory=True)
    (sub / "=cmd.zip").write_bytes(b"not a zip")
    (sub / "notes.txt").write_text("not a hand-in")
    (sub / ".DS_Store").write_bytes(b"\0")
    (sub / "locked").mkdir()
    (sub / "locked").chmod(0)  # unreadable, unless the tests run as root
    done = grade_class(sub, tmp / "out", jobs=2, seed=3, timeout=10.0, progress=False)
    return tmp / "out", done


@pytest.mark.grader
def test_odd_names_cost_nobody_and_odd_entries_cost_only_themselves(odd_class):
    out, done = odd_class
    totals = {sid: r["total"] for sid, r in done["students"].items()}
    assert totals == {**ODD, "fifo": 0, "link": 0, "=cmd": 0, "locked": 0}
    errors = {sid: r["error"] for sid, r in done["students"].items() if r["error"]}
    assert "is a link" in errors["link"] and "not a readable zip" in errors["=cmd"] and "cannot read" in errors["fifo"]
    assert ("Permission denied" if os.geteuid() else "no exercise files") in errors["locked"]
    names = {p.name for p in (out / "results").iterdir()}
    assert len(names) == len(totals) and all(n.encode("utf-8") and len(n.encode()) <= 210 for n in names)


@pytest.mark.grader
def test_the_gradebook_escapes_formulas_and_lists_what_it_skipped(odd_class):
    out, done = odd_class
    rows = list(csv.reader((out / "gradebook.csv").open(encoding="utf-8")))
    ids = {r[0] for r in rows[1:]}
    assert {"'=2+5", "'-rf", "'=cmd", "caf\\xe9", "a.b..c", '\'=HYPERLINK("x")'} <= ids
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows for cell in r)
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "`notes.txt`: a file that is neither a folder nor a .zip" in text and "`.DS_Store`" in text
    assert (out / "faults.csv").is_file()


@pytest.mark.grader
def test_the_gradebook_is_written_even_when_grading_stops(tmp_path, monkeypatch):
    sub = tmp_path / "sub"
    for sid in ("a", "b", "c"):
        (sub / sid).mkdir(parents=True)
        (sub / sid / EX08).write_text(SOLUTIONS[EX08], encoding="utf-8")
    real = gradebook.grade_student

    def stop_at_c(sid, *args):
        if sid == "c":
            raise KeyboardInterrupt
        return real(sid, *args)

    monkeypatch.setattr(gradebook, "grade_student", stop_at_c)
    with pytest.raises(KeyboardInterrupt):
        grade_class(sub, tmp_path / "out", jobs=1, seed=3, timeout=10.0, progress=False)
    rows = list(csv.reader((tmp_path / "out" / "gradebook.csv").open(encoding="utf-8")))
    assert [(r[0], r[-2]) for r in rows[1:]] == [("a", "5"), ("b", "5")]
    assert "2 students" in (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
