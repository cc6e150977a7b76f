"""The NumPy/CuPy switch: selection, errors, device-agnostic ops."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest

import mhattn
from mhattn import backend


class FakeCupyArray:
    """Looks like a CuPy array to get_array_module (which goes by the type's module)."""

    __module__ = "cupy._core.core"
    shape = (2,)
    dtype = np.dtype("float32")


def test_default_is_numpy():
    """A fresh interpreter without MHATTN_BACKEND places new arrays with NumPy."""
    env = {k: v for k, v in os.environ.items() if k != "MHATTN_BACKEND"}
    code = (
        "import mhattn, numpy; "
        "print(mhattn.get_backend(), type(mhattn.asarray([1.0])).__module__, mhattn.backend.current_array_module() is numpy)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["numpy", "numpy", "True"]


def test_use_backend_switches_and_restores():
    before = mhattn.get_backend()
    with mhattn.use_backend("numpy"):
        assert mhattn.get_backend() == "numpy"
        assert isinstance(mhattn.asarray([1.0, 2.0]), np.ndarray)
        assert backend.current_array_module() is np
    assert mhattn.get_backend() == before


def test_unknown_backend():
    with pytest.raises(ValueError, match=r"backend must be one of \('numpy', 'cupy'\), got 'jax'"):
        mhattn.set_backend("jax")


def test_missing_cupy_names_the_gpu_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'mhattn\[gpu\]'"):
        mhattn.set_backend("cupy")
    assert mhattn.get_backend() != "cupy"


def test_cupy_without_a_device_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(is_available=lambda: False))
    with pytest.raises(RuntimeError, match=r"no usable CUDA device \(cupy.is_available\(\) is False\)"):
        mhattn.set_backend("cupy")


def test_use_backend_restores_after_an_error(monkeypatch):
    before = mhattn.get_backend()
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError):
        with mhattn.use_backend("cupy"):
            pass
    assert mhattn.get_backend() == before


def test_mixing_numpy_and_cupy_is_refused():
    with pytest.raises(TypeError, match=r"NumPy and CuPy arrays are mixed"):
        mhattn.get_array_module(np.zeros(2), FakeCupyArray())


def test_get_array_module_ignores_none_and_scalars():
    assert mhattn.get_array_module(np.zeros(2), None, 3.0) is np
    assert mhattn.get_array_module() is np


def test_to_numpy_and_asarray(backend):
    x = mhattn.asarray(np.arange(6.0).reshape(2, 3))
    assert mhattn.get_array_module(x) is backend
    back = mhattn.to_numpy(x)
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, np.arange(6.0).reshape(2, 3))


def test_same_seed_same_weights_on_every_backend(backend):
    with mhattn.use_backend("numpy"):
        host = mhattn.MultiHeadAttention(16, 4, seed=11)
    here = mhattn.MultiHeadAttention(16, 4, seed=11)
    for n in host.params:
        np.testing.assert_array_equal(mhattn.to_numpy(here.params[n]), host.params[n])
        assert mhattn.get_array_module(here.params[n]) is backend


def _run(code, env_backend):
    env = dict(os.environ, MHATTN_BACKEND=env_backend)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_environment_variable_selects_the_backend():
    ok = _run("import mhattn; print(mhattn.get_backend())", "NumPy")
    assert ok.returncode == 0 and ok.stdout.strip() == "numpy"
    bad = _run("import mhattn", "tpu")
    assert bad.returncode != 0 and "backend must be one of" in bad.stderr
