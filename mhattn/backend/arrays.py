"""Where arrays live: the inputs' namespace (Python array API standard) and the backend for new arrays.

Ops never pick an array library themselves: they ask their inputs (``xp = array_namespace(x, W)``), as
scikit-learn and SciPy do with ``array_api_compat.array_namespace``. Plain NumPy arrays get NumPy
itself (NumPy 2 has the standard's names: ``concat``, ``permute_dims``, ``x.mT``, ``astype``, ``isdtype``); any
other array (CuPy, torch, array-api-strict) gets its array-api-compat namespace.
New arrays are made on the inputs' device (``device=device_of(x)``).

The *current backend* decides only where arrays made from nothing go: parameters, :func:`asarray` data,
loaded checkpoints. Choose it with :func:`set_backend`, :func:`use_backend` or ``MHATTN_BACKEND`` (read once,
at import): ``"numpy"`` (default), ``"cupy"``, ``"torch"`` (``device="cpu"`` or ``"cuda"``) and
``"array_api_strict"`` (tests: ``device="device1"`` stands in for a GPU, refusing host conversion).

The standard lacks a few things mhattn needs; each has one named helper in :mod:`mhattn.backend.extra` with one
implementation per library and a generic one; which NumPy arrays mhattn takes and how any array comes to the host
(:func:`to_numpy`) is :mod:`mhattn.backend.host`'s. The package :mod:`mhattn.backend` holds every NumPy-only branch
of the steps' arithmetic (the speed engine, :mod:`mhattn.kernels`, is NumPy-only as a whole); the steps in
:mod:`mhattn.functional` have none.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from types import ModuleType

import numpy as np

from mhattn.backend.host import library_of, numpy_kind, safe_to_share, to_numpy

BACKENDS = ("numpy", "cupy", "torch", "array_api_strict")
_current = "numpy"
_device = None


def _import_backend(name: str) -> ModuleType:
    """The array-api-compat namespace of backend ``name`` (NumPy itself for "numpy").

    Raises:
        ImportError: the library (or array-api-compat) is not installed; the message says what to install.
        RuntimeError: CuPy is installed but ``cupy.is_available()`` is False.
    """
    if name == "numpy":
        return np
    extra = {"cupy": "mhattn[gpu]", "torch": "torch==2.13.0", "array_api_strict": "array-api-strict"}[name]
    try:
        if name == "array_api_strict":
            import array_api_strict

            return array_api_strict
        module = importlib.import_module(f"array_api_compat.{name}")
    except ImportError as err:
        raise ImportError(
            f"the {name!r} backend needs {name} and array-api-compat; install them with: pip install {extra}"
        ) from err
    if name == "cupy" and not __import__("cupy").is_available():
        raise RuntimeError(
            "CuPy is installed but found no usable CUDA device (cupy.is_available() is False); "
            "use the 'numpy' backend on this machine"
        )
    return module


def _device_object(name: str, device):
    """The library's device object for ``device`` (a string such as "cpu", "cuda", "device1", or a device)."""
    if device is None or not isinstance(device, str):
        return device
    if name == "torch":
        import torch

        return torch.device(device)
    if name == "array_api_strict":
        import array_api_strict

        return array_api_strict.Device(device)
    if name == "cupy":
        import cupy

        return cupy.cuda.Device(int(device.split(":")[-1]) if ":" in device else 0)
    raise ValueError(f"the numpy backend has one device, 'cpu'; got device={device!r}")


def set_backend(name: str, device=None) -> None:
    """Make ``name`` the backend (and ``device`` its device) that new arrays are placed on.

    Args:
        name: one of ``BACKENDS`` (case and spaces ignored).
        device: the library's device, or its name ("cpu", "cuda", "cuda:1", "device1"); None: the library's default.

    Raises:
        ValueError: ``name`` is not one of ``BACKENDS``, or a device for "numpy" other than "cpu".
        ImportError / RuntimeError: the library is missing, or CuPy has no CUDA device.
    """
    global _current, _device
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    _import_backend(key)
    if key == "numpy" and device in ("cpu", None):
        device = None
    _current, _device = key, _device_object(key, device)


def get_backend() -> str:
    """The name of the current backend: one of ``BACKENDS``."""
    return _current


def get_device():
    """The device new arrays go to under the current backend (None: the library's default)."""
    return _device


@contextlib.contextmanager
def use_backend(name: str, device=None):
    """Context manager: switch to backend ``name`` (on ``device``), restore the previous one on exit."""
    previous = (_current, _device)
    set_backend(name, device)
    try:
        yield
    finally:
        set_backend(*previous)


def current_array_module() -> ModuleType:
    """The namespace of the current backend, where new arrays go (``numpy`` itself for "numpy")."""
    return _import_backend(_current)


def _arrays(arrays):
    return [a for a in arrays if a is not None and not isinstance(a, (bool, int, float, complex)) and hasattr(a, "shape")]


def array_namespace(*arrays) -> ModuleType:
    """The namespace of the arrays: NumPy itself for ``numpy.ndarray`` inputs, else array-api-compat's.

    ``None`` and Python scalars are ignored; no array at all gives NumPy.

    Raises:
        TypeError: arrays of two libraries in one call (the message names both).
        ValueError: arrays on two devices in one call (the message names both).
    """
    for a in arrays:  # the common case first, cheaply: plain NumPy arrays (and None) only
        if a is not None and type(a) is not np.ndarray:
            break
    else:
        return np
    arrays = _arrays(arrays)
    if all(isinstance(a, np.ndarray) for a in arrays):  # subclasses (np.memmap) too: their arithmetic is NumPy's
        return np
    libraries = sorted({library_of(a) for a in arrays})
    if len(libraries) > 1:
        raise TypeError(
            f"arrays of two libraries in one call: {' and '.join(libraries)}; move them to one with "
            "mhattn.asarray (the current backend) or mhattn.to_numpy (host)"
        )
    import array_api_compat

    devices = {str(array_api_compat.device(a)) for a in arrays}
    if len(devices) > 1:
        raise ValueError(f"arrays on two devices in one call: {' and '.join(sorted(devices))}; move them to one device")
    return array_api_compat.array_namespace(*arrays)


def is_numpy(xp) -> bool:
    """Whether the namespace ``xp`` is NumPy (NumPy itself, or array-api-compat's wrapper of it)."""
    return xp is np or getattr(xp, "__name__", "") == "array_api_compat.numpy"


def device_of(x):
    """The device ``x`` lives on (NumPy: "cpu"), for ``device=`` when making arrays beside it."""
    if isinstance(x, np.ndarray):
        return "cpu"
    import array_api_compat

    return array_api_compat.device(x)


def read_only(a):
    """``a`` as an array its receiver cannot write into: a read-only view on NumPy, a copy elsewhere.

    Other libraries have no write-protection flag, so there the only safe hand-out is a copy.
    Forwards use it for arrays they also keep in their cache.
    """
    if not isinstance(a, np.ndarray):
        return array_namespace(a).asarray(a, copy=True)
    view = np.asarray(a).view()
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


def asarray(x, dtype=None, *, like=None):
    """``x`` as an array of the current backend on its device, or of ``like``'s library on ``like``'s device.

    The one function that moves an array into a library and onto a device: data, loaded values, masks.
    An array already there comes back as it is (cast when ``dtype`` differs); one of another library comes
    over through the host (its library's own transfer, :func:`to_numpy`).

    Args:
        x: an array of any backend, a NumPy array, or a Python number or (nested) list.
        dtype: a name ("float32"), a NumPy dtype or a dtype of the target library; None keeps ``x``'s, and
            Python floats become float64 on every backend (NumPy's rule; torch alone would make float32).
        like: an array (usually a parameter); None: the current backend and device (:func:`set_backend`).

    Raises:
        TypeError: ``dtype`` has no counterpart in the target library.
    """
    if like is None:
        library, xp, device = _current, current_array_module(), _device
    else:
        library, xp, device = library_of(like), array_namespace(like), device_of(like)
    if library == "numpy":
        host = to_numpy(x) if library_of(x) not in ("numpy", "builtins") else x
        return np.asarray(host, dtype=None if dtype is None else np.dtype(dtype))
    if library_of(x) == library and (like is None or str(device_of(x)) == str(device)) and hasattr(x, "dtype"):
        dt = None if dtype is None else _dtype_in(xp, dtype)
        return x if dt is None or x.dtype == dt else xp.astype(x, dt)
    host = safe_to_share(to_numpy(x) if library_of(x) != "builtins" else x)  # no negative stride, nothing read-only
    dt = _dtype_in(xp, host.dtype if dtype is None else dtype)
    return xp.asarray(host, dtype=dt, device=device)


def _dtype_in(xp, dtype):
    """The dtype of namespace ``xp`` named like ``dtype`` (a name, a NumPy dtype, or ``xp``'s own dtype)."""
    if not isinstance(dtype, (str, np.dtype, type)):
        return dtype  # already the library's dtype object (torch.float32, a strict dtype)
    name = np.dtype(dtype).name
    try:
        return getattr(xp, name)
    except AttributeError:
        raise TypeError(f"dtype {name} has no counterpart in {getattr(xp, '__name__', xp)}") from None


def is_ndarray_float(a) -> bool:
    """Whether ``a`` is a plain ``numpy.ndarray`` of a real floating dtype: one identity test and one attribute, the
    input checks' common case (they run about 20 times per MHA step)."""
    return type(a) is np.ndarray and a.dtype.kind == "f"


def is_array(a) -> bool:
    """Whether ``a`` is an array of a backend mhattn supports (not a list, a masked array, an ``np.matrix`` or a
    scalar; NumPy subclasses such as ``np.memmap`` are arrays)."""
    if type(a) is np.ndarray:
        return True  # the common case first: one identity test (the checks run ~20 times per MHA step)
    if isinstance(a, np.ndarray):
        return numpy_kind(a)
    if library_of(a) not in ("cupy", "torch", "array_api_strict"):
        return False
    import array_api_compat

    return array_api_compat.is_array_api_obj(a)


def _from_environment():
    value = os.environ.get("MHATTN_BACKEND", "").strip() or "numpy"
    try:
        set_backend(value)
    except ValueError as err:
        raise ValueError(f"MHATTN_BACKEND={value!r}: {err}") from None


_from_environment()
