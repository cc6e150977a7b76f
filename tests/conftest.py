"""Shared fixtures: the array-library legs (scikit-learn style), the host default and a seeded generator.

A *leg* is one (namespace, device, dtype) combination, as scikit-learn's
``yield_namespace_device_dtype_combinations``: NumPy; array-api-strict on ``Device("device1")``, which refuses
conversion to NumPy and mixing devices, so a CPU-only run catches the host-only calls a GPU would reject (its
default device converts silently through ``__array__``, so it would prove little); torch on the CPU; and, where a
GPU is there, CuPy and torch on CUDA (marked ``gpu``: ``pytest -m gpu`` selects them, as benchmarks/gpu_check.sh
does). Tests that ask for ``backend`` run once per leg under ``mhattn.use_backend(leg)``, so parameters and
``mhattn.asarray`` data land on the leg; ``backend.asarray``/``backend.to_numpy`` move NumPy inputs there and
results back.
"""

from __future__ import annotations

import contextlib
import importlib.util
from dataclasses import dataclass

import numpy as np
import pytest

import mhattn


def _cupy_ok() -> bool:
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:
        return False


def _torch_cuda_ok() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


# (backend name, device, id, marks): the devices are those mhattn.use_backend accepts
_LEGS = (
    ("numpy", None, "numpy", ()),
    ("array_api_strict", "device1", "strict-device1", ()),
    ("torch", "cpu", "torch-cpu", (pytest.mark.torch,)),
    ("torch", "cuda:0", "torch-cuda", (pytest.mark.torch, pytest.mark.gpu)),
    ("cupy", "cuda:0", "cupy", (pytest.mark.gpu,)),
)
_GPU_SKIP = {
    "torch-cuda": pytest.mark.skipif(not _torch_cuda_ok(), reason="torch with a CUDA device is not available"),
    "cupy": pytest.mark.skipif(not _cupy_ok(), reason="CuPy with a CUDA device is not available"),
}


def yield_namespace_device_dtype_combinations(dtypes=("float64",)):
    """``pytest.param((name, device, dtype))`` for every leg and dtype, with its id and marks.

    ``dtypes=("float64", "float32")`` gives the float32 legs too (tests/lib/test_array_api.py); tests that
    choose their dtypes themselves take the default, one float64 param per leg.
    """
    for name, device, ident, marks in _LEGS:
        for dtype in dtypes:
            full_id = ident if len(dtypes) == 1 else f"{ident}-{dtype}"
            skip = (_GPU_SKIP[ident],) if ident in _GPU_SKIP else ()
            yield pytest.param((name, device, dtype), id=full_id, marks=(*marks, *skip))


LEGS = list(yield_namespace_device_dtype_combinations())
LEGS_AND_DTYPES = list(yield_namespace_device_dtype_combinations(("float64", "float32")))


@dataclass(frozen=True)
class Leg:
    """One leg: ``xp`` the namespace mhattn's ops see, ``device`` the library's device object, ``dtype`` a name."""

    name: str
    xp: object
    device: object
    dtype: str

    def asarray(self, a, dtype=None):
        """A host array (or list) on this leg, as ``xp.asarray(np_array, device=device)``; ``dtype`` a NumPy name."""
        host = np.asarray(a, dtype=dtype)
        if self.name == "numpy":
            return host.copy()
        return self.xp.asarray(host, device=self.device)

    def floats(self, a):
        """A host array cast to the leg's dtype, on this leg."""
        return self.asarray(a, dtype=self.dtype)

    @staticmethod
    def to_numpy(x):
        """``x`` on the host, always a copy (``mhattn.to_numpy`` hands a NumPy array back as it is)."""
        return np.array(mhattn.to_numpy(x), copy=True)

    def is_here(self, x) -> bool:
        """Whether ``x`` is an array of this leg's namespace on its device (NumPy: a plain ndarray)."""
        if self.name == "numpy":
            return type(x) is np.ndarray
        import array_api_compat

        return (
            array_api_compat.is_array_api_obj(x)
            and array_api_compat.array_namespace(x) is self.xp
            and (array_api_compat.device(x) == self.device)
        )

    def __repr__(self):
        return f"Leg({self.name}, {self.device}, {self.dtype})"


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: a leg on a CUDA device (CuPy, torch CUDA); skipped without one")


@pytest.fixture(params=LEGS)
def backend(request):
    """Runs the test on each leg, under ``mhattn.use_backend(name, device)``; yields its :class:`Leg`.

    Parametrise it indirectly with ``LEGS_AND_DTYPES`` for the float32 legs as well.
    """
    name, device, dtype = request.param
    if name in ("array_api_strict", "torch"):
        pytest.importorskip(name)  # skipped, not an error, without the library
    with mhattn.use_backend(name, device), _one_torch_thread(name):
        yield Leg(name, mhattn.backend.current_array_module(), mhattn.backend.get_device() or "cpu", dtype)


@contextlib.contextmanager
def _one_torch_thread(name):
    """torch on tiny tensors with one intra-op thread: on a busy 2-core machine, waking a second costs ~2 ms an op."""
    if name != "torch":
        yield
        return
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _host_backend_unless_parametrised(request):
    """Tests that do not ask for ``backend`` build NumPy inputs: run them on NumPy.

    Device coverage comes from the ``backend``-parametrised tests, which run on every leg (GPU legs
    wherever a GPU is there), whatever MHATTN_BACKEND says.
    """
    if "backend" in request.fixturenames:
        yield
    else:
        with mhattn.use_backend("numpy"):
            yield


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# The grader's test submissions (edits of solutions/) are data for tests/grader/test_grade*.py, not tests.
collect_ignore = ["grader/grader_attacks"]
