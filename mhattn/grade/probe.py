"""What a probed call measures (exercise 11): the memory it held at its peak, and its first floating-point warning.

Run inside the untrusted worker, sent as source text as :mod:`mhattn.grade.guard` is: the worker
(:mod:`mhattn.grade.worker`) cannot import this file, as in the sandbox the grader's own files are out of sight.
The grader reads it once (:data:`SOURCE`, before any worker runs) and sends the text in each request; the
worker runs it as a module of its own. Like the worker, it imports nothing from ``mhattn.grade``.
"""

from __future__ import annotations

import os
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
    (``watch``, a :class:`mhattn.grade.guard.QuietWatch`).
    """
    import tracemalloc
    import warnings

    import numpy as np

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
