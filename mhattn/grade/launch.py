"""Start one worker, wait for its reply with a wall-clock limit, and kill everything it started.

The worker runs in its own session and process group with no stdin; its stdout and stderr go to
unlinked temporary files whose size the worker's ``RLIMIT_FSIZE`` caps (the grader reads only their
last few kB). The request comes on one file descriptor, the reply goes to an unlinked file, and a
pipe carries one byte saying the reply is complete. Then (or at the time limit) the grader stops and
kills the worker's whole process tree, found through ``/proc`` (children that left the session
included), and its process group. Nothing is waited on that a child could hold open.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

TAIL_BYTES = 4096


@dataclass(frozen=True)
class Limits:
    timeout: float  # wall-clock seconds
    memory: int  # bytes of address space (RLIMIT_AS); 0: none
    file_size: int = 16 << 20  # bytes per file written, stdout and stderr included (RLIMIT_FSIZE)

    @property
    def cpu(self) -> int:
        return int(self.timeout) + 1


@dataclass(frozen=True)
class Outcome:
    reply: bytes | None  # the worker's reply, None when it did not say it was complete
    timed_out: bool
    returncode: int | None
    stderr_tail: str


def worker_argv(request_fd: int, reply_fd: int, done_fd: int, limits: Limits) -> list[str]:
    return [str(request_fd), str(reply_fd), str(done_fd), str(limits.memory), str(limits.cpu), str(limits.file_size)]


def run(make_cmd, request: bytes, limits: Limits, env: dict, cwd: str) -> Outcome:
    """Run ``make_cmd(worker_argv)``; return its reply (bounded) and how it ended."""
    with tempfile.TemporaryFile() as req, tempfile.TemporaryFile() as reply, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:  # fmt: skip
        req.write(request)
        req.seek(0)
        done_r, done_w = os.pipe()
        fds = (req.fileno(), reply.fileno(), done_w)
        try:
            proc = subprocess.Popen(make_cmd(worker_argv(*fds, limits)), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    pass_fds=fds, cwd=cwd, env=env, start_new_session=True)  # fmt: skip
        finally:
            os.close(done_w)
        try:
            done, timed_out = _wait(proc, done_r, limits.timeout)
        finally:
            kill_tree(proc)
            os.close(done_r)
        reply.seek(0)
        data = reply.read(limits.file_size + 1) if done else None
        return Outcome(data, timed_out and not done, proc.returncode, _tail(err))


def _wait(proc, done_r: int, timeout: float) -> tuple[bool, bool]:
    """(reply complete, timed out), waiting on the done pipe and the process, never past ``timeout``."""
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(done_r, select.POLLIN)
    watching = True
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False, True
        if watching and poller.poll(int(min(left, 0.05) * 1000) + 1):
            if os.read(done_r, 1) == b"1":
                return True, False
            watching = False  # end of file, or not the byte a worker writes: only the process is watched now
        if proc.poll() is not None:
            return False, False
        if not watching:
            time.sleep(min(left, 0.02))


def _tail(f) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - TAIL_BYTES))
    return f.read(TAIL_BYTES).decode("utf-8", errors="replace")


def _children() -> dict[int, list[int]]:
    """``{parent pid: [child pids]}`` from /proc (empty where there is no /proc)."""
    tree: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return tree
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(proc) -> None:
    """Stop the worker and every descendant (until no new one appears), then kill them and its group."""
    stopped: set[int] = set()
    if proc.poll() is None:
        _signal([proc.pid], signal.SIGSTOP)
        stopped.add(proc.pid)
    for _ in range(8):
        new = _descendants(proc.pid) - stopped
        if not new:
            break
        _signal(new, signal.SIGSTOP)
        stopped |= new
    _signal(stopped, signal.SIGKILL)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    deadline = time.monotonic() + 2.0  # a killed process takes a moment to go
    while any(_running(p) for p in stopped) and time.monotonic() < deadline:
        time.sleep(0.005)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, only waiting to be reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False
