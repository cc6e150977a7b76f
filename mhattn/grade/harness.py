"""What every exercise check shares: calls to make, judges of their results, one-line failures.

An exercise's checks never see the learner's code. They return a list of :class:`Call`: which
function of the learner's file to call, with which inputs, and a *judge* that the grader (the
trusted parent process) runs on the returned value. The judge holds the expected value; it raises
:class:`GradeFailure` with a one-line reason that names shapes, dtypes and errors, never values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mhattn.grade.worker import Opaque


class GradeFailure(Exception):
    """A check failed; the message is the one-line reason shown to the learner."""


QUALIFIED = "scores only together with the right values"  # a qualifier's reason starts so (verdict.qualify)


@dataclass(frozen=True)
class Call:
    """One call of the learner's ``fn(*args)``: ``judge(result)`` raises GradeFailure when it is wrong.

    With ``raises`` (an exception class name such as ``"ValueError"``) the call must raise that instead.
    ``check`` names the exercise's check (see ``spec.Exercise.checks``) this call counts for. A call whose
    result has parts scored apart (e.g. each gradient of a backward) gives ``parts``: ``((check, judge), ...)``
    in place of ``judge`` and ``check``. With ``probe`` the worker measures the call (its peak memory and first
    warning, :func:`mhattn.grade.probe.probed`) and each judge gets ``(value, {"peak", "warning"})``.
    ``memory_note`` replaces the usual advice (``--memory``) when the call runs out of memory (exercise 11's cap).
    A ``local`` call runs in the learner's visible tests only: the grader makes a hidden twin of it with inputs
    drawn from the seed (exercise 11's memory probes, whose fixed inputs a learner could answer in advance).
    """

    fn: str
    args: tuple
    judge: Callable | None = None
    raises: str | None = None
    what: str = ""
    check: str = ""
    parts: tuple = ()
    probe: bool = False
    memory_note: str = ""
    local: bool = False  # a visible call that a hidden one of other inputs replaces in the grader (run_visible only)

    def judged(self) -> tuple:
        """``((check, judge), ...)``: what this call's result is scored on (judge None: it must raise)."""
        return self.parts or ((self.check, self.judge),)


def checked(check: str, calls) -> list[Call]:
    """``calls`` (a list of :class:`Call`), each counting for ``check``."""
    return [dataclasses.replace(c, check=check) for c in calls]


def expect_raises(exc: str, fn: str, *args, what: str) -> Call:
    """The learner's ``fn(*args)`` must raise ``exc`` (e.g. ValueError for an impossible split)."""
    return Call(fn, args, raises=exc, what=what)


def type_name(got) -> str:
    return got.name if isinstance(got, Opaque) else type(got).__name__


def check_kind(what, got, expected):
    """``got`` must be a NumPy array of ``expected``'s shape and dtype (GradeFailure otherwise)."""
    if not isinstance(got, np.ndarray):
        raise GradeFailure(f"{what}: expected a NumPy array, got {type_name(got)}")
    if got.shape != expected.shape:
        raise GradeFailure(f"{what}: shape {got.shape}, expected {expected.shape}")
    if got.dtype != expected.dtype:
        raise GradeFailure(f"{what}: dtype {got.dtype}, expected {expected.dtype}")


def check_array(what, got, expected, atol, rtol=0.0, hint=None):
    """Compare ``got`` with the reference ``expected`` (a NumPy array) without revealing its values.

    ``hint(got)`` may name a likely fault when the values are wrong (it returns a string or None).

    Raises:
        GradeFailure: not an array, wrong shape, wrong dtype, NaN/inf, or max error above tolerance.
    """
    check_kind(what, got, expected)
    if not np.all(np.isfinite(got)):
        why = hint(got) if hint else None
        raise GradeFailure(f"{what}: contains NaN or inf" + (f"; {why}" if why else ""))
    err = float(np.max(np.abs(got.astype(np.float64) - expected), initial=0.0))
    tol = atol + rtol * float(np.max(np.abs(expected), initial=0.0))
    if err > tol:
        why = hint(got) if hint else None
        if why is None and _moved(got, expected, tol):
            why = "the values are right but in the wrong places (a missing transpose, or a wrong order?)"
        raise GradeFailure(f"{what}: max |error| vs reference {err:.2e} (tolerance {tol:.1e})" + (f"; {why}" if why else ""))


def check_neginf(what, got, expected, atol, rtol=0.0, hint=None):
    """As :func:`check_array`, for a reference that is ``-inf`` at some entries (a log of 0, e.g. an empty row's lse).

    ``got`` must be ``-inf`` exactly there; the other entries are compared as in :func:`check_array`.
    """
    check_kind(what, got, expected)
    empty = np.isneginf(expected)
    if np.any(np.isnan(got)) or not np.array_equal(np.isneginf(got), empty):
        why = hint(got) if hint and np.any(np.isnan(got)) else None
        said = "contains NaN" if np.any(np.isnan(got)) else f"-inf at {int(np.isneginf(got).sum())} entries"
        raise GradeFailure(f"{what}: {said}; it must be -inf exactly on the rows with no allowed key ({int(empty.sum())} here)"
                           + (f"; {why}" if why else ""))  # fmt: skip
    check_array(what, np.where(empty, 0, got).astype(got.dtype), np.where(empty, 0, expected), atol, rtol, hint)


def _moved(got, expected, tol) -> bool:
    """Whether ``got`` holds the expected values in other places (sorted values reveal nothing of the layout).

    Values merely a little off (e.g. a finite-difference gradient) are close in place too: not a layout fault.
    """
    close = {"rtol": 1e-6, "atol": max(tol, 1e-12)}
    if got.size < 2 or np.allclose(got, expected, **close):
        return False
    return bool(np.allclose(np.sort(got, axis=None), np.sort(expected, axis=None), **close))


def check_number(what, got, expected, rel=1e-9, exact_int=False):
    """Compare a scalar result; ints must be Python/NumPy ints when ``exact_int``."""
    if exact_int:
        if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, np.integer)):
            raise GradeFailure(f"{what}: expected an int, got {type_name(got)}")
        if int(got) != expected:
            raise GradeFailure(f"{what}: wrong count (off by {int(got) - expected:+d})")
        return
    if isinstance(got, (Opaque, str, bytes)) or (isinstance(got, np.ndarray) and got.size != 1):
        raise GradeFailure(f"{what}: expected a float, got {type_name(got)}")
    try:
        val = float(got)
    except (TypeError, ValueError, OverflowError):
        raise GradeFailure(f"{what}: expected a float, got {type_name(got)}") from None
    err = abs(val - expected)
    if not np.isfinite(val) or err > rel * max(1.0, abs(expected)):
        raise GradeFailure(f"{what}: |error| vs reference {err:.2e}")


def array(what, expected, atol, rtol=0.0, hint=None) -> Callable:
    """A judge: the result must be an array close to ``expected`` (see :func:`check_array`)."""
    return lambda got: check_array(what, got, expected, atol, rtol, hint)


def number(what, expected, rel=1e-9, exact_int=False) -> Callable:
    """A judge: the result must be a number close to (or, with ``exact_int``, equal to) ``expected``."""
    return lambda got: check_number(what, got, expected, rel, exact_int)


def tuple_of(what, n, names="") -> Callable:
    """A judge prefix: the result must be a tuple of ``n`` items."""

    def check(got):
        if not isinstance(got, tuple) or len(got) != n:
            raise GradeFailure(f"{what}: must return a tuple {names or f'of {n} items'}")

    return check


def pair(what, out, weights, atol, rtol=0.0, hint=None) -> Callable:
    """A judge for ``(out, weights)``: weights first, as the error in ``out`` follows from them."""

    def judge(got):
        tuple_of(what, 2, "(out, weights)")(got)
        check_array(f"{what}: weights", got[1], weights, atol, rtol, hint)
        check_array(f"{what}: out", got[0], out, atol, rtol)

    return judge


def tol_for(dtype):
    """Absolute tolerance for a result of this dtype."""
    return 1e-4 if np.dtype(dtype) == np.float32 else 1e-9


def one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line: newlines, tabs and other control characters escaped, at most ``limit`` characters."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))
    return out if len(out) <= limit else out[: limit - 3] + "..."
