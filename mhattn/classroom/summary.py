"""What the instructor and each student read: ``gradebook.csv``, ``summary.md``, ``faults.csv``, ``feedback/<id>.md``.

Faults are counted once per student and exercise and kind: a failed check's reason is reduced to its kind (the
hint the grader gave, the exception's type, a time-out, a missing file, ...), without the shapes and numbers that
differ from student to student, so "14 students: softmax over axis -2" adds up across the class; a syntax error
that fails every check of an exercise is one fault. Unfinished exercises ("not written yet") are counted apart,
and so are the problems of a hand-in itself (:data:`PROBLEMS`). ``summary.md`` names up to :data:`SHOWN` students
per line; ``faults.csv`` lists every one.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from pathlib import Path

from mhattn.classroom.names import csv_cell, display, md_code, md_text
from mhattn.classroom.private import write_private
from mhattn.grade.harness import QUALIFIED
from mhattn.grade.spec import EXERCISES

SHOWN = 10
NOT_WRITTEN = "not written yet"
PROBLEMS = ("time-out", "missing file", "encoding problem", "in-place edit", "oversize output")  # always listed
KINDS = (  # (words of a reason, its kind), first match wins
    ("timed out after", "time-out: timed out (an endless loop, or far too slow?)"),
    ("s of CPU time", "time-out: used all its CPU time (an endless loop, or far too slow?)"),
    ("file not found:", "missing file"),
    ("not valid UTF-8", "encoding problem: not UTF-8 text"),
    ("save the file as UTF-8", "encoding problem: an unknown coding line"),
    ("a NUL byte", "encoding problem: a NUL byte"),
    ("in place (inputs must be left unchanged)", "in-place edit: modifies an input"),
    ("MiB limit", "oversize output: results over the size limit"),
    ("(the file does not parse)", "syntax error: the file does not parse"),
    ("missing function(s)", "a function is missing"),
    ("is hidden while", "uses a hidden reference (forfeits the exercise)"),
    ("not available while grading", "imports a module that is not available while grading"),
    ("mhattn's own reference", "imports mhattn's reference for the step"),
    ("may not use", "imports solutions/ or the grader"),
    ("hand in the file itself", "the file cannot be read (a link, a folder, a FIFO?)"),
    ("malformed", "the grading process sent a malformed reply"),
)


def write_gradebook(path: Path, results: dict[str, dict]) -> None:
    """One row per student: id, each exercise's points, total, and why a hand-in could not be graded (cells that a
    spreadsheet would run as a formula start with ``'``: :func:`mhattn.classroom.names.csv_cell`); mode 0600."""
    f = io.StringIO()
    w = csv.writer(f)
    w.writerow(["student", *(f"{ex.name} ({ex.points})" for ex in EXERCISES),
                f"total ({sum(ex.points for ex in EXERCISES)})", "note"])  # fmt: skip
    for sid, res in sorted(results.items()):
        pts = {r["name"]: r["points"] for r in res["exercises"]}
        row = [sid, *(pts.get(ex.name, 0) for ex in EXERCISES), res["total"], res.get("error") or ""]
        w.writerow([csv_cell(c) for c in row])
    write_private(path, f.getvalue())


def fault(reason: str) -> str | None:
    """The kind of fault a failed check's reason names, without the numbers that differ between students; None for
    a check that failed only because the values it qualifies did (the value check's fault is counted)."""
    if reason.startswith(QUALIFIED):
        return None
    if reason.startswith("not implemented yet"):
        return NOT_WRITTEN
    kind = next((k for words, k in KINDS if words in reason), None)
    if kind:
        return kind
    hint = re.search(r"\(tolerance [^)]*\); (.+)$", reason) or re.search(r"contains NaN or inf; (.+)$", reason)
    if hint:
        return hint.group(1)
    exc = re.search(r"exception (\w+)", reason)
    if exc:
        return f"raises {exc.group(1)}"
    text = re.sub(r"^(visible|hidden) test( failed)?: ", "", reason)
    if "max |error| vs reference" in text:
        return "wrong values"
    text = re.sub(r"\([^()]*(\([^()]*\)[^()]*)*\)", "(...)", text)  # call arguments and shapes
    return re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", text)


def faults(results: dict[str, dict]) -> dict[tuple[str, str], dict[str, list[str]]]:
    """``{(exercise, kind): {student: [checks]}}`` over the graded hand-ins: each kind once per student and exercise."""
    found: dict = {}
    for sid, res in sorted(results.items()):
        if res.get("error"):
            continue
        for r in res["exercises"]:
            for c in r.get("checks", []):
                kind = fault(c["reason"]) if c["points"] < c["max_points"] else None
                if kind:
                    found.setdefault((r["name"], kind), {}).setdefault(sid, []).append(c["name"])
    return found


def write_faults(path: Path, found: dict) -> None:
    """``faults.csv``: one row per student, exercise and kind of fault, with the checks it failed; mode 0600."""
    f = io.StringIO()
    w = csv.writer(f)
    w.writerow(["exercise", "fault", "student", "checks"])
    for (ex, kind), who in sorted(found.items()):
        for sid, checks in who.items():
            w.writerow([csv_cell(c) for c in (ex, kind, sid, "; ".join(checks))])
    write_private(path, f.getvalue())


def _ids(who) -> str:
    names = [md_code(display(sid)) for sid in who]
    more = f" and {len(names) - SHOWN} more (all in [faults.csv](faults.csv))" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def _line(ex: str, kind: str, who: dict) -> str:
    checks = sorted({c for cs in who.values() for c in cs})
    every = {name for e in EXERCISES if e.name == ex for name, _ in e.checks}
    which = "" if set(checks) == every else f" ({'; '.join(checks)})"  # a fault of some checks names them
    n = len(who)
    return f"- {plural(n, 'student')}, {ex}{md_text(which)}: {md_text(kind)}: {_ids(who)}"


def plural(n: int, word: str, many: str = "") -> str:
    """``"1 hand-in"``, ``"2 hand-ins"``."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def class_summary(results: dict[str, dict], ignored: dict[str, str] | None = None, notes: list[str] | None = None) -> str:
    """``summary.md``: how the class was graded (``notes``), the hand-ins not graded, per exercise mean, median and
    full marks, the unfinished exercises, the problems of the hand-ins themselves (:data:`PROBLEMS`, each listed),
    then every other fault. It names no seed (those are in ``class.json`` and ``results/``, the instructor's alone);
    every id is a code span and every text a learner could have written is escaped
    (:func:`~mhattn.classroom.names.md_code`, :func:`~mhattn.classroom.names.md_text`)."""
    lines = [f"# Class summary\n\n{plural(len(results), 'student')} (each student's seed is in results/<id>.json).\n"]
    lines += [f"{md_text(note)}\n" for note in notes or []]
    broken = {sid: r["error"] for sid, r in sorted(results.items()) if r.get("error")}
    if broken:
        lines += [f"{plural(len(broken), 'hand-in')} could not be graded (0 points):\n",
                  *(f"- {md_code(display(s))}: {md_text(w)}" for s, w in broken.items()), ""]  # fmt: skip
    if ignored:
        lines += [f"{plural(len(ignored), 'entry', 'entries')} of the submissions folder "
                  f"{'is not a hand-in' if len(ignored) == 1 else 'are not hand-ins'} (not graded, no row):\n",
                  *(f"- {md_code(display(name))}: {md_text(why)}" for name, why in sorted(ignored.items())), ""]  # fmt: skip
    lines += ["## Points per exercise\n", "| exercise | max | mean | median | full marks |", "|---|---:|---:|---:|---:|"]
    for ex in EXERCISES:
        pts = [next((r["points"] for r in res["exercises"] if r["name"] == ex.name), 0) for res in results.values()]
        lines.append(_stats_row(ex.name, ex.points, pts))
    lines.append(_stats_row("total", sum(ex.points for ex in EXERCISES), [r["total"] for r in results.values()]))
    found = faults(results)
    ranked = sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    unfinished = [(key, who) for key, who in ranked if key[1] == NOT_WRITTEN]
    lines += ["\n## Not written yet\n", *(_line(ex, kind, who) for (ex, kind), who in unfinished)]
    lines += ["None." if not unfinished else "", "\n## Problems with the hand-ins themselves\n"]
    for problem in PROBLEMS:
        hits = [_line(ex, kind, who) for (ex, kind), who in ranked if kind.startswith(problem)]
        lines += hits or [f"- {problem}s: none"]
    rest = [(key, who) for key, who in ranked if key[1] != NOT_WRITTEN and not key[1].startswith(PROBLEMS)]
    lines += ["\n## Faults\n", "Each kind of fault once per student and exercise, the most common first; "
              "[faults.csv](faults.csv) lists every student of each.\n"]  # fmt: skip
    lines += [_line(ex, kind, who) for (ex, kind), who in rest] or ["None: every check that was written passed."]
    return "\n".join(lines) + "\n"


def _stats_row(name: str, maximum: int, pts: list) -> str:
    if not pts:
        return f"| {name} | {maximum} | - | - | 0 |"
    full = sum(p == maximum for p in pts)
    return f"| {name} | {maximum} | {statistics.fmean(pts):.1f} | {statistics.median(pts):g} | {full} |"


def feedback(res: dict) -> str:
    """What the student reads: the total, then each exercise with each check that did not pass and why (a hand-in
    that could not be graded: that reason once). Every text a learner could have written is escaped."""
    lines = [f"# Feedback: {md_text(res['student'])}\n", f"Total: {res['total']}/{res['max_total']}\n"]
    if res.get("error"):
        lines.append(f"Your hand-in could not be graded, so every exercise scores 0: {md_text(res['error'])}\n")
        return "\n".join(lines)
    lines.append("The hidden tests drew new inputs for this hand-in (your instructor can repeat them).\n")  # no seed
    for r in res["exercises"]:
        lines.append(f"## {r['name']}: {r['points']}/{r['max_points']}\n")
        failed = [c for c in r.get("checks", []) if c["points"] < c["max_points"]]
        if not failed:
            lines.append("All checks passed.\n")
            continue
        if len(failed) == len(r.get("checks", [])) and len({c["reason"] for c in failed}) == 1:
            lines.append(f"{md_text(failed[0]['reason'])}\n")
            continue
        for c in r["checks"]:
            mark = "passed" if c["points"] == c["max_points"] else md_text(c["reason"])
            lines.append(f"- {md_text(c['name'])} ({c['points']}/{c['max_points']}): {mark}")
        lines.append("")
    return "\n".join(lines)
