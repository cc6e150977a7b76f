"""Start one worker, wait for its reply with a wall-clock limit, and kill everything it started.

The worker runs in its own session and process group with no stdin (in a control group with a pids
limit where the grader can make one); its stdout and stderr go to unlinked temporary files whose size
the worker's ``RLIMIT_FSIZE`` caps (the grader reads only their last few kB). The request comes on one
file descriptor, the reply goes to an unlinked file, and a pipe carries one byte saying the reply is
complete. Then (or at the time limit) the grader kills the worker's whole process tree, its control
group, and the orphans it left (:mod:`mhattn.grade.reap`); nothing is waited on that a child could hold
open. Last, each call's inputs as the worker sent them back are compared with those sent
(:mod:`mhattn.grade.inplace`).
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass

from mhattn.grade import inplace, reap

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
    """Run ``make_cmd(worker_argv)``; return its reply (bounded, inputs compared) and how it ended."""
    reap.adopt_orphans()
    group = reap.PidsGroup.make()
    with tempfile.TemporaryFile() as req, tempfile.TemporaryFile() as reply, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:  # fmt: skip
        req.write(request)
        req.seek(0)
        done_r, done_w = os.pipe()
        fds = (req.fileno(), reply.fileno(), done_w)
        cmd = make_cmd(worker_argv(*fds, limits))
        try:
            with reap.LOCK:  # registered before an orphan sweep can see it
                proc = subprocess.Popen(group.wrap(cmd) if group else cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        pass_fds=fds, cwd=cwd, env=env, start_new_session=True)  # fmt: skip
                reap.WORKERS.add(proc.pid)
        except BaseException:
            group.close() if group else None
            raise
        finally:
            os.close(done_w)
        try:
            done, timed_out = _wait(proc, done_r, limits.timeout)
        finally:
            _end(proc, group)
            os.close(done_r)
        reply.seek(0)
        data = inplace.settle(request, reply.read(limits.file_size + 1)) if done else None
        return Outcome(data, timed_out and not done, proc.returncode, _tail(err))


def _end(proc, group) -> None:
    """Kill the worker's tree, its control group and the orphans it left; the worker is then no longer one."""
    reap.kill_tree(proc)
    if group:
        group.close()
    with reap.LOCK:
        reap.WORKERS.discard(proc.pid)
    reap.sweep_orphans()


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
        if proc.poll() is not None:  # it may have written the byte and exited since the poll above: look once more
            return watching and bool(poller.poll(0)) and os.read(done_r, 1) == b"1", False
        if not watching:
            time.sleep(min(left, 0.02))


def _tail(f) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - TAIL_BYTES))
    return f.read(TAIL_BYTES).decode("utf-8", errors="replace")
