"""Nothing a worker starts outlives it, and it cannot start many: the grader's side of process control.

- **Its tree.** :func:`kill_tree` stops the worker and every descendant found through ``/proc`` (until
  no new one appears), then kills them and the worker's process group.
- **Its orphans.** A helper whose parent exits is handed to the nearest *subreaper* above it. The worker
  is one for what it starts, and the grader makes itself one (:func:`adopt_orphans`,
  ``PR_SET_CHILD_SUBREAPER`` on Linux), so a helper left by a worker that exited (a double fork, a new
  session) becomes the grader's child instead of init's; :func:`sweep_orphans` kills those and reaps them.
- **Their number.** Where the grader may make a control group with a ``pids`` limit (root, or a delegated
  cgroup v2 folder), each worker starts inside its own (:class:`PidsGroup`): a fork bomb's ``fork()`` fails
  at :data:`PIDS_MAX` tasks, and everything in the group is killed at the end, wherever it went. The worker
  also sets ``RLIMIT_NPROC`` (:func:`mhattn.grade.guard.limit`), which binds every user but root.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import os
import signal
import threading
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
PIDS_MAX = 64  # tasks (processes and threads) of one worker's control group
LOCK = threading.Lock()  # held while a worker starts (its pid registered) and while orphans are swept
WORKERS: set[int] = set()  # pids of the workers running now: not orphans
_names = itertools.count()


@functools.lru_cache(maxsize=1)
def adopt_orphans() -> bool:
    """Make this process a subreaper (once); False where the OS has none (the process group is killed then)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, TypeError):
        return False


def _stat(pid: int) -> list[bytes] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state, ppid, pgrp, session, ...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _children() -> dict[int, list[int]]:
    """``{parent pid: [child pids]}`` from /proc (empty where there is no /proc)."""
    tree: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return tree
    for entry in filter(str.isdigit, entries):
        fields = _stat(int(entry))
        if fields and len(fields) > 1 and fields[1].isdigit():
            tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds (user and system) used so far by ``pid`` and every descendant, including the children each has
    reaped (0 where there is no /proc)."""
    ticks = 0
    for p in {pid} | _descendants(pid):
        fields = _stat(p)
        if fields and len(fields) > 14:  # after the name: state is field 3, utime..cstime fields 14..17
            ticks += sum(int(f) for f in fields[11:15])
    return ticks / _CLK_TCK


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _signal(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_and_kill(find) -> set[int]:
    """SIGSTOP what ``find()`` returns until nothing new appears, then SIGKILL it all; the pids."""
    stopped: set[int] = set()
    for _ in range(16):
        new = find() - stopped
        if not new:
            break
        _signal(new, signal.SIGSTOP)
        stopped |= new
    _signal(stopped, signal.SIGKILL)
    return stopped


def kill_tree(proc) -> None:
    """Stop the worker and every descendant (until no new one appears), then kill them and its group."""
    stopped = _stop_and_kill(lambda: ({proc.pid} if proc.poll() is None else set()) | _descendants(proc.pid))
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    _wait_gone(stopped)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, only waiting to be reaped, does not)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X")


def _wait_gone(pids, seconds: float = 2.0) -> None:
    deadline = time.monotonic() + seconds  # a killed process takes a moment to go
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.005)


def _orphans() -> set[int]:
    """Children of this process that a worker left: not a running worker, and in another session than ours."""
    me, session = os.getpid(), os.getsid(0)
    found = set()
    for child in _children().get(me, []):
        fields = _stat(child)
        if child not in WORKERS and fields and len(fields) > 3 and fields[3] != str(session).encode():
            found.add(child)
    return found


def sweep_orphans() -> None:
    """Kill (with what they start meanwhile) and reap every orphan a worker left to this process."""
    with LOCK:
        killed = _stop_and_kill(lambda: set().union(*({o} | _descendants(o) for o in _orphans())))
        _reap(killed | _orphans())


def _reap(pids: set[int], seconds: float = 2.0) -> None:
    """Wait for those of ``pids`` that are this process's children (killed ones go at once)."""
    deadline, left = time.monotonic() + seconds, set(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    left.discard(pid)
            except ChildProcessError:  # not (or no longer) a child of this process
                left.discard(pid)
        if left:
            time.sleep(0.005)


class PidsGroup:
    """A control group with a ``pids`` limit for one worker, or nothing where none can be made here."""

    def __init__(self, folder: Path):
        self.folder = folder

    @classmethod
    def make(cls) -> PidsGroup | None:
        base = _pids_base()
        if base is None:
            return None
        folder = base / f"mhattn-grade-{os.getpid()}-{next(_names)}"
        try:
            folder.mkdir()
        except OSError:
            return None
        try:
            (folder / "pids.max").write_text(str(PIDS_MAX))
        except OSError:
            folder.rmdir()
            return None
        return cls(folder)

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` run by a shell that first moves itself into the group (children inherit it)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.folder / "cgroup.procs"), *cmd]

    def members(self) -> set[int]:
        try:
            return {int(p) for p in (self.folder / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            return set()

    def close(self) -> None:
        """Kill everything in the group, then remove it."""
        _wait_gone(_stop_and_kill(self.members))
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                self.folder.rmdir()
                return
            except OSError:  # busy until the last member is reaped
                time.sleep(0.01)


@functools.lru_cache(maxsize=1)
def _pids_base() -> Path | None:
    """This process's folder in a writable hierarchy with the ``pids`` controller (cgroup v1 or v2), or None."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        groups = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        head, _, tail = line.partition(" - ")
        fstype, options = tail.split()[0], tail.split()[-1] if tail.split() else ""
        point = Path(head.split()[4])
        for g in groups:
            hid, controllers, path = (g.split(":", 2) + ["", ""])[:3]
            v1 = fstype == "cgroup" and "pids" in options.split(",") and "pids" in controllers.split(",")
            v2 = fstype == "cgroup2" and hid == "0" and "pids" in _read(point / path.lstrip("/") / "cgroup.subtree_control")
            folder = point / path.lstrip("/")
            if (v1 or v2) and folder.is_dir() and os.access(folder, os.W_OK):
                return folder
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
