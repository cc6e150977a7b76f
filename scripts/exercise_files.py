"""Make ``exercises/`` and ``solutions/`` from the one source in ``exercises_src/``, as nbgrader does.

In a source file, code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is the
answer. The solution copy drops the two marker lines; the exercise copy replaces the
whole region by ``raise NotImplementedError(...)`` at the marker's indentation. Files
without ``.py`` (README, the visible-test runner) are copied to ``exercises/`` as they are;
``test_visible.py`` goes to both folders.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
HEADER = "# Generated from exercises_src/{name} by scripts/make_exercises.py: edit the source, not this file.\n"
EXERCISE_HEADER = (
    "# Your exercise: write your code in this file. (Maintainers: it is generated from\n"
    "# exercises_src/{name} by scripts/make_exercises.py; change the source, not this copy.)\n"
)


def _regions(text: str):
    """Yield (indent, start line, end line) of each solution region; raise ValueError if unbalanced."""
    lines, start = text.splitlines(keepends=True), None
    for i, line in enumerate(lines):
        if line.strip() == BEGIN:
            if start is not None:
                raise ValueError(f"line {i + 1}: {BEGIN} inside another solution region")
            start = i
        elif line.strip() == END:
            if start is None:
                raise ValueError(f"line {i + 1}: {END} without {BEGIN}")
            yield re.match(r"\s*", lines[start]).group(0), start, i
            start = None
    if start is not None:
        raise ValueError(f"line {start + 1}: {BEGIN} is never closed")


def render(text: str, solution: bool, name: str = "") -> str:
    """The solution (``solution=True``) or exercise version of one source file's text."""
    lines = text.splitlines(keepends=True)
    out, pos = [], 0
    for indent, start, end in _regions(text):
        out.extend(lines[pos:start])
        if solution:
            out.extend(lines[start + 1 : end])
        else:
            out.append(f'{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError("{name}: not written yet")\n')
        pos = end + 1
    out.extend(lines[pos:])
    return "".join(out)


def build(src: Path) -> dict[str, dict[str, str]]:
    """``{"exercises": {filename: text}, "solutions": {filename: text}}`` from the source folder."""
    result: dict[str, dict[str, str]] = {"exercises": {}, "solutions": {}}
    for path in sorted(src.iterdir()):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py" and path.name.startswith("ex"):
            stub = render(text, solution=False, name=path.stem)
            result["exercises"][path.name] = EXERCISE_HEADER.format(name=path.name) + stub
            result["solutions"][path.name] = HEADER.format(name=path.name) + render(text, solution=True)
        else:
            result["exercises"][path.name] = text
            if path.name == "test_visible.py":
                result["solutions"][path.name] = text
    return result


def committed_text(root: Path, relpath: str) -> str | None:
    """The text of ``relpath`` as committed in git's HEAD, or None (no git, not tracked)."""
    try:
        res = subprocess.run(["git", "show", f"HEAD:{relpath}"], cwd=root, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.decode("utf-8") if res.returncode == 0 else None


def _text(root: Path, relpath: str, committed: bool) -> str | None:
    if committed:
        text = committed_text(root, relpath)
        if text is not None:
            return text
    p = root / relpath
    return p.read_text(encoding="utf-8") if p.is_file() else None


def out_of_sync(root: Path, committed: bool = True) -> list[str]:
    """Files of ``exercises/`` and ``solutions/`` that differ from what the source gives (or are extra).

    With ``committed`` (the default) the versions in git's HEAD are compared where git has
    them, so a learner's edits in ``exercises/`` are not "drift"; the working tree otherwise.
    """
    problems = []
    for folder, files in build(root / "exercises_src").items():
        target = root / folder
        present = {p.name for p in target.glob("*") if p.is_file()} if target.is_dir() else set()
        for name, text in files.items():
            if _text(root, f"{folder}/{name}", committed) != text:
                problems.append(f"{folder}/{name}")
        problems.extend(f"{folder}/{extra} (not in the source)" for extra in sorted(present - set(files)))
    return problems


def write(root: Path, force: bool = False, only: str | None = None) -> list[str]:
    """(Re)write ``exercises/`` and ``solutions/`` under ``root``; return the paths written.

    An exercise file that differs from both git's HEAD and the new text holds a learner's work: it is left alone
    (and reported with a "kept" prefix) unless ``force``. ``only`` limits to one folder.
    """
    written = []
    for folder, files in build(root / "exercises_src").items():
        if only and folder != only:
            continue
        (root / folder).mkdir(exist_ok=True)
        for name, text in files.items():
            p, rel = root / folder / name, f"{folder}/{name}"
            now = p.read_text(encoding="utf-8") if p.is_file() else None
            edited = now is not None and now not in (text, committed_text(root, rel))
            if folder == "exercises" and edited and not force:
                written.append(f"kept {rel} (it has edits; --force overwrites them)")
                continue
            p.write_text(text, encoding="utf-8")
            written.append(rel)
    return written


def write_copy(root: Path, folder: str, dest: Path) -> Path:
    """Write the freshly generated ``folder`` ("exercises" or "solutions") into ``dest``; return ``dest``.

    Tests grade such a copy, so they never depend on (or touch) a learner's ``exercises/``.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for name, text in build(root / "exercises_src")[folder].items():
        (dest / name).write_text(text, encoding="utf-8")
    return dest
