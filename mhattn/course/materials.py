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
from typing import NamedTuple

PACKAGED = Path(__file__).resolve().parents[1] / "course_materials"  # mhattn/course_materials (in a wheel)
REPO = Path(__file__).resolve().parents[2]  # the repository root, in a clone
GENERATORS = ("scripts/exercise_files.py", "mhattn/grade/generate.py")  # wherever the stub generator lives


class CourseError(ValueError):
    """The materials cannot be found."""


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


class Installed(NamedTuple):
    """What :func:`install` did: paths relative to its ``dest``."""

    written: list[str]  # missing files, now copied
    kept: list[str]  # files that differ from the course's (edits), left as they are
    backups: dict[str, str]  # with ``force``: edited file -> where the learner's version was moved (``X.bak``)


def backup_name(path: Path) -> Path:
    """``X.bak``, or ``X.bak2``, ``X.bak3``, ... : the first name not taken, so no backup overwrites another."""
    candidate, n = path.with_name(path.name + ".bak"), 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.bak{n}")
    return candidate


def install(dest: Path, files: dict[str, bytes], *, force: bool = False) -> Installed:
    """Write the missing ``files`` under ``dest``; identical files are left alone, and so are edited ones.

    An edited file (content differs from the course's) is never overwritten: it is kept and listed, or with
    ``force`` first moved to ``X.bak`` (see :func:`backup_name`) and then replaced by the course's version.
    """
    edited = set(conflicts(dest, files))
    written, kept, backups = [], [], {}
    for rel, data in files.items():
        path = dest / rel
        if rel in edited and not force:
            kept.append(rel)
            continue
        if rel in edited:
            bak = backup_name(path)
            path.rename(bak)
            backups[rel] = bak.relative_to(dest).as_posix()
        elif path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(rel)
    return Installed(written, sorted(kept), backups)
