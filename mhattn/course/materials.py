"""The learner's copy of the course: which files it holds, where they come from, and copying them safely.

A wheel carries the materials in ``mhattn/course_materials/`` (written there at build time by ``setup.py``,
which loads this file by path: it imports nothing but the standard library, so the build needs no NumPy).
In a clone (an editable install) there is no such folder, and the same files are collected from the
repository. Either way the learner gets:

* ``notebooks/``: every ``NN_name.ipynb`` (with its stored outputs) and its jupytext source ``NN_name.py``,
  and ``nbval_sanitize.cfg``;
* ``exercises/``: the stubs (generated from ``exercises_src/``, answers replaced by ``NotImplementedError``),
  their ``README.md`` (with the hints, collapsed) and ``test_visible.py``;
* ``glossary.md``: every term the course uses (``docs/glossary.md``).

``solutions/`` and ``exercises_src/`` are never part of it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

PACKAGED = Path(__file__).resolve().parents[1] / "course_materials"  # mhattn/course_materials (in a wheel)
REPO = Path(__file__).resolve().parents[2]  # the repository root, in a clone
GENERATORS = ("scripts/exercise_files.py", "mhattn/grade/generate.py")  # wherever the stub generator lives


class CourseError(ValueError):
    """The materials cannot be found, or copying them would overwrite a learner's edits."""


def _stub_texts(root: Path) -> dict[str, str] | None:
    """``{filename: text}`` of the exercise stubs rendered from ``exercises_src/``, or None without a generator."""
    for rel in GENERATORS:
        path = root / rel
        if path.is_file() and (root / "exercises_src").is_dir():
            spec = importlib.util.spec_from_file_location("_mhattn_exercise_files", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.build(root / "exercises_src")["exercises"]
    return None


def collect(root: Path) -> dict[str, bytes]:
    """The learner's files from a source tree at ``root``: ``{"notebooks/...": bytes, "exercises/...": bytes}``.

    Raises:
        CourseError: ``root`` has no notebooks or no exercises.
    """
    files = {}
    nb = root / "notebooks"
    for path in sorted(nb.glob("[0-9][0-9]_*.ipynb")) + sorted(nb.glob("[0-9][0-9]_*.py")) + [nb / "nbval_sanitize.cfg"]:
        if path.is_file():
            files[f"notebooks/{path.name}"] = path.read_bytes()
    glossary = root / "docs" / "glossary.md"
    if glossary.is_file():
        files["glossary.md"] = glossary.read_bytes()
    stubs = _stub_texts(root)
    if stubs is not None:
        files.update({f"exercises/{name}": text.encode("utf-8") for name, text in stubs.items()})
    else:  # an sdist: the generated stubs, as shipped
        for path in sorted((root / "exercises").glob("*")):
            if path.is_file() and path.suffix in (".py", ".md"):
                files[f"exercises/{path.name}"] = path.read_bytes()
    if not any(k.startswith("notebooks/") for k in files) or not any(k.startswith("exercises/ex") for k in files):
        raise CourseError(f"no course materials under {root} (expected notebooks/ and exercises_src/ or exercises/)")
    return files


def packaged() -> dict[str, bytes]:
    """The materials this installation carries: the wheel's copy, else the repository's.

    Raises:
        CourseError: neither is there (a broken install).
    """
    if PACKAGED.is_dir():
        paths = [p for p in sorted(PACKAGED.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]  # pip compiles .py
        return {p.relative_to(PACKAGED).as_posix(): p.read_bytes() for p in paths}
    if (REPO / "notebooks").is_dir():
        return collect(REPO)
    raise CourseError(f"this mhattn installation carries no course materials ({PACKAGED} is missing); reinstall mhattn")


def conflicts(dest: Path, files: dict[str, bytes]) -> list[str]:
    """Paths under ``dest`` that exist with content different from ``files`` (a learner's edits), sorted."""

    def differs(path: Path, data: bytes) -> bool:
        return path.exists() and (not path.is_file() or path.read_bytes() != data)

    return sorted(rel for rel, data in files.items() if differs(dest / rel, data))


def install(dest: Path, files: dict[str, bytes]) -> list[str]:
    """Write ``files`` under ``dest``; return the paths written (identical files already there are left alone).

    Raises:
        CourseError: a file exists with other content; nothing is written then.
    """
    clash = conflicts(dest, files)
    if clash:
        raise CourseError(
            f"{len(clash)} file(s) in {dest} differ from the course's and were left alone (your edits?): "
            + ", ".join(clash)
            + ". Move or rename them, or choose another folder."
        )
    written = []
    for rel, data in files.items():
        path = dest / rel
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(rel)
    return written
