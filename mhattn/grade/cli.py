"""The command line of the grader, shared by ``mhattn grade`` and ``python -m mhattn.grade``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mhattn.backend.argtypes import number_in
from mhattn.grade.runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, format_table, grade, to_json
from mhattn.grade.sandbox import missing
from mhattn.grade.spec import EXERCISES, find

DESCRIPTION = "Grade the mhattn exercises: visible and hidden tests, points per exercise."
FILES = f"{EXERCISES[0].marker}_*.py ... {EXERCISES[-1].marker}_*.py ({len(EXERCISES)} exercises)"
EPILOG = """\
JSON report (--json), every key:
  exercises   one record per exercise graded: name, points, max_points, reason (one line), checks
              (the exercise's named checks, each with name, points, max_points, reason: its points split)
  total       points scored
  max_total   points possible for the exercises graded
  seed        seed of the hidden tests' random inputs (--seed or --seed-file repeats them)
  sandbox     true when each file ran in the bubblewrap sandbox; false: one line (stderr) says what is missing

Exit status: 0 when the files were graded (and, with --fail-under, the total reached it); 1 when the
total is below --fail-under; 2 for a usage error (an unknown option or exercise, no such folder).

Trust model: this process never imports your files. Each runs in a worker process that sends back
only plain data (arrays, numbers); the comparison and the points happen here."""
DEFAULT_PATH = "exercises"


MIN_MEMORY_MB = 256  # below this Python and NumPy cannot start: every exercise would fail


def positive(kind, minimum=None):
    """An argparse type: ``kind(text)`` > 0 (or >= ``minimum``), else an error naming the option (exit 2).

    Checked and phrased like every mhattn option (mhattn.backend.argtypes.number_in): "must be an integer >= 1, got 0".
    """
    if minimum is not None:
        return number_in(kind, minimum)
    return number_in(int, 1) if kind is int else number_in(kind, 0, low_open=True)


non_negative_int = number_in(int, 0)  # seeds: NumPy's generators refuse negative ones


def seed_file(text: str) -> int:
    """An argparse type: the seed held in file ``text``: a non-negative integer alone, or a JSON object with one
    under ``"seed"`` or ``"class_seed"`` (``class.json``, ``results/<id>.json``, Gradescope's config). A seed
    given this way is not on the command line, which every user of the machine can read in ``/proc``."""
    import json

    try:
        raw = Path(text).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise argparse.ArgumentTypeError(f"cannot read the seed file {text}: {err}") from None
    try:
        data = json.loads(raw)
        seed = data.get("seed", data.get("class_seed")) if isinstance(data, dict) else data
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text} holds no seed (a non-negative integer, or JSON with "seed")') from None
    return seed


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", default=None,
                   help=f"folder with {FILES}, or one of those files (default: {DEFAULT_PATH}, or this folder when "
                   "run inside it); before or after --only")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as JSON (keys below)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="grade only these exercises (e.g. ex03 or ex03_attention_forward)")
    p.add_argument("--fail-under", type=number_in(float, 0, 100), default=None, metavar="PERCENT",
                   help="exit with status 1 when the total is below PERCENT %% of the points of the exercises graded "
                   "(for scripts and CI; default: exit 0 whatever the total)")  # fmt: skip
    p.add_argument(
        "--timeout",
        type=positive(float),
        default=DEFAULT_TIMEOUT,
        help="CPU seconds per exercise, of all its processes (the wall clock allows twice that and 5 s) (default: %(default)s)",
    )
    p.add_argument(
        "--memory",
        type=positive(int, minimum=MIN_MEMORY_MB),
        default=DEFAULT_MEMORY_MB,
        metavar="MIB",
        help=f"address space per exercise in MiB, at least {MIN_MEMORY_MB} (Python and NumPy need about that much to start) "
        "(default: %(default)s)",
    )
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=non_negative_int, default=None,
                       help="seed for the hidden tests (default: a fresh one each run); your own runs only")  # fmt: skip
    seeds.add_argument("--seed-file", type=seed_file, default=None, metavar="FILE",
                       help="read the seed from FILE (a number, or a gradebook's results/<id>.json): a seed you must "
                       "keep from other users of the machine never goes on the command line")  # fmt: skip
    p.add_argument("--jobs", type=positive(int), default=2, help="exercises graded at once (default: %(default)s)")
    p.add_argument("--no-sandbox", action="store_true", help="do not use bubblewrap even where it works")  # fmt: skip


def path_and_only(path, only) -> tuple[str, list | None]:
    """``(folder, exercise names)`` from the command line: ``--only ex01 exercises`` (argparse gives the folder to
    ``--only``, which takes every word after it) means the same as ``exercises --only ex01``.

    Raises:
        KeyError: a name that is no exercise (the message says which order works when it is a folder).
    """
    names = list(only or [])
    others = [n for n in names if not _is_exercise(n)]
    if path is None and len(others) == 1 and len(names) > 1 and (Path(others[0]).exists() or others[0] == DEFAULT_PATH):
        names.remove(others[0])
        return others[0], names
    for name in others:
        hint = f"; put a folder before --only: mhattn grade {name} --only ..." if Path(name).exists() else ""
        raise KeyError(f"no exercise {name!r}; choose from {', '.join(e.name for e in EXERCISES)}{hint}")
    return (DEFAULT_PATH if path is None else path), (names or None)


def _is_exercise(name: str) -> bool:
    try:
        find(name)
    except KeyError:
        return False
    return True


def main(args) -> int:
    try:
        path, only = path_and_only(args.path, args.only)
        seed = args.seed if args.seed_file is None else args.seed_file
        report = grade(path, only=only, timeout=args.timeout, seed=seed, jobs=args.jobs,
                       memory=args.memory, sandbox_mode=False if args.no_sandbox else None)  # fmt: skip
    except (FileNotFoundError, KeyError, RuntimeError) as err:
        print(f"mhattn grade: {err.args[0]}", file=sys.stderr)
        return 2
    if args.json:
        print(to_json(report))
        if not report["sandbox"]:
            print(missing(), file=sys.stderr)
    else:
        print(format_table(report))
    if args.fail_under is not None and report["total"] < args.fail_under / 100 * report["max_total"]:
        print(f"mhattn grade: {report['total']}/{report['max_total']} is below --fail-under {args.fail_under:g}%",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def run(argv=None) -> int:
    """Entry point of ``python -m mhattn.grade``."""
    p = argparse.ArgumentParser(prog="python -m mhattn.grade", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_arguments(p)
    return main(p.parse_args(argv))
