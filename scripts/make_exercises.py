"""Regenerate exercises/ and solutions/ from exercises_src/ (``--check``: only report differences).

Usage (from the repository root):
    python scripts/make_exercises.py          # rewrite both folders
    python scripts/make_exercises.py --check  # exit 1 if they are out of sync with the source
    python scripts/make_exercises.py --force  # also overwrite exercise files that hold edits

An exercise file with edits (different from git's HEAD and from the new stub) is a
learner's work and is kept unless --force.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from exercise_files import out_of_sync, write

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="do not write; exit 1 when a generated file differs")
    p.add_argument("--force", action="store_true", help="overwrite exercise files even when they hold edits")
    args = p.parse_args(argv)
    if args.check:
        problems = out_of_sync(ROOT)
        for line in problems:
            print(f"out of sync: {line}")
        return 1 if problems else 0
    for path in write(ROOT, force=args.force):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
