"""What every exercise check shares: one-line failures, array comparisons, and the sandbox.

The sandbox calls a learner's function on copies of the grader's arrays, then says
whether the function changed them in place or called mhattn's own reference for the
exercise (a *tripwire* around each banned function records such calls).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys

import numpy as np


class GradeFailure(Exception):
    """A check failed; the message is the one-line reason shown to the learner."""


def check_array(what, got, expected, atol, rtol=0.0):
    """Compare ``got`` with the reference ``expected`` (a NumPy array) without revealing its values.

    Raises:
        GradeFailure: not an array, wrong shape, wrong dtype, NaN/inf, or max error above tolerance.
    """
    if not isinstance(got, np.ndarray):
        raise GradeFailure(f"{what}: expected a NumPy array, got {type(got).__name__}")
    if got.shape != expected.shape:
        raise GradeFailure(f"{what}: shape {got.shape}, expected {expected.shape}")
    if got.dtype != expected.dtype:
        raise GradeFailure(f"{what}: dtype {got.dtype}, expected {expected.dtype}")
    if not np.all(np.isfinite(got)):
        raise GradeFailure(f"{what}: contains NaN or inf")
    err = float(np.max(np.abs(got.astype(np.float64) - expected), initial=0.0))
    tol = atol + rtol * float(np.max(np.abs(expected), initial=0.0))
    if err > tol:
        # sorted values reveal nothing of the layout, and tell a permutation from a wrong formula
        moved = np.allclose(np.sort(got, axis=None), np.sort(expected, axis=None), rtol=1e-6, atol=max(tol, 1e-12))
        hint = "; the values are right but in the wrong places (a missing transpose, or a wrong order?)" if moved else ""
        raise GradeFailure(f"{what}: max |error| vs reference {err:.2e} (tolerance {tol:.1e}){hint}")


def check_number(what, got, expected, rel=1e-9, exact_int=False):
    """Compare a scalar result; ints must be Python/NumPy ints when ``exact_int``."""
    if exact_int:
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            raise GradeFailure(f"{what}: expected an int, got {type(got).__name__}")
        if int(got) != expected:
            raise GradeFailure(f"{what}: wrong count (off by {int(got) - expected:+d})")
        return
    try:
        val = float(got)
    except (TypeError, ValueError):
        raise GradeFailure(f"{what}: expected a float, got {type(got).__name__}") from None
    err = abs(val - expected)
    if not np.isfinite(val) or err > rel * max(1.0, abs(expected)):
        raise GradeFailure(f"{what}: |error| vs reference {err:.2e}")


def tol_for(dtype):
    """Absolute tolerance for a result of this dtype."""
    return 1e-4 if np.dtype(dtype) == np.float32 else 1e-9


class Sandbox:
    """Runs learner functions: copies inputs, detects in-place changes and reference calls."""

    def __init__(self):
        self.active = False
        self.tripped: list[str] = []

    def call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` on copies; raise GradeFailure if it mutated them or used a reference."""
        name = getattr(fn, "__name__", "function")
        args = tuple(_copy(a) for a in args)
        kwargs = {k: _copy(v) for k, v in kwargs.items()}
        pristine = [(label, value, _copy(value)) for label, value in _labelled(fn, args, kwargs)]
        self.active, self.tripped = True, []
        try:
            result = fn(*args, **kwargs)
        finally:
            self.active = False
        if self.tripped:
            raise GradeFailure(
                f"{name} calls mhattn's own {self.tripped[0]}, the reference for this exercise: write this step yourself"
            )
        for label, value, before in pristine:
            if not _same(value, before):
                raise GradeFailure(f"{name} modified its input {label} in place (inputs must be left unchanged)")
        return result


def _copy(x):
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    return x


def _same(a, b):
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return True


def _labelled(fn, args, kwargs):
    """(name, value) for every argument, named after the learner's parameters where possible."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        return list(bound.arguments.items())
    except (TypeError, ValueError):
        return [(f"argument {i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def install_tripwires(paths, sandbox: Sandbox):
    """Wrap each banned ``"module:attr"`` / ``"module:Class.method"`` so calls from learner code are recorded.

    Every mhattn module that holds the original object gets the wrapper, so re-exports
    (``mhattn.functional.X``) and internal uses (``mhattn.nn`` calling ``mhattn.functional``) are covered.
    """
    for path in paths:
        modname, attr = path.split(":")
        mod = importlib.import_module(modname)
        label = attr.split(".")[-1] if "." in attr else attr
        if "." in attr:
            cls_name, meth = attr.split(".")
            cls = getattr(mod, cls_name)
            setattr(cls, meth, _wrap(getattr(cls, meth), label, sandbox))
            continue
        original = getattr(mod, attr)
        wrapper = _wrap(original, label, sandbox)
        for m in list(sys.modules.values()):
            name = getattr(m, "__name__", "")
            if name.startswith("mhattn") and not name.startswith("mhattn.grade"):
                for key, value in list(vars(m).items()):
                    if value is original:
                        setattr(m, key, wrapper)


def _wrap(original, label, sandbox):
    @functools.wraps(original)
    def tripwire(*args, **kwargs):
        if sandbox.active:
            sandbox.tripped.append(label)
        return original(*args, **kwargs)

    return tripwire


def expect_raises(sandbox, exc, fn, *args, what=""):
    """The learner's ``fn(*args)`` must raise ``exc`` (e.g. ValueError for an impossible split)."""
    try:
        sandbox.call(fn, *args)
    except exc:
        return
    except (GradeFailure, NotImplementedError):
        raise
    except Exception as err:  # noqa: BLE001 - any other exception is the learner's bug
        raise GradeFailure(f"{what}: raised {type(err).__name__}, expected {exc.__name__}") from None
    raise GradeFailure(f"{what}: no {exc.__name__} raised")
