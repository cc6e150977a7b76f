"""``mhattn autograder gradescope --out autograder.zip``: the zip to upload to Gradescope (:mod:`mhattn.classroom.gradescope`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mhattn.commands import UsageError, output_file
from mhattn.commands.gradebook import SEED_REFUSED
from mhattn.grade.cli import seed_file

DESCRIPTION = "Write the zip to upload to Gradescope as a programming assignment's autograder."
EPILOG = """\
Upload the zip as the assignment's autograder ("Zip file upload", base image Ubuntu 22.04). Students upload
their ex*.py files (or one zip of them). Each upload is graded with a seed derived from the class seed (128 random
bits unless --seed-file), the student's Gradescope id and the files, printed for the instructor only; each named check
of each exercise is one test with its points and one-line reason."""


def add_parser(sub, name):
    p = sub.add_parser(name, help="build an autograder zip for Gradescope", description=DESCRIPTION,
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("platform", choices=["gradescope"], help="the autograding platform")
    p.add_argument("--out", type=output_file, default=Path("autograder.zip"), help="zip to write (default: %(default)s)")
    p.add_argument(
        "--seed-file",
        type=seed_file,
        default=None,
        metavar="FILE",
        help="read the class seed from FILE: a number, or a gradebook's class.json (default: a fresh one)",
    )
    p.add_argument("--seed", default=None, help=argparse.SUPPRESS)  # refused: never on the command line
    p.add_argument("--wheel", type=Path, default=None,
                   help="mhattn wheel to ship (default: one packed from the mhattn running this command)")  # fmt: skip


def main(args) -> int:
    from mhattn.classroom.gradescope import build

    if args.wheel is not None and not (args.wheel.is_file() and args.wheel.suffix == ".whl"):
        raise UsageError(f"argument --wheel: {args.wheel} is not a .whl file")
    if args.seed is not None:
        raise UsageError(SEED_REFUSED)
    out = build(args.out, wheel=args.wheel, seed=args.seed_file)
    print(f"wrote {out}: upload it to Gradescope as the autograder (Ubuntu 22.04 base image)")
    return 0
