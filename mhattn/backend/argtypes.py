"""Number options for every command line of mhattn (``mhattn``, ``python -m mhattn.grade``) and number arguments of
its Python API (:func:`as_integer`, :func:`as_real`): one check, one phrasing.

Standard library only and importing nothing from mhattn, so any layer (``nn``, ``training``, ``commands``, ``grade``)
may use it.
"""

from __future__ import annotations

import argparse
import math
import numbers


def range_text(low=None, high=None, *, low_open=False, high_open=False) -> str:
    """The range ``low .. high`` in words every option message uses: ``> 0``, ``>= 1``, ``in [0, 1)``, ``<= 5``."""
    lo = None if low is None or low == -math.inf else f"{low:g}"
    hi = None if high is None or high == math.inf else f"{high:g}"
    if lo is not None and hi is not None:
        return f"in {'(' if low_open else '['}{lo}, {hi}{')' if high_open else ']'}"
    if lo is not None:
        return f"{'>' if low_open else '>='} {lo}"
    return f"{'<' if high_open else '<='} {hi}" if hi is not None else "(any value)"


def number_in(kind, low=None, high=None, *, low_open=False, high_open=False):
    """argparse type: a finite ``kind`` (``int`` or ``float``) in the range; the one place option ranges are checked.

    Every failure, unparsable or out of range, reads the same: ``must be an integer >= 1, got 'six'`` or
    ``must be a finite number > 0, got -1``.
    """
    noun = "an integer" if kind is int else "a finite number"
    where = range_text(low, high, low_open=low_open, high_open=high_open)

    def parse(text: str):
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {noun} {where}, got {text!r}") from None
        below = low is not None and (x < low or (low_open and x == low))
        above = high is not None and (x > high or (high_open and x == high))
        if not math.isfinite(x) or below or above:
            raise argparse.ArgumentTypeError(f"must be {noun} {where}, got {text}")
        return x

    parse.__name__ = f"{noun.split()[-1]} {where}"  # argparse names the type in some messages
    parse.range_text = where  # marks the options checked here (tests/course/test_cli_errors.py looks for it)
    return parse


def as_integer(name: str, value, low=None) -> int:
    """``value`` as a Python ``int``: any ``numbers.Integral`` (``int``, ``np.int64``, ...) at least ``low``.

    Stored hyperparameters are plain Python numbers, so they print, compare and serialise (JSON) as ints.

    Raises:
        TypeError: a bool (True is no size), a float (even 4.0) or anything else not integral.
        ValueError: below ``low``.
    """
    noun = {None: "an integer", 1: "a positive integer", 0: "a non-negative integer"}.get(low, f"an integer >= {low}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {noun}, got {value!r} ({type(value).__name__})")
    if low is not None and value < low:
        raise ValueError(f"{name} must be {noun}, got {value!r}")
    return int(value)


def as_real(name: str, value, low=None, high=None, *, low_open=False, high_open=False) -> float:
    """``value`` as a Python ``float``: any finite ``numbers.Real`` (``float``, ``int``, ``np.float32``, ...) in range.

    Raises:
        TypeError: a bool or anything not real (a string, a complex number, an array).
        ValueError: not finite, or outside the range (phrased as :func:`range_text`: ``in [0, 1)``).
    """
    where = range_text(low, high, low_open=low_open, high_open=high_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number {where}, got {value!r} ({type(value).__name__})")
    x = float(value)
    below = low is not None and (x < low or (low_open and x == low))
    above = high is not None and (x > high or (high_open and x == high))
    if not math.isfinite(x) or below or above:
        raise ValueError(f"{name} must be a number {where}, got {value!r}")
    return x
