"""``mhattn grade [PATH]``: grade the exercise files under PATH (default ``exercises/``)."""

from __future__ import annotations

import argparse

from mhattn.grade import format_table, grade, to_json
from mhattn.grade.runner import DEFAULT_TIMEOUT


def add_parser(sub, name):
    p = sub.add_parser(name, help="grade your exercise files: visible + hidden tests, points per exercise")
    _add_arguments(p)


def _add_arguments(p):
    p.add_argument("path", nargs="?", default="exercises", help="folder with ex01_*.py ... ex10_*.py (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (keys exercises, total, max_total)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="grade only these exercises (e.g. ex03 or ex03_attention_forward)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per exercise (default: %(default)s)")
    p.add_argument("--seed", type=int, default=None, help="seed for the hidden tests (default: a fresh one each run)")
    p.add_argument("--jobs", type=int, default=2, help="exercises graded at once (default: %(default)s)")


def main(args) -> int:
    try:
        report = grade(args.path, only=args.only, timeout=args.timeout, seed=args.seed, jobs=args.jobs)
    except (FileNotFoundError, KeyError) as err:
        print(f"mhattn grade: {err.args[0]}")
        return 2
    print(to_json(report) if args.json else format_table(report))
    return 0


def run(argv=None) -> int:
    """Entry point of ``python -m mhattn.grade``."""
    p = argparse.ArgumentParser(prog="python -m mhattn.grade", description="Grade the mhattn exercises.")
    _add_arguments(p)
    return main(p.parse_args(argv))
