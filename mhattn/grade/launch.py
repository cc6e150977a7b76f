"""Start one worker, wait for its reply within its time limit, and kill everything it started.

The time limit counts the CPU time of the worker's whole process tree (:func:`mhattn.grade.reap.tree_cpu`), its
own work: a classmate's load, which slows the clock on the wall, does not use it up. A wall-clock limit of
:data:`WALL_FACTOR` times as long (and :data:`WALL_SLACK` seconds) stops a worker that waits on nothing, or that
others starve. Workers run side by side (:data:`TURNS`); one that ran out of wall-clock time while another ran
beside it is run again alone (:func:`mhattn.grade.runner.run_one`) before the time-out costs points. One that used
up its CPU time is not: that time is its own work, whoever ran beside it.

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

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

from mhattn.grade import inplace, reap

TAIL_BYTES = 4096
WALL_FACTOR, WALL_SLACK = 2.0, 5.0  # the wall-clock limit: twice the CPU time allowed, and 5 s


@dataclass(frozen=True)
class Limits:
    timeout: float  # CPU seconds of the worker's process tree
    memory: int  # bytes of address space (RLIMIT_AS); 0: none
    file_size: int = 16 << 20  # bytes per file written, stdout and stderr included (RLIMIT_FSIZE)

    @property
    def cpu(self) -> int:
        return int(self.timeout) + 1

    @property
    def wall(self) -> float:
        return self.timeout * WALL_FACTOR + WALL_SLACK


@dataclass(frozen=True)
class Outcome:
    reply: bytes | None  # the worker's reply, None when it did not say it was complete
    timed_out: bool
    returncode: int | None
    stderr_tail: str
    clock: str = ""  # what ran out: "cpu" (its tree's CPU time, or its own RLIMIT_CPU), "wall", or ""
    crowded: bool = False  # another worker ran beside it at some time


class Turn:
    """One worker's run: whether another worker ran beside it at some time."""

    crowded = False


class Turns:
    """Workers run side by side (:meth:`beside`) or one alone (:meth:`alone`: it waits for those running, and new
    ones wait for it)."""

    def __init__(self):
        self.cond, self.running, self.solo, self.queued = threading.Condition(), set(), False, 0

    @contextlib.contextmanager
    def beside(self):
        with self.cond:
            self.cond.wait_for(lambda: not self.solo and not self.queued)
            turn = Turn()
            turn.crowded = bool(self.running)
            for other in self.running:
                other.crowded = True
            self.running.add(turn)
        try:
            yield turn
        finally:
            with self.cond:
                self.running.discard(turn)
                self.cond.notify_all()

    @contextlib.contextmanager
    def alone(self):
        with self.cond:
            self.queued += 1
            self.cond.wait_for(lambda: not self.running and not self.solo)
            self.queued -= 1
            self.solo = True
        try:
            yield Turn()
        finally:
            with self.cond:
                self.solo = False
                self.cond.notify_all()


TURNS = Turns()  # every worker of this process


def worker_argv(request_fd: int, reply_fd: int, done_fd: int, limits: Limits) -> list[str]:
    return [str(request_fd), str(reply_fd), str(done_fd), str(limits.memory), str(limits.cpu), str(limits.file_size)]


def run(make_cmd, request: bytes, limits: Limits, env: dict, cwd: str, alone: bool = False) -> Outcome:
    """Run ``make_cmd(worker_argv)`` beside other workers (or ``alone``); its reply (bounded, inputs compared) and
    how it ended."""
    with TURNS.alone() if alone else TURNS.beside() as turn:
        outcome = _run(make_cmd, request, limits, env, cwd)
    return Outcome(*outcome, crowded=turn.crowded)


def _run(make_cmd, request: bytes, limits: Limits, env: dict, cwd: str) -> tuple:
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
            done, clock = _wait(proc, done_r, limits)
        finally:
            _end(proc, group)
            os.close(done_r)
        reply.seek(0)
        data = inplace.settle(request, reply.read(limits.file_size + 1)) if done else None
        clock = clock or ("cpu" if not done and proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL) else "")
        return data, bool(clock) and not done, proc.returncode, _tail(err), clock


def _end(proc, group) -> None:
    """Kill the worker's tree, its control group and the orphans it left; the worker is then no longer one."""
    reap.kill_tree(proc)
    if group:
        group.close()
    with reap.LOCK:
        reap.WORKERS.discard(proc.pid)
    reap.sweep_orphans()


def _wait(proc, done_r: int, limits: Limits) -> tuple[bool, str]:
    """``(reply complete, what ran out: "cpu", "wall" or "")``, waiting on the done pipe and the process while its
    tree's CPU time stays within ``limits.timeout`` and the wall clock within ``limits.wall``."""
    deadline = time.monotonic() + limits.wall
    poller = select.poll()
    poller.register(done_r, select.POLLIN)
    watching, measured = True, 0.0
    while True:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            return False, "wall"
        if now - measured >= 0.1:  # reading /proc for the tree costs a little: ten times a second
            measured = now
            if reap.tree_cpu(proc.pid) > limits.timeout:
                return False, "cpu"
        if watching and poller.poll(int(min(left, 0.05) * 1000) + 1):
            if os.read(done_r, 1) == b"1":
                return True, ""
            watching = False  # end of file, or not the byte a worker writes: only the process is watched now
        if proc.poll() is not None:  # it may have written the byte and exited since the poll above: look once more
            return watching and bool(poller.poll(0)) and os.read(done_r, 1) == b"1", ""
        if not watching:
            time.sleep(min(left, 0.02))


def _tail(f) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - TAIL_BYTES))
    return f.read(TAIL_BYTES).decode("utf-8", errors="replace")
