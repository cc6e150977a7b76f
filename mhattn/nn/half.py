"""Low-precision modules (float16, bfloat16): parameters and results in that dtype, every step computed in float32.

A float16 softmax over a long row loses most of its digits, and NumPy has no fast float16 GEMM, so a float16
:class:`~mhattn.nn.attention.MultiHeadAttention` widens its float16 arrays to float32 on the way in, runs the
float32 steps (the engine's too) and rounds what it hands back (output, weights, gradients) to float16 once, as
torch's autocast does on a CPU. The results are then the float32 results rounded: within float16's half-ulp
(``2**-11`` relative) of them, plus float32's rounding (``tests/lib/test_half.py`` states the tolerance).
bfloat16 (8 bits of mantissa: half-ulp ``2**-9``) works the same way where the array library has it (torch);
NumPy has none, so its host copies (initialisation, state dicts) are float32, which holds every bfloat16 exactly.
Bool masks pass through; float masks are widened like the rest.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import array_namespace, asarray, current_array_module, get_backend

BFLOAT16 = "bfloat16"  # the module's dtype is this name (NumPy has no such dtype), else a NumPy dtype


def dtype_name(dtype) -> str:
    """``float32`` for NumPy's, torch's (``torch.float32``) or array-api-strict's float32 alike."""
    return str(dtype).rsplit(".", 1)[-1]


def module_dtype(dtype):
    """The dtype of a module made with ``dtype`` (a name, a NumPy dtype, or ``torch.bfloat16``): a NumPy dtype, or
    the name ``"bfloat16"`` when the current backend has that dtype (torch).

    Raises:
        ValueError: anything but float16, float32, float64 or bfloat16; bfloat16 on a backend without it.
    """
    if dtype_name(dtype) == BFLOAT16:
        if getattr(current_array_module(), BFLOAT16, None) is None:
            raise ValueError(f"dtype bfloat16 needs a backend that has it (torch); {get_backend()} has none")
        return BFLOAT16
    try:
        dt = np.dtype(dtype)
    except TypeError:  # names NumPy lacks
        dt = None
    if dt not in (np.float16, np.float32, np.float64):
        raise ValueError(f"dtype must be float16, float32, float64 or (on torch) bfloat16, got {dtype!r}")
    return dt


def is_low(dtype) -> bool:
    """Whether a module of ``dtype`` (from :func:`module_dtype`) computes in float32: float16 and bfloat16."""
    return type(dtype) is str or dtype == np.float16  # bfloat16 is the one dtype held by its name


def host_dtype_for(dtype):
    """The NumPy dtype of a module's host copies: float32 for bfloat16 (exact), else the module's dtype."""
    return np.dtype(np.float32) if type(dtype) is str else dtype


def on_backend(host: dict, dtype) -> dict:
    """Host parameters on the current backend and device, in the module's ``dtype``."""
    target = getattr(current_array_module(), BFLOAT16) if type(dtype) is str else None
    return {name: asarray(p, dtype=target) for name, p in host.items()}


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
            kind, low = dtype_name(a.dtype), dtype_name(dtype)
            if "float" in kind and kind != low and not name.endswith("mask"):
                raise TypeError(f"{name} has dtype {kind} but the module is {low}; cast one of them")
            done[id(a)] = array_namespace(a).astype(a, array_namespace(a).float32) if kind == low else a
        out[name] = done[id(a)]
    return out


def narrow(a, dtype):
    """A float32 result rounded to the module's ``dtype`` (``None`` stays ``None``)."""
    if a is None:
        return None
    xp = array_namespace(a)
    return xp.astype(a, getattr(xp, dtype_name(dtype)))


def low_backward(backward, dtype, dout, cache):
    """A float32 ``backward`` pair's gradients for a module of low-precision ``dtype``: ``dout`` widened, every
    gradient (inputs, parameters, head mask) rounded once to ``dtype``."""
    dquery, dkey, dvalue, grads, dhead_mask = backward(widen(dtype, {"dout": dout})["dout"], cache)
    grads = {name: narrow(g, dtype) for name, g in grads.items()}
    return (*(narrow(d, dtype) for d in (dquery, dkey, dvalue)), grads, narrow(dhead_mask, dtype))
