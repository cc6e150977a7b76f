"""Who runs a learner's code: never root.

When the grader runs as root (Gradescope runs ``run_autograder`` as root in a container; an instructor may
run ``mhattn gradebook`` with sudo), each worker gives up root before it runs anything of the learner's: a
small trusted Python (:data:`DROP`) clears the supplementary groups, sets the real, effective and saved
group and user ids to an unprivileged user of its own (one per worker: :mod:`mhattn.grade.pool`), which also
clears every capability, refuses to go on if any id is still 0, and only then runs the worker.
In the sandbox the dropper runs inside bubblewrap, which root starts without a user namespace (so the
worker's uid is that unprivileged user on the host too, not a relabelled root: :mod:`mhattn.grade.sandbox`);
without a sandbox it runs before the worker's Python. That user owns nothing of the grader's: it cannot
write the output folder, a result, the class configuration or a hand-in that root wrote, read a file
root keeps private (mode 0600: the class seed), or signal the grader or a classmate's worker. Without a sandbox
the dropper also gives the worker a mount namespace of its own (:data:`PRIVATE_TMP`), where its working folder is
a private size-limited tmpfs and the folders any user may write are read-only.

Run as a normal user, the grader starts workers as itself (nothing to give up); the trust model in
``docs/grading.md`` says what that mode cannot promise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mhattn.grade import pool

DROP = (
    "import os, sys\n"
    "uid, gid, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]\n"
    "if tmp:\n"
    "    exec(sys.argv[4])\n"
    "os.setgroups([])\n"
    "if hasattr(os, 'setresuid'):\n"
    "    os.setresgid(gid, gid, gid); os.setresuid(uid, uid, uid)\n"
    "else:  # macOS: as root, setgid and setuid set the real, effective and saved ids\n"
    "    os.setgid(gid); os.setuid(uid)\n"
    "ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid())\n"
    "if 0 in ids or os.getgroups() not in ([], [gid]): sys.exit('root was not given up')\n"
    "os.execv(sys.argv[5], sys.argv[5:])\n"
)
# Without a sandbox, as root: a mount namespace of the worker's own where the folders any user may write are
# read-only and ``tmp`` (its working folder, HOME and TMPDIR) is a size-limited tmpfs of its own, gone with it.
# Where the kernel refuses (a container without CAP_SYS_ADMIN) the worker goes on without: the pool clears what
# its uid left in those folders after the hand-in (:func:`mhattn.grade.pool.clear`).
PRIVATE_TMP = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18\n"
    "if libc.unshare(0x00020000) == 0 and libc.mount(b'none', b'/', None, MS_REC | MS_PRIVATE, None) == 0:\n"
    "    for d in (b'/tmp', b'/var/tmp', b'/dev/shm', b'/run/lock'):\n"
    "        if os.path.isdir(d) and not os.path.islink(d) and os.stat(d).st_mode & 0o002:\n"
    "            libc.mount(d, d, None, MS_BIND | MS_REC, None)\n"
    "            libc.mount(None, d, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)\n"
    "    opts = f'size={TMP_BYTES},mode=0700,uid={uid},gid={gid}'.encode()\n"
    "    if libc.mount(b'tmpfs', tmp.encode(), b'tmpfs', MS_NOSUID | MS_NODEV, opts) == 0:\n"
    "        os.chdir(tmp)  # the folder mounted over, not the one below\n"
)
TMP_BYTES = 64 << 20  # the private temporary folder of one worker
PYTHON = (sys.executable, "-I", "-S", "-B")


def worker_ids() -> tuple[int, int] | None:
    """``(uid, gid)`` of the pool's first user when this process is root (:mod:`mhattn.grade.pool`); None when it
    is not (workers run as it). A hand-in's own user comes from :func:`mhattn.grade.pool.lease`.

    Raises:
        ValueError: ``MHATTN_GRADE_UIDS`` is malformed or holds root.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:  # Windows has no root to give up
        return None
    first = pool.ids().start
    return first, first


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


def drop(ids: tuple[int, int] | None, tmp: str = "") -> list[str]:
    """The command prefix that runs the rest of a command as ``ids`` (empty for None: nothing to give up); with
    ``tmp``, in a mount namespace where that folder is a private tmpfs and the shared ones read-only."""
    if ids is None:
        return []
    return [*PYTHON, "-c", DROP, str(ids[0]), str(ids[1]), tmp, PRIVATE_TMP.replace("TMP_BYTES", str(TMP_BYTES))]


_PLAIN_OK: set[str] = set()  # paths a user of the pool could start Python on (all of them may: none has groups)


def check_plain(ids: tuple[int, int] | None, path: str) -> None:
    """Refuse, with what to do, when the worker's user cannot start this Python with numpy and mhattn on ``path``.

    Only without a sandbox: in the sandbox the folders are bound on their own, their parents open. Checked once per
    ``path`` and process, as ``ids`` (the caller's own user of the pool): every user of the pool has the same rights.

    Raises:
        RuntimeError: that user cannot run it (e.g. Python under /root, which only root may enter).
    """
    if ids is None or path in _PLAIN_OK:
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
            f"grading as root runs each submission as uid {ids[0]} (set {pool.ENV} to choose other uids), which cannot "
            f"start {sys.executable} with numpy and mhattn ({(err or ['no message'])[0][:200]}): install them where "
            "other users can read them (e.g. a venv under /opt), or install bubblewrap for the sandbox"
        )
    _PLAIN_OK.add(path)
