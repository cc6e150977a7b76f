"""The instructor's files: every file of a gradebook's folder is its owner's alone.

The gradebook's files hold the class seed (``class.json``), each student's seed (``results/``) and every
student's grade (``gradebook.csv``, ``summary.md``, ``faults.csv``, ``feedback/``): each is written mode 0600
inside folders of mode 0700 (:func:`prepare`), whatever mode an older copy or the umask had, so no other user
of the machine (a classmate's worker, run as an unprivileged user, included) reads them. The instructor hands
each student their ``feedback/<id>.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

FOLDERS = ("results", "feedback")


def prepare(out: Path) -> None:
    """Make ``out`` and its sub-folders (mode 0700 each, also when they were there before)."""
    out.mkdir(parents=True, exist_ok=True)
    for folder in (out, *(out / sub for sub in FOLDERS)):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o700)


def write_private(path: Path, text: str) -> None:
    """Write ``path`` whole, readable by its owner only (mode 0600), whatever mode an older copy had."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)
