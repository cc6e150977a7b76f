"""``mhattn course init DIR``: copy the notebooks and the exercises into DIR, so the course works without a clone."""

from __future__ import annotations

import shlex
import sys

from mhattn.commands import UsageError, output_dir
from mhattn.course.materials import CourseError, install, packaged

FIRST_NOTEBOOK = "notebooks/00_setup_and_backends.ipynb"
SANITIZE = "notebooks/nbval_sanitize.cfg"


def check_command(notebook: str) -> str:
    """The command that re-runs ``notebook`` (a path in the course folder) and compares it with its stored outputs."""
    return f"python -m pytest --nbval --nbval-sanitize-with {SANITIZE} {notebook}"


def add_parser(sub, name):
    p = sub.add_parser(name, help="get the course: copy the notebooks and exercises into a folder")
    actions = p.add_subparsers(dest="action", required=True)
    actions.example = "mhattn course init my-course"  # shown by `mhattn course` alone (mhattn.cli.Parser)
    init = actions.add_parser(
        "init",
        help="copy the notebooks, the exercise stubs, their README and hints and the visible tests into DIR",
        description="Copies the course into DIR (created if needed) and restores any course file missing there. "
        "A file you edited is never overwritten: it is kept and listed; with --force it is moved to FILE.bak "
        "and replaced by the course's version (--force FILE ...: those files only).",
    )
    init.add_argument("dir", type=output_dir, metavar="DIR", help="folder for the course (e.g. my-course)")
    init.add_argument("--force", nargs="*", metavar="FILE", default=None,
                      help="replace the files you edited (all, or only the FILEs named, as paths inside DIR) by the "
                      "course's versions; yours are kept as FILE.bak")  # fmt: skip


def _pytest_ini() -> bytes:
    """A ``pytest.ini`` for DIR that registers the exercise markers, so ``-m ex03`` selects without warnings."""
    from mhattn.grade import EXERCISES

    lines = ["[pytest]", "markers ="] + [f"    {ex.marker}: exercise {ex.name}" for ex in EXERCISES]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _readme() -> bytes:
    """The course folder's ``README.md``: its layout and the commands, each one working as written there."""
    text = f"""# mhattn course

- `notebooks/`: the course, in order (`NN_name.ipynb`, with `NN_name.py` its jupytext source)
- `exercises/`: one file per step of multi-head attention, `README.md` (with hints) and the visible tests
- `glossary.md`: every term the course uses

Run these commands from this folder, with mhattn installed from the wheel your course gave you, with its course
extra (JupyterLab, pytest): `pip install "PATH/TO/mhattn-VERSION-py3-none-any.whl[course]"` (in a clone of mhattn:
`pip install -e ".[course]"`).

```bash
jupyter lab {FIRST_NOTEBOOK}      # the course starts here
python -m pytest exercises/test_visible.py -m ex01     # the visible tests of one exercise
mhattn grade exercises      # score your exercises at any time
{check_command("notebooks/02_scaled_dot_product_attention.ipynb")}   # check one notebook
mhattn course init . --force notebooks/02_scaled_dot_product_attention.ipynb   # get its original back (yours: .bak)
```
"""
    return text.encode("utf-8")


def course_files() -> dict[str, bytes]:
    """Everything ``init`` writes: the packaged materials, a ``pytest.ini`` and the folder's ``README.md``."""
    files = dict(packaged())
    files["pytest.ini"] = _pytest_ini()
    files["README.md"] = _readme()
    return files


def _select(files: dict[str, bytes], names: list[str]) -> dict[str, bytes]:
    """The course files named in ``names`` (paths inside DIR); all of them when ``names`` is empty."""
    wanted = {name.replace("\\", "/").removeprefix("./") for name in names}
    unknown = sorted(wanted - set(files))
    if unknown:
        raise UsageError(f"argument --force: {', '.join(unknown)} is not a course file; course files look like "
                         f"{FIRST_NOTEBOOK} or exercises/README.md")  # fmt: skip
    return {rel: data for rel, data in files.items() if not wanted or rel in wanted}


def _report(dest, files, done) -> None:
    quoted = shlex.quote(str(dest))  # a folder with a space or a quote is one word to the shell
    print(f"copied {len(done.written)} file(s) into {dest}", end="")
    same = len(files) - len(done.written) - len(done.kept)
    print(f" ({same} already there, unchanged)" if same else "")
    for rel, bak in done.backups.items():
        print(f"  replaced {rel}: your version is now {bak}")
    if done.kept:
        print(f"kept {len(done.kept)} file(s) you edited (never overwritten): {', '.join(done.kept)}")
        print(f"  to get the course's version of one (yours moves to FILE.bak): mhattn course init {quoted} --force FILE")
        print(f"  of all of them: mhattn course init {quoted} --force")


def main(args) -> int:
    dest = args.dir
    try:
        files = _select(course_files(), args.force or [])
        done = install(dest, files, force=args.force is not None)
    except CourseError as err:
        print(f"mhattn course init: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the folder cannot be made or written (e.g. under /proc, a full disk)
        print(f"mhattn course init: error: cannot write into {dest}: {err.strerror} ({err.filename})", file=sys.stderr)
        return 2
    _report(dest, files, done)
    if args.force:
        return 0
    n_nb = sum(1 for rel in files if rel.startswith("notebooks/") and rel.endswith(".ipynb"))
    n_ex = sum(1 for rel in files if rel.startswith("exercises/ex"))
    print(f"  notebooks/  {n_nb} notebooks (.ipynb with their .py sources)")
    print(f"  exercises/  {n_ex} exercise stubs, README.md, the visible tests")
    if "glossary.md" in files:
        print("  glossary.md every term the course uses")
    print("  README.md   these commands")
    print("\nnext:")
    print(f"  cd {shlex.quote(str(dest))}")
    print(f"  jupyter lab {FIRST_NOTEBOOK}      # the course starts here (Jupyter: README.md says how to install it)")
    print("  mhattn grade exercises           # score your exercises at any time")
    print(f"  {check_command('notebooks/NN_name.ipynb')}   # check one notebook")
    return 0
