"""``mhattn course init DIR``: copy the notebooks and the exercises into DIR, so the course works without a clone."""

from __future__ import annotations

import sys

from mhattn.commands import output_dir
from mhattn.course.materials import CourseError, install, packaged

FIRST_NOTEBOOK = "notebooks/00_setup_and_backends.ipynb"


def add_parser(sub, name):
    p = sub.add_parser(name, help="get the course: copy the notebooks and exercises into a folder")
    actions = p.add_subparsers(dest="action", required=True)
    init = actions.add_parser(
        "init",
        help="copy the notebooks (.ipynb and .py), the exercise stubs, their README and hints and the visible tests into DIR",
        description="Copies the course into DIR (created if needed). Files already there with the same content are fine; "
        "a file whose content differs (your edits) stops the copy with exit status 2, and nothing is overwritten.",
    )
    init.add_argument("dir", type=output_dir, metavar="DIR", help="folder for the course (e.g. my-course)")


def _pytest_ini() -> bytes:
    """A ``pytest.ini`` for DIR that registers the exercise markers, so ``-m ex03`` selects without warnings."""
    from mhattn.grade import EXERCISES

    lines = ["[pytest]", "markers ="] + [f"    {ex.marker}: exercise {ex.name}" for ex in EXERCISES]
    return ("\n".join(lines) + "\n").encode("utf-8")


def main(args) -> int:
    dest = args.dir
    try:
        files = dict(packaged())
        files["pytest.ini"] = _pytest_ini()
        written = install(dest, files)
    except CourseError as err:
        print(f"mhattn course init: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the folder cannot be made or written (e.g. under /proc, a full disk)
        print(f"mhattn course init: error: cannot write into {dest}: {err.strerror} ({err.filename})", file=sys.stderr)
        return 2
    kept = len(files) - len(written)
    print(f"copied {len(written)} file(s) into {dest}" + (f" ({kept} already there, unchanged)" if kept else ""))
    n_nb = sum(1 for rel in files if rel.startswith("notebooks/") and rel.endswith(".ipynb"))
    n_ex = sum(1 for rel in files if rel.startswith("exercises/ex"))
    print(f"  notebooks/  {n_nb} notebooks (.ipynb with their .py sources)")
    print(f"  exercises/  {n_ex} exercise stubs, README.md, the visible tests")
    if "glossary.md" in files:
        print("  glossary.md every term the course uses")
    print("\nnext:")
    print(f"  cd {dest}")
    print(f"  jupyter lab {FIRST_NOTEBOOK}      # the course starts here (pip install 'mhattn[course]' for Jupyter)")
    print("  mhattn grade exercises           # score your exercises at any time")
    return 0
