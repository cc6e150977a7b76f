"""What the instructor and each student read: ``gradebook.csv``, ``summary.md``, ``feedback/<id>.md``.

The most common faults are counted per check: a failed check's reason is reduced to its kind (the hint
the grader gave, the exception's type, "not written yet"), without the shapes and numbers that differ
from student to student, so "14 of 40: softmax over axis -2" adds up across the class.
"""

from __future__ import annotations

import csv
import re
import statistics
from collections import Counter
from pathlib import Path

from mhattn.grade.spec import EXERCISES

TOP_FAULTS = 15


def write_gradebook(path: Path, results: dict[str, dict]) -> None:
    """One row per student: id, each exercise's points, total, and why a hand-in could not be graded."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", *(f"{ex.name} ({ex.points})" for ex in EXERCISES),
                    f"total ({sum(ex.points for ex in EXERCISES)})", "note"])  # fmt: skip
        for sid, res in results.items():
            pts = {r["name"]: r["points"] for r in res["exercises"]}
            w.writerow([sid, *(pts.get(ex.name, 0) for ex in EXERCISES), res["total"], res.get("error") or ""])


def fault(reason: str) -> str:
    """The kind of fault a failed check's reason names, without the numbers that differ between students."""
    if reason.startswith("not implemented yet"):
        return "not written yet"
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


def class_summary(results: dict[str, dict], class_seed: int) -> str:
    """``summary.md``: per exercise mean, median and full marks; the most common faults with their counts."""
    n = len(results)
    lines = [f"# Class summary\n\n{n} students, class seed {class_seed} (each student's seed is in results/<id>.json).\n"]
    broken = {sid: r["error"] for sid, r in results.items() if r.get("error")}
    if broken:
        lines.append(f"{len(broken)} hand-ins could not be graded (0 points):\n")
        lines += [f"- {sid}: {why}" for sid, why in broken.items()]
        lines.append("")
    lines += ["| exercise | max | mean | median | full marks |", "|---|---:|---:|---:|---:|"]
    for ex in EXERCISES:
        pts = [next((r["points"] for r in res["exercises"] if r["name"] == ex.name), 0) for res in results.values()]
        lines.append(_stats_row(ex.name, ex.points, pts))
    lines.append(_stats_row("total", sum(ex.points for ex in EXERCISES), [r["total"] for r in results.values()]))
    counts = Counter()
    for res in results.values():
        if res.get("error"):
            continue
        seen = set()
        for r in res["exercises"]:
            for c in r.get("checks", []):
                if c["points"] < c["max_points"]:
                    seen.add((r["name"], c["name"], fault(c["reason"])))
        counts.update(seen)
    lines.append("\n## Most common faults\n")
    if not counts:
        lines.append("None: every graded check passed.")
    for (ex, check, kind), k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_FAULTS]:
        lines.append(f"- {k} of {n}: {ex}, {check}: {kind}")
    return "\n".join(lines) + "\n"


def _stats_row(name: str, maximum: int, pts: list) -> str:
    if not pts:
        return f"| {name} | {maximum} | - | - | 0 |"
    full = sum(p == maximum for p in pts)
    return f"| {name} | {maximum} | {statistics.fmean(pts):.1f} | {statistics.median(pts):g} | {full} |"


def feedback(res: dict) -> str:
    """What the student reads: the total, then each exercise with each check that did not pass and why."""
    lines = [f"# Feedback: {res['student']}\n", f"Total: {res['total']}/{res['max_total']}\n"]
    if res.get("error"):
        lines.append(f"Your hand-in could not be graded: {res['error']}\n")
    lines.append("The hidden tests drew new inputs for this hand-in (your instructor can repeat them).\n")  # no seed
    for r in res["exercises"]:
        lines.append(f"## {r['name']}: {r['points']}/{r['max_points']}\n")
        failed = [c for c in r.get("checks", []) if c["points"] < c["max_points"]]
        if not failed:
            lines.append("All checks passed.\n")
            continue
        if len(failed) == len(r.get("checks", [])) and len({c["reason"] for c in failed}) == 1:
            lines.append(f"{failed[0]['reason']}\n")
            continue
        for c in r["checks"]:
            mark = "passed" if c["points"] == c["max_points"] else c["reason"]
            lines.append(f"- {c['name']} ({c['points']}/{c['max_points']}): {mark}")
        lines.append("")
    return "\n".join(lines)
