"""The backend: where new arrays go (four libraries, with devices), the inputs' namespace, transfers, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest
from xp_testing import xp_assert_equal

import mhattn
from mhattn import backend


def _strict(device="device1"):
    strict = pytest.importorskip("array_api_strict")
    return strict, strict.Device(device)


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


def test_use_backend_switches_device_and_restores():
    strict, device1 = _strict()
    before = (mhattn.get_backend(), backend.get_device())
    with mhattn.use_backend("array_api_strict", "device1"):
        assert mhattn.get_backend() == "array_api_strict" and backend.get_device() == device1
        assert backend.current_array_module() is strict
        with mhattn.use_backend("numpy"):
            assert isinstance(mhattn.asarray([1.0, 2.0]), np.ndarray) and backend.get_device() is None
        assert backend.get_device() == device1
    assert (mhattn.get_backend(), backend.get_device()) == before


def test_set_backend_takes_a_name_and_a_device():
    strict, device1 = _strict()
    try:
        mhattn.set_backend(" Array_API_Strict ", "device1")  # case and spaces ignored; a device by name
        assert mhattn.get_backend() == "array_api_strict" and backend.get_device() == device1
        mhattn.set_backend("array_api_strict", strict.Device("CPU_DEVICE"))  # or the library's device object
        assert backend.get_device() == strict.Device("CPU_DEVICE")
    finally:
        mhattn.set_backend("numpy")
    assert mhattn.get_backend() == "numpy" and backend.get_device() is None


def test_unknown_backend_lists_the_four():
    with pytest.raises(ValueError, match=r"backend must be one of \('numpy', 'cupy', 'torch', 'array_api_strict'\), got 'jax'"):
        mhattn.set_backend("jax")
    assert mhattn.get_backend() == "numpy"


def test_numpy_has_only_the_cpu():
    mhattn.set_backend("numpy", "cpu")  # accepted: the one device
    with pytest.raises(ValueError, match=r"the numpy backend has one device, 'cpu'; got device='cuda'"):
        mhattn.set_backend("numpy", "cuda")


@pytest.mark.parametrize(
    "name, extra", [("cupy", r"mhattn\[gpu\]"), ("torch", r"torch==2\.13\.0"), ("array_api_strict", "array-api-strict")]
)
def test_a_missing_library_names_what_to_install(monkeypatch, name, extra):
    monkeypatch.setitem(sys.modules, name, None)  # import -> ImportError
    for compat in ("array_api_compat.cupy", "array_api_compat.torch"):
        monkeypatch.setitem(sys.modules, compat, None)
    with pytest.raises(
        ImportError, match=rf"the {name!r} backend needs {name} and array-api-compat; install them with: pip install {extra}"
    ):
        mhattn.set_backend(name)
    assert mhattn.get_backend() == "numpy"


def test_cupy_without_a_device_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "array_api_compat.cupy", types.ModuleType("array_api_compat.cupy"))
    with pytest.raises(RuntimeError, match=r"no usable CUDA device \(cupy.is_available\(\) is False\)"):
        mhattn.set_backend("cupy")


def test_use_backend_restores_after_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError):
        with mhattn.use_backend("cupy"):
            pass
    assert mhattn.get_backend() == "numpy"


def test_two_libraries_or_two_devices_in_one_call_are_refused_naming_both():
    strict, device1 = _strict()
    x = strict.asarray(np.zeros(2), device=device1)
    with pytest.raises(TypeError, match=r"two libraries in one call: array_api_strict and numpy"):
        mhattn.array_namespace(np.zeros(2), x)
    with pytest.raises(ValueError, match=r"two devices in one call: .*CPU_DEVICE.* and .*device1"):
        mhattn.array_namespace(x, strict.asarray(np.zeros(2), device=strict.Device("CPU_DEVICE")))


def test_namespace_is_numpy_for_ndarrays_and_ignores_none_and_scalars():
    """Plain NumPy arrays get NumPy itself (issue 33: no substitute module named ``numpy``)."""
    assert mhattn.array_namespace(np.zeros(2), None, 3.0) is np
    assert mhattn.array_namespace() is np
    strict, device1 = _strict()
    assert mhattn.array_namespace(strict.asarray([1.0], device=device1), None, 2) is strict
    assert backend.device_of(np.zeros(1)) == "cpu" and backend.device_of(strict.asarray([1.0], device=device1)) == device1


def test_one_name_for_the_namespace():
    """Namespace detection has one public name (issue 33): ``get_array_module`` is gone."""
    assert not hasattr(mhattn, "get_array_module") and not hasattr(mhattn.backend, "get_array_module")


def test_to_numpy_of_strict_device1_goes_by_to_device():
    """device1 refuses ``numpy.asarray`` (as a GPU array would); to_numpy still brings it home."""
    strict, device1 = _strict()
    x = strict.asarray(np.arange(6.0).reshape(2, 3), device=device1)
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        np.asarray(x)
    back = mhattn.to_numpy(x)
    assert type(back) is np.ndarray
    xp_assert_equal(back, np.arange(6.0).reshape(2, 3))


def test_to_numpy_of_torch_detaches_and_keeps_the_dtype():
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_(True)
    back = mhattn.to_numpy(t * 2)
    assert type(back) is np.ndarray and back.dtype == np.float32
    xp_assert_equal(back, 2 * np.arange(6.0).reshape(2, 3), check_dtype=False)
    assert mhattn.to_numpy([1, 2]).tolist() == [1, 2] and mhattn.to_numpy(np.float64(2.5)) == 2.5


def test_asarray_goes_to_the_current_backend_and_device(backend):
    host = np.arange(6.0).reshape(2, 3)
    x = mhattn.asarray(host)
    assert backend.is_here(x) and x.dtype == backend.xp.float64
    y = mhattn.asarray(host, dtype="float32")
    assert backend.is_here(y) and y.dtype == backend.xp.float32
    for z in (x, y):
        xp_assert_equal(z, host, like=backend, check_dtype=False)
    assert backend.is_here(mhattn.asarray(backend.asarray(host)))  # already there: stays
    if backend.name != "numpy":  # an array of another library comes over, by the host
        strict, device1 = _strict()
        other = np.zeros(2) if backend.name == "array_api_strict" else strict.asarray(np.zeros(2), device=device1)
        assert backend.is_here(mhattn.asarray(other))


def test_python_floats_become_float64_on_every_backend_unless_a_dtype_is_given(backend):
    """torch alone would make float32 of a list of floats; mhattn.asarray keeps NumPy's rule everywhere."""
    x = mhattn.asarray([[0.5, 1.5], [2.5, 3.5]])
    assert backend.is_here(x) and x.dtype == backend.xp.float64
    assert mhattn.asarray([1, 2]).dtype == backend.xp.int64 and mhattn.asarray([True]).dtype == backend.xp.bool
    assert mhattn.asarray([0.5], dtype="float32").dtype == backend.xp.float32
    np.testing.assert_array_equal(backend.to_numpy(x), [[0.5, 1.5], [2.5, 3.5]])


def test_asarray_like_goes_to_that_arrays_library_and_device_whatever_the_backend(backend):
    like = backend.asarray(np.zeros(3, np.float32))
    with mhattn.use_backend("numpy"):  # the current backend plays no part with like=
        moved = mhattn.asarray([1.0, 2.0, 3.0], like=like)
        cast = mhattn.asarray(np.arange(3.0), dtype=like.dtype, like=like)
        ids = mhattn.asarray(np.array([0, 2]), like=like)
    assert backend.is_here(moved) and moved.dtype == backend.xp.float64
    assert backend.is_here(cast) and cast.dtype == backend.xp.float32
    assert backend.is_here(ids) and ids.dtype == backend.xp.int64
    assert mhattn.asarray(like, like=like) is like  # already there, same dtype: the same array
    np.testing.assert_array_equal(backend.to_numpy(cast), [0.0, 1.0, 2.0])


def test_same_seed_same_weights_on_every_backend(backend):
    with mhattn.use_backend("numpy"):
        host = mhattn.MultiHeadAttention(16, 4, seed=11)
    here = mhattn.MultiHeadAttention(16, 4, seed=11)
    for n in host.params:
        xp_assert_equal(here.params[n], host.params[n], like=backend, err_msg=n)


def _run(code, env_backend):
    env = dict(os.environ, MHATTN_BACKEND=env_backend)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_environment_variable_selects_the_backend():
    ok = _run("import mhattn; print(mhattn.get_backend())", "NumPy")
    assert ok.returncode == 0 and ok.stdout.strip() == "numpy"
    bad = _run("import mhattn", "tpu")
    assert bad.returncode != 0 and "MHATTN_BACKEND='tpu': backend must be one of" in bad.stderr


def test_environment_variable_torch_places_parameters_in_torch():
    pytest.importorskip("torch")
    code = (
        "import mhattn, torch; m = mhattn.MultiHeadAttention(8, 2, seed=0); "
        "out, _ = m(torch.zeros(1, 3, 8)); print(mhattn.get_backend(), type(m.params['W_q']).__name__, type(out).__name__)"
    )
    done = _run(code, "torch")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch", "Tensor", "Tensor"]
