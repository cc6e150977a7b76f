"""float16 modules: parameters and results in float16, every step computed in float32.

A float16 softmax over a long row loses most of its digits, and NumPy has no fast float16 GEMM, so a float16
:class:`~mhattn.nn.attention.MultiHeadAttention` widens its float16 arrays to float32 on the way in, runs the
float32 steps (the engine's too) and rounds what it hands back (output, weights, gradients) to float16 once, as
torch's autocast does on a CPU. The results are then the float32 results rounded: within float16's half-ulp
(``2**-11`` relative) of them, plus float32's rounding (``tests/lib/test_half.py`` states the tolerance).
Bool masks pass through; float masks are widened like the rest.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import array_namespace

HALF = "float16"  # the one half-precision dtype every backend has (NumPy has no bfloat16)


def dtype_name(dtype) -> str:
    """``float32`` for NumPy's, torch's (``torch.float32``) or array-api-strict's float32 alike."""
    return str(dtype).rsplit(".", 1)[-1]


def module_dtype(dtype) -> np.dtype:
    """The NumPy dtype of a module made with ``dtype`` (a name or a NumPy dtype).

    Raises:
        ValueError: anything but float16, float32 or float64 (bfloat16 included: NumPy has none).
    """
    try:
        dt = np.dtype(dtype)
    except TypeError:  # bfloat16 and other names NumPy lacks
        dt = None
    if dt not in (np.float16, np.float32, np.float64):
        raise ValueError(f"dtype must be float16, float32 or float64 (no bfloat16: NumPy has none), got {dtype!r}")
    return dt


def widen(dtype, named):
    """``named`` (name -> array or None) with each float16 array as float32 (one cast per distinct array, so an
    input passed twice stays one array); other arrays as they are.

    Raises:
        TypeError: a float array (not a mask) whose dtype is not the module's ``dtype``.
    """
    out, done = {}, {}
    for name, a in named.items():
        if a is None or not hasattr(a, "dtype"):
            out[name] = a  # the steps' checks refuse what is no array
            continue
        if id(a) not in done:
            kind = dtype_name(a.dtype)
            if kind.startswith("float") and kind != HALF and not name.endswith("mask"):
                raise TypeError(f"{name} has dtype {kind} but the module is {dtype}; cast one of them")
            done[id(a)] = array_namespace(a).astype(a, array_namespace(a).float32) if kind == HALF else a
        out[name] = done[id(a)]
    return out


def narrow(a):
    """A float32 result rounded to float16 (``None`` stays ``None``)."""
    if a is None:
        return None
    xp = array_namespace(a)
    return xp.astype(a, xp.float16)
