"""NumPy arrays on the host: which ones mhattn takes, how any array comes to the host, and how a host array is
handed to another library.

:mod:`mhattn.backend` re-exports these names (``mhattn.backend.to_numpy`` and ``mhattn.to_numpy`` are this
module's); they need NumPy alone: no namespace, no backend, no device.
"""

from __future__ import annotations

import numpy as np


def library_of(a) -> str:
    """The library of ``a``: ``"numpy"`` for any ``numpy.ndarray`` (subclasses such as ``np.memmap`` included)."""
    return "numpy" if isinstance(a, np.ndarray) else type(a).__module__.split(".")[0]


def numpy_kind(a) -> bool:
    """Whether ``a`` is a NumPy array mhattn takes: ``ndarray`` or a subclass whose arithmetic is ndarray's
    (``np.memmap``, ``np.load(..., mmap_mode="r")``); not a masked array (its mask would be ignored) or an
    ``np.matrix`` (``*`` is a matrix product there)."""
    return type(a) is np.ndarray or (isinstance(a, np.ndarray) and not isinstance(a, (np.ma.MaskedArray, np.matrix)))


def plain(a):
    """``a`` with a NumPy subclass (``np.memmap``) seen as the plain ``ndarray`` it views (no copy); else ``a``.

    The public entries pass their array arguments through it, so a memory-mapped input gives the results, and
    the result types, of the plain-array path.
    """
    if type(a) is np.ndarray or not isinstance(a, np.ndarray):
        return a
    return np.asarray(a) if numpy_kind(a) else a


def safe_to_share(host):
    """A host array another library may take as it is: a C-contiguous copy when a stride is negative or the
    array is read-only, else the array itself.

    torch refuses NumPy arrays with a negative stride (``np.flip(x, 1)``, ``x[:, ::-1]``; pytorch/pytorch#92680),
    and would share a read-only array's memory (``np.load(..., mmap_mode="r")``), where a write through the
    tensor is undefined; every other layout (transposed, sliced, Fortran order) passes as it is.
    """
    host = np.asarray(host)
    if any(s < 0 for s in host.strides) or not host.flags.writeable:
        return np.array(host, order="C", copy=True)
    return host


def to_numpy(x, *, copy: bool = False):
    """``x`` (an array of any backend, on any device, or an array-like) as a host ``numpy.ndarray``.

    Device arrays come over by the library's own transfer (CuPy ``.get()``, torch ``.cpu()``,
    array-api-strict ``to_device``) or DLPack, never by ``numpy.asarray`` on a device array.
    An array already on the host (NumPy, torch CPU, array-api-strict's CPU device) comes back as a view of
    the same memory unless ``copy=True``: take a copy to keep a snapshot across in-place updates
    (an optimiser's step, say). torch's bfloat16, which NumPy lacks, comes back as float32 (exactly: every
    bfloat16 value is a float32 value).
    """
    if copy:
        return np.array(to_numpy(x), copy=True)
    if isinstance(x, (np.ndarray, np.generic)) or not hasattr(x, "shape"):
        return np.asarray(x)
    library = library_of(x)
    if library == "cupy":
        return x.get()
    if library == "torch":
        x = x.detach().cpu()
        return (x.float() if str(x.dtype) == "torch.bfloat16" else x).numpy()
    if library == "array_api_strict":
        import array_api_strict

        return np.asarray(x.to_device(array_api_strict.Device("CPU_DEVICE")))
    return np.from_dlpack(x)
