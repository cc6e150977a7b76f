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
    """Address space, CPU seconds, file size, processes; on Linux, adopt orphans (a double fork) so the grader finds them.

    ``RLIMIT_NPROC`` counts the user's tasks (in the sandbox, those of its user namespace), so it is set to the
    tasks this user has now plus :data:`SPARE_TASKS`. It does not bind root: the grader puts the worker in a
    control group with a pids limit where it can (:mod:`mhattn.grade.reap`).
    """
    import ctypes
    import ctypes.util
    import resource

    try:
        ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl(36, 1, 0, 0, 0)  # 36: PR_SET_CHILD_SUBREAPER
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
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            if int(fields[b"Uid"].split()[0]) == uid:
                total += int(fields[b"Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return total
