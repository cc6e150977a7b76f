"""What a worker may do: its limits and its imports (run inside the untrusted worker, sent as source text).

The worker (:mod:`mhattn.grade.worker`) cannot import this file: in the sandbox the grader's own files
are out of sight. The grader reads it once (:data:`SOURCE`, before any worker runs) and sends the text
in each request; the worker runs it as a module of its own and calls :func:`limit`, then
:func:`install_finder`. Like the worker, it imports nothing from ``mhattn.grade``.

Imports while grading: the standard library, the allowed packages (:mod:`mhattn.grade.imports`: numpy and
what mhattn requires), and mhattn below the grader, where each module the exercise may not run is served
as its stand-in (:mod:`mhattn.grade.routes`, :mod:`mhattn.grade.stubs`). The grader and the layers above
it (the class layer, the commands) are not importable. Without a sandbox a submission can undo this hook;
in the sandbox the stand-ins are also the files themselves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# read when the grader imports this, before any worker runs (in the worker, run from this text, there is no file)
SOURCE = Path(__file__).read_text(encoding="utf-8") if "__file__" in globals() else ""
REFUSED = ("grade", "classroom", "commands", "cli", "__main__")  # mhattn.<name>: the grader and what uses it
SPARE_TASKS = 64  # processes and threads a submission may add to those its user already has


def install_finder(sources: dict, allowed, stdlib: list | None = None) -> None:
    """Serve ``sources[name]`` (a raising stand-in) for hidden modules; refuse imports beyond ``allowed`` and the
    standard library: a name Python knows as one, or a module found in ``stdlib`` (the interpreter's own folders,
    e.g. ``sysconfig``'s ``_sysconfigdata_*``); refuse the grader and the layers above it."""
    import importlib.abc
    import importlib.machinery
    import importlib.util

    ok = {*allowed, *sys.stdlib_module_names, *sys.builtin_module_names}
    if stdlib is None:  # not started by the grader (-I -S): the path's folders that are not package folders
        stdlib = [d for d in sys.path if d and not d.rstrip("/").endswith(("site-packages", "dist-packages"))]
    refused = tuple(f"mhattn.{n}." for n in REFUSED)

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            top = name.partition(".")[0]
            known = top in ok or (path is None and importlib.machinery.PathFinder.find_spec(top, stdlib) is not None)
            if not known or f"{name}.".startswith(refused):  # torch, the grader: references too
                raise ModuleNotFoundError(f"{name} is not available while grading: use NumPy (and mhattn) only", name=name)
            return importlib.util.spec_from_loader(name, self, origin="hidden") if name in sources else None

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            exec(compile(sources[module.__name__], f"<hidden {module.__name__}>", "exec"), module.__dict__)

    sys.meta_path.insert(0, Finder())


def limit(memory: int, cpu: int, file_size: int) -> None:
    """Address space, CPU seconds, file size, processes; on Linux, adopt orphans (a double fork) so the grader finds
    them, and become non-dumpable (``PR_SET_DUMPABLE`` 0: its memory is nobody's to read through ``/proc`` or ptrace).

    ``RLIMIT_NPROC`` counts the user's tasks (in the sandbox, those of its user namespace), so it is set to the
    tasks this user has now plus :data:`SPARE_TASKS`. It does not bind root: the grader puts the worker in a
    control group with a pids limit where it can (:mod:`mhattn.grade.reap`).
    """
    import ctypes
    import ctypes.util
    import resource

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # 36: PR_SET_CHILD_SUBREAPER
        libc.prctl(4, 0, 0, 0, 0)  # 4: PR_SET_DUMPABLE 0: no process of another user's (or this one's) may trace it
    except (OSError, AttributeError, TypeError):  # not Linux: the grader kills the process group only
        pass
    tasks = _tasks() + SPARE_TASKS
    for kind, soft, hard in [(resource.RLIMIT_AS, memory, memory), (resource.RLIMIT_CPU, cpu, cpu + 1),
                             (resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_FSIZE, file_size, file_size),
                             (resource.RLIMIT_NPROC, tasks, tasks)]:  # fmt: skip
        try:
            resource.setrlimit(kind, (soft, hard))
        except (ValueError, OSError):  # e.g. RLIMIT_AS on macOS: that limit is then not there
            pass


def _tasks() -> int:
    """Threads of the processes of this real user id that /proc shows (0 where there is no /proc)."""
    total, uid = 0, os.getuid()
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit():  # "self" and "thread-self" are this process again
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            if int(fields[b"Uid"].split()[0]) == uid:
                total += int(fields[b"Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return total


def no_children() -> bool:
    """Lower ``RLIMIT_NPROC``, soft and hard, to the tasks this user has now: no new process or thread (a child's
    memory would be its own, beyond :func:`cap_memory`). Exact where this user runs nothing else: as root each
    worker is a user of its own (:mod:`mhattn.grade.pool`), and in the sandbox as a normal user the count is that
    of its user namespace. False where it cannot be set."""
    import resource

    try:
        tasks = _tasks()
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
    except (OSError, ValueError, AttributeError):
        return False
    return tasks > 0


def cap_memory(allowance: int) -> bool:
    """Lower the address-space limit, soft and hard, to what this process holds now plus ``allowance`` bytes.

    Called before the learner's file is loaded (exercise 11): an answer that keeps a full ``(..., T, S)`` score array
    then runs out of memory whatever allocator holds it (NumPy, ``mmap``, ``ctypes``), at import time too, and no code
    of the learner can raise a hard limit again (it does not run as root). NumPy's BLAS gets its work buffers first,
    so they count in "now". False where the size cannot be read (no ``/proc``) or the limit cannot be set.
    """
    import resource

    import numpy as np

    a = np.ones((256, 256))  # smaller products do not reach OpenBLAS's buffers
    float((a @ a)[0, 0] + (a @ a[0])[0])  # BLAS allocates its buffers on its first call: before the measure
    try:
        with open("/proc/self/statm", "rb") as f:
            now = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        cap = now + int(allowance) if hard == resource.RLIM_INFINITY else min(hard, now + int(allowance))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (OSError, ValueError, IndexError, AttributeError):
        return False
    return True


OUTPUT_LIMIT = 1 << 20  # bytes of a learner's printed output kept per stream; the file-size limit bounds the reply
TAIL = 4096  # the grader reads the last TAIL bytes of stderr (mhattn.grade.launch)


class CappedStream:
    """The worker's ``sys.stdout`` / ``sys.stderr``: printed output past :data:`OUTPUT_LIMIT` is cut, not an error.

    Without it a print past the worker's file-size limit raises (``EFBIG``) and fails the call. Past the limit the
    file is emptied and starts again with a line saying so and the end of the write, so the last lines stay (a
    traceback the grader reads). Output written straight to the file descriptor (``os.write(1, ...)``) is not cut.
    """

    def __init__(self, fd: int, limit: int = OUTPUT_LIMIT):
        self.fd, self.limit, self.size = fd, limit, 0
        self.encoding, self.errors = "utf-8", "backslashreplace"

    def write(self, text) -> int:
        if isinstance(text, str) and self.size + len(text) > self.limit:  # past the limit: only the end is encoded
            text_end = text[-TAIL:]
        else:
            text_end = text
        data = text_end if isinstance(text_end, (bytes, bytearray)) else str(text_end).encode(self.encoding, self.errors)
        if self.size + len(data) > self.limit or text_end is not text:
            data = b"[earlier printed output dropped: it is cut at %d MiB]\n" % (self.limit >> 20) + bytes(data[-TAIL:])
            try:
                os.ftruncate(self.fd, 0)
                os.lseek(self.fd, 0, os.SEEK_SET)
                self.size = 0
            except OSError:  # not a file (a pipe, a terminal): the rest is dropped
                self.size = self.limit
                return len(text)
        for start in range(0, len(data), 1 << 16):
            os.write(self.fd, data[start : start + (1 << 16)])
        self.size += len(data)
        return len(text)

    buffer = property(lambda self: self)  # sys.stdout.buffer.write(b"...") lands here too

    def flush(self):
        pass

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def cap_output() -> None:
    """Route ``print``, ``sys.stdout`` and ``sys.stderr`` (and ``__stdout__``, ``__stderr__``) through :class:`CappedStream`."""
    sys.stdout = sys.__stdout__ = CappedStream(1)
    sys.stderr = sys.__stderr__ = CappedStream(2)
