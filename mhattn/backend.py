"""NumPy/CuPy switch.

Ops never pick an array library themselves: they ask their inputs
(``xp = get_array_module(x)``, CuPy's CPU/GPU-agnostic pattern). The
*current backend* only decides where new arrays go: parameters, data made by
:func:`asarray`. Choose it with :func:`set_backend`, :func:`use_backend` or the
``MHATTN_BACKEND`` environment variable (read once, at import).

This is the one module of mhattn that imports NumPy for the functional code.
"""

from __future__ import annotations

import contextlib
import os
import sys
from types import ModuleType

import numpy as np

BACKENDS = ("numpy", "cupy")
_current = "numpy"


def _cupy() -> ModuleType:
    """Import CuPy and check that a CUDA device is there.

    Raises:
        ImportError: CuPy is not installed (install the ``gpu`` extra).
        RuntimeError: CuPy is installed but ``cupy.is_available()`` is False.
    """
    try:
        import cupy
    except ImportError as err:
        raise ImportError(
            "the 'cupy' backend needs CuPy, which is not installed; "
            "install it with: pip install 'mhattn[gpu]' (CUDA 12) "
            "or pip install cupy-cuda13x (CUDA 13)"
        ) from err
    if not cupy.is_available():
        raise RuntimeError(
            "CuPy is installed but found no usable CUDA device "
            "(cupy.is_available() is False); use the 'numpy' backend on this machine"
        )
    return cupy


def set_backend(name: str) -> None:
    """Make ``name`` ("numpy" or "cupy") the backend new arrays are placed on.

    Raises:
        ValueError: ``name`` is not one of ``BACKENDS``.
        ImportError / RuntimeError: see :func:`_cupy` (for "cupy" only).
    """
    global _current
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    name = key
    if name == "cupy":
        _cupy()
    _current = name


def get_backend() -> str:
    """The name of the current backend: "numpy" or "cupy"."""
    return _current


@contextlib.contextmanager
def use_backend(name: str):
    """Context manager: switch to backend ``name``, restore the previous one on exit."""
    previous = _current
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)


def current_array_module() -> ModuleType:
    """The array module (``numpy`` or ``cupy``) of the current backend, where new arrays go."""
    return _cupy() if _current == "cupy" else np


def _is_cupy(a) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


def get_array_module(*arrays) -> ModuleType:
    """The array module the arrays live in; ``None`` and Python scalars are ignored.

    Raises:
        TypeError: NumPy and CuPy arrays are mixed in one call.
    """
    kinds = {type(a).__module__.split(".")[0] for a in arrays if hasattr(a, "shape")}
    if kinds == {"numpy", "cupy"}:
        raise TypeError(
            "NumPy and CuPy arrays are mixed in one call: move them to one device "
            "with mhattn.asarray (current backend) or mhattn.to_numpy (host)"
        )
    # a CuPy array exists, so CuPy is imported and has a device: no need to ask again
    return sys.modules["cupy"] if "cupy" in kinds else np


def read_only(a):
    """``a`` as an array its receiver cannot write into: a read-only view on NumPy, a copy on CuPy.

    CuPy arrays have no write-protection flag, so there the only safe hand-out is a copy.
    Forwards use it for arrays they also keep in their cache.
    """
    if _is_cupy(a):
        return a.copy()
    view = a.view()
    view.flags.writeable = False
    return view


def broadcast_shape(*shapes) -> tuple:
    """The shape that arrays of ``shapes`` broadcast to together (shape arithmetic, no device).

    Raises:
        ValueError: the shapes do not broadcast together.
    """
    return tuple(np.broadcast_shapes(*shapes))


def broadcasts_to(shape, target) -> bool:
    """Whether an array of ``shape`` broadcasts to exactly ``target`` (shape arithmetic, no device)."""
    try:
        return len(shape) <= len(target) and np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def to_numpy(x):
    """Copy ``x`` (NumPy or CuPy array, or array-like) to a host ``numpy.ndarray``."""
    if _is_cupy(x):
        return x.get()
    return np.asarray(x)


def asarray(x, dtype=None):
    """``x`` as an array of the current backend (moved to the GPU under "cupy")."""
    if _current == "numpy":
        return np.asarray(to_numpy(x), dtype=dtype)
    return _cupy().asarray(x, dtype=dtype)


def is_array(a) -> bool:
    """Whether ``a`` is a NumPy or CuPy ndarray (not a list, a tensor or a masked array)."""
    return type(a).__module__.split(".")[0] in ("numpy", "cupy") and type(a).__name__ == "ndarray"


def _from_environment():
    value = os.environ.get("MHATTN_BACKEND", "").strip() or "numpy"
    try:
        set_backend(value)
    except ValueError as err:
        raise ValueError(f"MHATTN_BACKEND={value!r}: {err}") from None


_from_environment()
