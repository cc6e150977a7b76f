"""Who runs a learner's code: never root.

When the grader runs as root (Gradescope runs ``run_autograder`` as root in a container; an instructor may
run ``mhattn gradebook`` with sudo), each worker gives up root before it runs anything of the learner's: a
small trusted Python (:data:`DROP`) clears the supplementary groups, sets the real, effective and saved
group and user ids to an unprivileged user (:func:`worker_ids`: ``MHATTN_GRADE_USER``, default ``nobody``),
which also clears every capability, refuses to go on if any id is still 0, and only then runs the worker.
In the sandbox the dropper runs inside bubblewrap, which root starts without a user namespace (so the
worker's uid is that unprivileged user on the host too, not a relabelled root: :mod:`mhattn.grade.sandbox`);
without a sandbox it runs before the worker's Python. That user owns nothing of the grader's: it cannot
write the output folder, a result, the class configuration or a hand-in that root wrote, read a file
root keeps private (mode 0600: the class seed), or signal the grader.

Run as a normal user, the grader starts workers as itself (nothing to give up); the trust model in
``docs/grading.md`` says what that mode cannot promise.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_USER = "nobody"
NOBODY = 65534  # nobody/nogroup on Debian and Ubuntu, where the system has no such user by name
ENV = "MHATTN_GRADE_USER"  # a user name, or "UID:GID"
DROP = (
    "import os, sys\n"
    "uid, gid = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.setgroups([])\n"
    "if hasattr(os, 'setresuid'):\n"
    "    os.setresgid(gid, gid, gid); os.setresuid(uid, uid, uid)\n"
    "else:  # macOS: as root, setgid and setuid set the real, effective and saved ids\n"
    "    os.setgid(gid); os.setuid(uid)\n"
    "ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid())\n"
    "if 0 in ids or os.getgroups() not in ([], [gid]): sys.exit('root was not given up')\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)
PYTHON = (sys.executable, "-I", "-S", "-B")


def worker_ids() -> tuple[int, int] | None:
    """``(uid, gid)`` a worker runs as when this process is root; None when it is not (workers run as it).

    Raises:
        ValueError: ``MHATTN_GRADE_USER`` names no user, or names root.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:  # Windows has no root to give up
        return None
    name = os.environ.get(ENV, "").strip() or DEFAULT_USER
    if ":" in name:
        uid, _, gid = name.partition(":")
        try:
            ids = int(uid), int(gid)
        except ValueError:
            raise ValueError(f"{ENV} must be a user name or UID:GID, got {name!r}") from None
    else:
        ids = _lookup(name)
    if 0 in ids:
        raise ValueError(f"{ENV} names root ({name!r}): a learner's code never runs as root")
    return ids


def _lookup(name: str) -> tuple[int, int]:
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        if name == DEFAULT_USER:
            return NOBODY, NOBODY
        raise ValueError(f"{ENV} names no user on this system: {name!r}") from None
    return entry.pw_uid, entry.pw_gid


def session_parent(ids: tuple[int, int] | None, use_sandbox: bool) -> str | None:
    """Where a grade keeps its private folder: the usual temporary folder, unless the worker's user, running
    without a sandbox, could not pass through it (e.g. ``TMPDIR`` under /root): then the first of ``/tmp``,
    ``/var/tmp`` and ``/dev/shm`` that every user may pass through."""
    if ids is None or use_sandbox:
        return None
    for d in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"):
        p = Path(d).resolve()
        if p.is_dir() and all(q.stat().st_mode & 0o001 for q in (p, *p.parents)):
            return str(p)
    return None


def drop(ids: tuple[int, int] | None) -> list[str]:
    """The command prefix that runs the rest of a command as ``ids`` (empty for None: nothing to give up)."""
    return [] if ids is None else [*PYTHON, "-c", DROP, str(ids[0]), str(ids[1])]


@functools.lru_cache(maxsize=4)
def check_plain(ids: tuple[int, int] | None, path: str) -> None:
    """Refuse, with what to do, when the worker's user cannot start this Python with numpy and mhattn on ``path``.

    Only without a sandbox: in the sandbox the folders are bound on their own, their parents open.

    Raises:
        RuntimeError: that user cannot run it (e.g. Python under /root, which only root may enter).
    """
    if ids is None:
        return
    code = f"import sys; sys.path += {json.loads(path)!r}; import numpy, mhattn"
    try:
        res = subprocess.run([*drop(ids), *PYTHON, "-c", code], stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=120, cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})  # fmt: skip
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] if res.returncode else None
    except (OSError, subprocess.SubprocessError) as exc:
        err = [str(exc)]
    if err is not None:
        raise RuntimeError(
            f"grading as root runs each submission as uid {ids[0]} (set {ENV} to choose another user), which cannot "
            f"start {sys.executable} with numpy and mhattn ({(err or ['no message'])[0][:200]}): install them where "
            "other users can read them (e.g. a venv under /opt), or install bubblewrap for the sandbox"
        )
