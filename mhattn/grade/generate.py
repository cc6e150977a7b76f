"""Make ``exercises/`` and ``solutions/`` from the one source in ``exercises_src/``, as nbgrader does.

In a source file, code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is the
answer. The solution copy drops the two marker lines; the exercise copy replaces the
whole region by ``raise NotImplementedError(...)`` at the marker's indentation. Files
without ``.py`` (README, the visible-test runner) are copied to ``exercises/`` as they are;
``test_visible.py`` goes to both folders.
"""

from __future__ import annotations

import re
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
HEADER = "# Generated from exercises_src/{name} by scripts/make_exercises.py: edit the source, not this file.\n"


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
            body = HEADER.format(name=path.name)
            result["exercises"][path.name] = body + render(text, solution=False, name=path.stem)
            result["solutions"][path.name] = body + render(text, solution=True)
        else:
            result["exercises"][path.name] = text
            if path.name == "test_visible.py":
                result["solutions"][path.name] = text
    return result


def out_of_sync(root: Path) -> list[str]:
    """Files of ``exercises/`` and ``solutions/`` that differ from what the source gives (or are extra)."""
    problems = []
    for folder, files in build(root / "exercises_src").items():
        target = root / folder
        present = {p.name for p in target.glob("*") if p.is_file()} if target.is_dir() else set()
        for name, text in files.items():
            p = target / name
            if not p.is_file() or p.read_text(encoding="utf-8") != text:
                problems.append(f"{folder}/{name}")
        problems.extend(f"{folder}/{extra} (not in the source)" for extra in sorted(present - set(files)))
    return problems


def write(root: Path) -> list[str]:
    """(Re)write ``exercises/`` and ``solutions/`` under ``root``; return the paths written."""
    written = []
    for folder, files in build(root / "exercises_src").items():
        (root / folder).mkdir(exist_ok=True)
        for name, text in files.items():
            (root / folder / name).write_text(text, encoding="utf-8")
            written.append(f"{folder}/{name}")
    return written
