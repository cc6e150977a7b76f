"""As root, a user of its own per worker: a small pool of dedicated unprivileged uids, never two workers on one.

Workers of two hand-ins graded side by side (``mhattn gradebook --jobs 2``) run as two different users, so
neither can signal, trace or read the other (``/proc/<pid>/mem``), in either mode. The pool is the uids (and
gids of the same number) ``FIRST`` to ``LAST`` of ``MHATTN_GRADE_UIDS`` (default :data:`DEFAULT_FIRST` and the
:data:`DEFAULT_SIZE` after it: far above any login user, systemd's dynamic users and the usual ``/etc/subuid``
ranges). They need no entry in ``/etc/passwd``: an id that has one (or a group of that number) is skipped, as it
belongs to someone. Each worker holds a uid for its run and its retry (:func:`lease`, from
:func:`mhattn.grade.runner.run_one`) by an exclusive ``flock`` on ``/run/mhattn-grade-uids/<uid>.lock`` (root's
alone, mode 0700), which also keeps two graders on one machine apart; more workers at once than uids wait for one.
A user per worker, not only per hand-in, keeps exercise 11's count of its user's processes exact
(:func:`mhattn.grade.guard.no_children`) when a hand-in's exercises run side by side. Before a uid is handed out
and after it is given back, every process running as it is killed and every file it owns in the folders any user
may write (``/tmp``, ``/var/tmp``, ``/dev/shm``) removed: nothing of one worker meets the next one on that uid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import time
from pathlib import Path

ENV = "MHATTN_GRADE_UIDS"  # "FIRST-LAST"
DEFAULT_FIRST = 2_100_000_000
DEFAULT_SIZE = 16
LOCKS = Path("/run/mhattn-grade-uids")
SHARED = ("/tmp", "/var/tmp", "/dev/shm")  # where any user may write (sticky, world-writable)


def ids() -> range:
    """The pool's uids (each also the gid).

    Raises:
        ValueError: ``MHATTN_GRADE_UIDS`` is not ``FIRST-LAST`` of positive ids, or holds 0 (root).
    """
    text = os.environ.get(ENV, "").strip()
    if not text:
        return range(DEFAULT_FIRST, DEFAULT_FIRST + DEFAULT_SIZE)
    first, sep, last = text.partition("-")
    try:
        pool = range(int(first), int(last if sep else first) + 1)
    except ValueError:
        raise ValueError(f"{ENV} must be FIRST-LAST (two uids), got {text!r}") from None
    if 0 in pool or pool.start < 0 or not pool or pool.stop > 2**32 - 1:
        raise ValueError(f"{ENV} holds root or no valid uid ({text!r}): a learner's code never runs as root")
    return pool


def _taken(uid: int) -> bool:
    """Whether ``uid`` (or the gid of that number) belongs to a user or group of this system."""
    import grp
    import pwd

    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def _lock_dir() -> Path:
    folder = LOCKS if LOCKS.parent.is_dir() else Path("/tmp") / LOCKS.name
    folder.mkdir(mode=0o700, exist_ok=True)
    st = folder.lstat()
    if not folder.is_dir() or folder.is_symlink() or st.st_uid != 0 or st.st_mode & 0o077:
        raise RuntimeError(f"{folder} must be a folder of root's alone (mode 0700): remove it and grade again")
    return folder


def _try(uid: int) -> int | None:
    """The locked file's descriptor when ``uid`` was free (now held), else None."""
    fd = os.open(_lock_dir() / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def lease():
    """Hold one uid of the pool for one worker: yields ``(uid, gid)``, cleared before and after.

    Raises:
        RuntimeError: every id of the pool belongs to a user or group of this system.
    """
    free = [u for u in ids() if not _taken(u)]
    if not free:
        raise RuntimeError(f"every uid of {ENV} ({ids().start}-{ids().stop - 1}) belongs to a user: choose free ones")
    while True:
        held = next(((u, fd) for u in free if (fd := _try(u)) is not None), None)
        if held:
            break
        time.sleep(0.05)  # more hand-ins at once than uids: wait for one
    uid, fd = held
    try:
        clear(uid)
        yield uid, uid
    finally:
        clear(uid)
        os.close(fd)  # the lock goes with it


def clear(uid: int) -> None:
    """Kill every process of ``uid`` and remove what it owns in :data:`SHARED`."""
    for _ in range(8):
        pids = [p for p in _pids_of(uid) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    for folder in SHARED:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        _remove(Path(entry.path))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _pids_of(uid: int) -> list[int]:
    """Processes whose real or effective uid is ``uid`` (from /proc; none where there is no /proc)."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                line = next(ln for ln in f if ln.startswith(b"Uid:"))
        except (OSError, StopIteration):
            continue
        if uid in {int(x) for x in line.split()[1:3]}:
            found.append(int(entry))
    return found
