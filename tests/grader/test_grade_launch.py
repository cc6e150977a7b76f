"""The grader's wait on a worker: a reply completed just before the worker exits is never lost."""

from __future__ import annotations

import os
import time

from mhattn.grade.launch import Limits, _wait


class _ExitsAfterWriting:
    """A stand-in worker: the first ``poll()`` finds it gone, but only after it wrote the done byte, as a real worker
    can between the grader's poll of the pipe and its look at the process (seen under load in CI)."""

    def __init__(self, done_w: int, byte: bytes):
        self.done_w, self.byte, self.returncode, self.pid = done_w, byte, None, -1  # no process: no CPU time

    def poll(self):
        if self.returncode is None:
            os.write(self.done_w, self.byte)
            self.returncode = 0
        return self.returncode


def _run(byte: bytes):
    done_r, done_w = os.pipe()
    try:
        t0 = time.monotonic()
        done, clock = _wait(_ExitsAfterWriting(done_w, byte), done_r, Limits(5.0, 0))
        return (done, bool(clock)), time.monotonic() - t0
    finally:
        os.close(done_r)
        os.close(done_w)


def test_done_byte_written_just_before_exit_counts_as_a_complete_reply():
    (done, timed_out), took = _run(b"1")
    assert done and not timed_out and took < 1.0


def test_another_byte_before_exit_is_not_a_complete_reply():
    (done, timed_out), _ = _run(b"0")
    assert not done and not timed_out
