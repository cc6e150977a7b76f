"""``mhattn gradebook SUBMISSIONS --out DIR``: grade a class (see :mod:`mhattn.classroom.gradebook`)."""

from __future__ import annotations

import argparse
import sys
import time

from mhattn.classroom.summary import plural
from mhattn.commands import UsageError, output_dir, positive_int
from mhattn.grade.cli import MIN_MEMORY_MB, positive, seed_file
from mhattn.grade.runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT

EPILOG = """\
DIR receives:
  gradebook.csv      one row per student: id, each exercise's points (the header gives its maximum), total, note;
                     rewritten after each student; a cell that a spreadsheet would run as a formula starts with '
  results/<id>.json  that student's report, as `mhattn grade --json` writes it (each check), with its seed and hash
                     (<id>: the id itself, or a readable prefix and a hash when it is long or not UTF-8)
  feedback/<id>.md   what that student should read
  summary.md         per exercise mean, median and full marks; unfinished exercises; time-outs, missing files,
                     encoding problems, in-place edits and oversize output; every fault kind with its students
  faults.csv         every fault: exercise, kind, student, the checks it failed
  class.json         the class seed, 128 random bits unless --seed-file (a later run without it reuses it)
DIR is its owner's alone (mode 0700) and so is every file in it (0600): hand each student their feedback file.

Every entry of SUBMISSIONS is a student except hidden names (. or __) and plain files that are not .zip (both
listed in summary.md), and so is a second hand-in of one id (heidi.zip beside heidi/: the folder is graded); a
link, a FIFO or an unreadable folder scores 0 with the reason. gradebook.csv,
summary.md and faults.csv are written even when the run stops early.

Each hand-in's hidden inputs use a seed derived from the class seed, the student id and the hand-in's files
(HMAC-SHA256): it is in results/<id>.json only, never in the feedback; re-run one grade with
`mhattn grade FOLDER --seed-file DIR/results/<id>.json`. A student whose hand-in has not changed since the last
run into DIR is not graded again (unless --force). No seed is ever given on the command line, where every user of
the machine can read it (/proc): --seed-file reads one from a file.

Hand-ins graded at once are kept apart in the sandbox, and as root (each runs as an unprivileged user of its own,
uids 2100000000-2100000015 unless MHATTN_GRADE_UIDS=FIRST-LAST). As a normal user without a sandbox they cannot
be: the gradebook then grades one at a time, grades every hand-in again each run, and says so in summary.md."""


def add_parser(sub, name):
    p = sub.add_parser(name, help="grade a class: one folder or .zip per student -> gradebook.csv, feedback, summary",
                       description="Grade every hand-in of a class with mhattn grade, each student with their own seed.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("submissions", help="folder with one folder or .zip per student (its name is the student id)")
    p.add_argument("--out", type=output_dir, required=True, metavar="DIR", help="folder for the gradebook")
    p.add_argument("--jobs", type=positive_int, default=2, help="students graded at once (default: %(default)s)")
    p.add_argument("--seed-file", type=seed_file, default=None, metavar="FILE",
                   help="read the class seed from FILE: a number, or another gradebook's class.json (default: the one "
                   "DIR was graded with, else a fresh one)")  # fmt: skip
    p.add_argument("--seed", default=None, help=argparse.SUPPRESS)  # refused: see main
    p.add_argument("--force", action="store_true", help="grade every student again, changed or not")
    p.add_argument("--timeout", type=positive(float), default=DEFAULT_TIMEOUT,
                   help="CPU seconds per exercise, of all its processes (the wall clock allows twice that and 5 s; "
                   "one that runs out of it beside another hand-in is run again alone) (default: %(default)s)")  # fmt: skip
    p.add_argument("--memory", type=positive(int, minimum=MIN_MEMORY_MB), default=DEFAULT_MEMORY_MB, metavar="MIB",
                   help="address space per exercise in MiB (default: %(default)s)")  # fmt: skip
    p.add_argument("--no-sandbox", action="store_true", help="do not use bubblewrap even where it works")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


SEED_REFUSED = ("--seed would put the class seed on the command line, where every user of this machine can read "
                "it: write it to a file only you can read and give --seed-file FILE")  # fmt: skip


def main(args) -> int:
    from mhattn.classroom import grade_class
    from mhattn.classroom.gradebook import changes_seed

    if args.seed is not None:
        raise UsageError(SEED_REFUSED)
    if changes_seed(args.out, args.seed_file):
        print(f"warning: {args.out} was graded with another class seed: every hand-in is graded again with this one",
              file=sys.stderr)  # fmt: skip
    start = time.perf_counter()
    try:
        done = grade_class(args.submissions, args.out, jobs=args.jobs, seed=args.seed_file, force=args.force,
                           progress=not args.quiet, timeout=args.timeout, memory=args.memory,
                           sandbox_mode=False if args.no_sandbox else None)  # fmt: skip
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None
    n, broken = len(done["students"]), sum(bool(r.get("error")) for r in done["students"].values())
    for note in done["notes"]:
        print(note, file=sys.stderr)
    print(f"{plural(n, 'student')} ({len(done['graded'])} graded, {len(done['skipped'])} unchanged, {broken} could not "
          f"be graded) in {time.perf_counter() - start:.1f} s; the class seed is in {args.out / 'class.json'}",
          file=sys.stderr)  # fmt: skip
    print(f"wrote {args.out / 'gradebook.csv'}, {args.out / 'summary.md'}, results/ and feedback/")
    return 0
