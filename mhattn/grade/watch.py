"""Without a sandbox, notice a submission that changed what a later run of Python would execute.

A worker without a sandbox writes with the learner's rights. It runs with ``python -I -S`` (no ``.pth``
file, no ``sitecustomize``) from a folder of links to mhattn and numpy only
(:func:`mhattn.grade.sandbox.plain_command`), so a start-up file it writes cannot reach the next worker;
but the *grader* of a later run starts as a normal Python, and runs every ``.pth`` file, what those
import, mhattn, numpy and the standard library. :func:`snapshot` fingerprints that code; a change
between two snapshots scores the exercise 0 and tells the learner to reinstall. A fingerprint holds
each file's size, times and inode: a rewrite that puts back the modification time (``os.utime``)
still changes the change time (``st_ctime``), which no unprivileged process can set.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
from pathlib import Path

import numpy as np

CODE = (".py", ".pyc", ".so", ".pth", ".pyd")


def _trees() -> list[Path]:
    """Package folders whose every code file counts: mhattn, numpy, and what ``.pth`` files import."""
    import mhattn

    roots = [Path(mhattn.__file__).resolve().parent, Path(np.__file__).resolve().parent]
    for pth in _startup_files():
        if pth.suffix != ".pth":
            continue
        try:
            lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:  # site.py runs the lines that start with "import"
            if line.startswith(("import ", "import\t")):
                roots += [p for name in _imported_names(line) if (p := _location(name))]
    return roots


def _imported_names(line: str) -> list[str]:
    names = []
    for stmt in line.split(";"):
        words = stmt.strip().split()
        if len(words) > 1 and words[0] == "import":
            names += [n.strip().split(" ")[0] for n in " ".join(words[1:]).split(",")]
    return [n for n in names if n]


def _location(name: str) -> Path | None:
    """The file or package folder of top-level module ``name``, found without importing it."""
    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin) if spec.origin and os.path.isabs(spec.origin) else None


def _startup_files() -> list[Path]:
    """``.pth`` and ``*customize.py`` files of every folder Python's start-up looks in."""
    folders = {*site.getsitepackages(), site.getusersitepackages(), *sys.path}
    out = []
    for d in folders:
        folder = Path(d or ".")
        out += [*folder.glob("*.pth"), *folder.glob("*customize.py")]
    return out


def _loaded() -> list[str]:
    """Source and compiled files of every module this process has loaded (the grader's own code)."""
    out = []
    for module in list(sys.modules.values()):
        for attr in ("__file__", "__cached__"):
            path = getattr(module, attr, None)
            if isinstance(path, str):
                out.append(path)
    return out


def snapshot(before: dict | None = None) -> dict:
    """``{path: (size, mtime, ctime, inode)}`` of the code a later run of the grader (or its worker) executes.

    With ``before`` (the snapshot taken before a worker ran), the loaded modules are those ``before`` holds: a
    module the grader itself loads meanwhile (another thread unpacking a zip loads ``cp437``) is not a change a
    hand-in made. Every file of the watched trees and every start-up file is listed afresh, so one written there
    still counts.
    """
    loaded = _loaded() if before is None else list(before)
    paths = [*loaded, *map(str, _startup_files()), sys.executable, os.path.join(sys.prefix, "pyvenv.cfg")]
    for root in _trees():
        if root.is_file():
            paths.append(str(root))
            continue
        for folder, _, names in os.walk(root):
            paths += [os.path.join(folder, n) for n in names if n.endswith(CODE)]
    state = {}
    for p in paths:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        state[p] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return state


def changed(before: dict, after: dict) -> list[str]:
    """Paths added, removed or changed between two snapshots, sorted."""
    return sorted({p for p, _ in set(before.items()) ^ set(after.items())})
