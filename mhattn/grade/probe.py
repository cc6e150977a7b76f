"""What a probed call measures (exercise 11): the memory it held at its peak, and its first floating-point warning.

Run inside the untrusted worker, sent as source text as :mod:`mhattn.grade.guard` is: the worker
(:mod:`mhattn.grade.worker`) cannot import this file, as in the sandbox the grader's own files are out of sight.
The grader reads it once (:data:`SOURCE`, before any worker runs) and sends the text in each request; the
worker runs it as a module of its own. Like the worker, it imports nothing from ``mhattn.grade``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# read when the grader imports this, before any worker runs (in the worker, run from this text, there is no file)
SOURCE = Path(__file__).read_text(encoding="utf-8") if "__file__" in globals() else ""

# NumPy's warning for a floating-point fault, and for a flag that a (BLAS) matrix product left set
FLOAT_FAULTS = r"(divide by zero|overflow|invalid value) encountered in "  # underflow is ignored (errstate below)
PRODUCT_FLAGS = r".* encountered in (matmul|dot|vecdot|matvec|vecmat)$"  # np.inner and np.tensordot report "dot"


def probed(fn, args, path: str, watch) -> tuple:
    """``(fn(*args), {"peak": bytes, "warning": text})`` for a call the request marks ``probe`` (exercise 11).

    ``peak``: the most memory the call held at once beyond what it was given (``tracemalloc``; NumPy reports
    its arrays to it). ``warning``: the call's first floating-point warning from NumPy (:data:`FLOAT_FAULTS`:
    divide, overflow, invalid), ``""`` if none; those warn here instead of being silenced as in every other call.
    Two kinds do not count, as a correct solution can meet them: any other warning (a learner's own, one a
    finalizer gives when the collector runs during the call), and the flags a matrix product leaves
    (:data:`PRODUCT_FLAGS`; some OpenBLAS kernels set ``invalid`` on finite inputs at random: numpy#24067,
    OpenMathLib/OpenBLAS#1924). A learner's own fault (``-inf - -inf``, ``0/0``, ``log(0)``) still warns in the
    subtract, divide or log that makes it. (A correct solution once lost this point in CI.) Silencing such a
    warning (``np.errstate``, ``np.seterr``, the warning filters) is reported as a warning too
    (``watch``, a :class:`QuietWatch`).
    """
    import tracemalloc
    import warnings

    import numpy as np

    watch.untouched()  # the warnings module and numpy's error handling as before the file was loaded
    with warnings.catch_warnings(record=True) as seen, np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
        warnings.simplefilter("ignore")  # only NumPy's floating-point warnings count (not one a finalizer gives)
        warnings.filterwarnings("always", FLOAT_FAULTS, RuntimeWarning)
        warnings.filterwarnings("ignore", PRODUCT_FLAGS, RuntimeWarning)
        tracing = tracemalloc.is_tracing()  # already (python -X tracemalloc): measure from here, leave it on
        if not tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        try:
            with watch:
                value = fn(*args)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            if not tracing:
                tracemalloc.stop()
    first = seen[0] if seen else None
    where = f" ({os.path.basename(path)} line {first.lineno})" if first and first.filename == path else ""
    text = f"{first.category.__name__}: {str(first.message)[:200]}{where}" if first else ""
    text = f"silenced floating-point warnings: {watch.found}" if watch.found else text
    return value, {"peak": int(peak), "warning": text}


WARNINGS_STATE = ("showwarning", "_showwarnmsg", "_showwarnmsg_impl", "formatwarning", "_formatwarnmsg",
                  "_formatwarnmsg_impl", "warn", "warn_explicit", "catch_warnings", "simplefilter", "filterwarnings",
                  "defaultaction")  # fmt: skip
NUMPY_STATE = ("errstate", "seterr", "geterr", "seterrcall", "geterrcall")
PASS_THROUGH = ("warnings", "threading", "numpy._core._ufunc_config", "contextlib")  # asked on behalf of their caller


class Pristine:
    """What the worker holds before it loads the learner's file: the warnings module's whole state (its filters and
    every hook a warning passes through), numpy's error-handling functions, and the code objects of numpy and
    mhattn, by identity: code compiled later under numpy's file name, or run in numpy's namespace, is not among
    them."""

    def __init__(self):
        import warnings

        import numpy as np

        self.warnings, self.np = warnings, np
        self.state = self.now()
        self.trusted = _codes(n for n in list(sys.modules) if n.split(".")[0] in ("numpy", "mhattn"))
        self.passing = _codes(PASS_THROUGH)

    def now(self) -> tuple:
        w, np = self.warnings, self.np
        return (sys.modules.get("warnings"), w.filters, list(w.filters), *(getattr(w, a, None) for a in WARNINGS_STATE),
                *(getattr(np, a) for a in NUMPY_STATE))  # fmt: skip


def _codes(names) -> set:
    """Every code object of the functions, methods and nested functions of the modules ``names`` (loaded now)."""
    import types

    found, todo = set(), []
    for name in names:
        module = sys.modules.get(name)
        for value in list(vars(module).values()) if module is not None else []:
            for item in [value, *(vars(value).values() if isinstance(value, type) else ())]:
                for attr in ("__func__", "fget", "_implementation", "__wrapped__"):  # methods, properties, dispatchers
                    item = getattr(item, attr, item)
                if isinstance(item, types.FunctionType) and item.__module__ == name:
                    todo.append(item.__code__)
    while todo:
        code = todo.pop()
        if code not in found:
            found.add(code)
            todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


class QuietWatch:
    """Whether a probed call (exercise 11) silences floating-point warnings; ``found`` says how, ``""`` if not.

    Before the call, the warnings module's whole state and numpy's error-handling functions must be those of
    :class:`Pristine` (a hook replaced at import time, such as ``warnings._showwarnmsg``, counts). While the call
    runs, a profile function (``sys.setprofile``) sees every call it makes: numpy's error state set
    (``np.errstate``, ``np.seterr``: both set numpy's context variable), the warning filters changed
    (``warnings.catch_warnings``, ``filterwarnings``, ``simplefilter``, the filter list itself), the profile
    function replaced, or a thread started (the watch would not follow it). Each counts only when the code asking for
    it is numpy's or mhattn's own by identity (its code object was loaded before the learner's file: ``np.isclose``
    silences its own steps), whatever file name a frame claims. After the call numpy's error state and the warning
    filters must be as before. A submission that rewrites this process's code can hide from any such watch; the
    grader also reads the file's text (:func:`mhattn.grade.scan.silencing`).
    """

    WARNINGS = ("filterwarnings", "simplefilter", "resetwarnings", "_add_filter", "__enter__")

    def __init__(self, pristine: Pristine | None = None):
        import threading

        self.pristine = pristine or Pristine()
        self.found, self.warnings, self.np = "", self.pristine.warnings, self.pristine.np
        self.var = getattr(self.np._core.umath, "_extobj_contextvar", None)
        fences = (sys.setprofile, sys.settrace, *(getattr(threading, n, None) for n in ("_start_new_thread",
                  "_start_joinable_thread")))  # fmt: skip
        self.fences = tuple(f for f in fences if f is not None)
        self.own = {f.__code__ for f in (QuietWatch.__exit__, QuietWatch.__enter__, QuietWatch.untouched)}

    def untouched(self) -> None:
        if not self.found and self.pristine.now() != self.pristine.state:
            self.found = "the warnings module or numpy's error handling was changed before the call"

    def _state(self):
        return (list(self.warnings.filters), self.warnings.showwarning, self.np.geterr(), self.np.geterrcall())

    def __enter__(self):
        self.before, self.outer = self._state(), sys.getprofile()  # outer: a profiler running the visible tests
        sys.setprofile(self._event)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self.outer)
        if not self.found and self._state() != self.before:
            self.found = "numpy's error state or the warning filters changed during the call"
        return False

    def _event(self, frame, event, arg):
        if self.found:
            return
        what = None
        if event == "call" and frame.f_code in self.pristine.passing and frame.f_code.co_name in self.WARNINGS:
            what, frame = f"warnings.{frame.f_code.co_name}", frame.f_back
        elif event == "c_call":
            owner = getattr(arg, "__self__", None)
            if owner is self.var and getattr(arg, "__name__", "") == "set":
                what = "np.errstate or np.seterr"
            elif owner is self.warnings.filters or any(arg is f for f in self.fences):
                what = getattr(arg, "__qualname__", "a call that hides warnings from the grader")
        if what and not self._ours(frame):
            self.found = f"the call uses {what}"

    def _ours(self, frame) -> bool:
        """Whether the code that asked (the first frame outside numpy's error state, warnings, threading) is numpy's or
        mhattn's own: its code object was loaded before the learner's file (:class:`Pristine`)."""
        while frame is not None and frame.f_code in self.pristine.passing:
            frame = frame.f_back
        return frame is None or frame.f_code in self.own or frame.f_code in self.pristine.trusted
