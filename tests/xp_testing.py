"""One way to compare arrays in the tests, for arrays of any library (as SciPy's ``xp_assert_close``).

:func:`xp_assert_close` and :func:`xp_assert_equal` check, in order, the namespace (and device) of ``actual``,
its dtype, its shape, and only then its values, on host copies; a failure names which. ``desired`` is usually
a NumPy reference while ``actual`` lives on a test's leg: pass ``xp=leg.xp, device=leg.device`` (or
``like=leg``) to say where ``actual`` must be. :func:`assert_close_tree` compares nested results (dicts,
lists, floats) for paths whose arithmetic is the same maths summed in another order.
"""

from __future__ import annotations

import numpy as np
import pytest

import mhattn
from mhattn.backend import array_namespace, device_of


def _check_placement(actual, desired, xp, device, like, err_msg):
    """``actual`` is an array of namespace ``xp`` (default ``desired``'s) on ``device`` (default ``desired``'s)."""
    if like is not None:
        xp, device = like.xp, like.device
    want_xp = array_namespace(desired) if xp is None else xp
    if want_xp is np:  # NumPy: a plain ndarray, no subclass or scalar
        assert type(actual) is np.ndarray, (
            f"{err_msg}: expected a numpy.ndarray, got {type(actual).__module__}.{type(actual).__name__}"
        )
        return
    assert mhattn.backend.is_array(actual), f"{err_msg}: expected an array of {want_xp.__name__}, got {type(actual).__name__}"
    got_xp = array_namespace(actual)
    assert got_xp is want_xp, f"{err_msg}: namespace {got_xp.__name__}, expected {want_xp.__name__}"
    if device is None and xp is None:
        device = device_of(desired)
    if device is not None:
        assert str(device_of(actual)) == str(device), f"{err_msg}: on device {device_of(actual)}, expected {device}"


def _host_pair(actual, desired, xp, device, like, check_namespace, check_dtype, check_shape, err_msg):
    """``(actual, desired)`` as NumPy arrays after the namespace, dtype and shape checks."""
    if check_namespace:
        _check_placement(actual, desired, xp, device, like, err_msg)
    have, want = mhattn.to_numpy(actual, copy=True), np.asarray(mhattn.to_numpy(desired))
    if check_dtype:
        assert have.dtype == want.dtype, f"{err_msg}: dtype {have.dtype}, expected {want.dtype}"
    if check_shape:
        assert have.shape == want.shape, f"{err_msg}: shape {have.shape}, expected {want.shape}"
    return have, want


def xp_assert_close(actual, desired, *, rtol=None, atol=0.0, xp=None, device=None, like=None, check_namespace=True,
                    check_dtype=True, check_shape=True, err_msg=""):  # fmt: skip
    """``actual`` equals ``desired`` within ``|actual - desired| <= atol + rtol * |desired|``, after the checks.

    Args:
        actual: the array under test, of any library mhattn supports, on any device.
        desired: the reference (NumPy, an array of ``actual``'s library, or a list or number).
        rtol: relative tolerance; ``None`` = 4 x the square root of the dtype's machine epsilon (SciPy's default).
        atol: absolute tolerance.
        xp, device: the namespace and device ``actual`` must have (default: ``desired``'s); ``like``: an object
            with ``.xp`` and ``.device`` (a test's leg) to take both from.
        check_namespace, check_dtype, check_shape: turn one check off where a test compares across them on purpose.
    """
    have, want = _host_pair(actual, desired, xp, device, like, check_namespace, check_dtype, check_shape, err_msg)
    if rtol is None:
        rtol = 4 * float(np.finfo(have.dtype).eps) ** 0.5 if have.dtype.kind in "fc" else 0.0
    np.testing.assert_allclose(have, want, rtol=rtol, atol=atol, err_msg=err_msg)


def xp_assert_equal(actual, desired, *, xp=None, device=None, like=None, check_namespace=True, check_dtype=True,
                    check_shape=True, err_msg=""):  # fmt: skip
    """``actual`` equals ``desired`` exactly (NaN where ``desired`` has NaN), after the checks of :func:`xp_assert_close`."""
    have, want = _host_pair(actual, desired, xp, device, like, check_namespace, check_dtype, check_shape, err_msg)
    np.testing.assert_array_equal(have, want, err_msg=err_msg)


def assert_close_tree(got, want, rel=1e-5, abs=1e-7, path="result"):
    """``got`` and ``want`` have the same keys, lengths, strings and integers, and floats within ``rel``/``abs``.

    For two code paths that group a sum differently (a cached prefix against a full forward, one worker's BLAS
    threads against two's): they give the same numbers only on some BLAS kernels; on another kernel
    (``OPENBLAS_CORETYPE=Haswell``) they differ in the last bits of float32. A claim of the same numbers is then
    a tolerance, here ``rel``.
    """
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_close_tree(got[k], want[k], rel, abs, f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)) or (isinstance(want, np.ndarray) and want.dtype.kind not in "fc"):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close_tree(g, w, rel, abs, f"{path}[{i}]")
    elif isinstance(want, float) or (isinstance(want, np.ndarray) and want.dtype.kind in "fc"):
        assert got == pytest.approx(want, rel=rel, abs=abs, nan_ok=True), f"{path}: {got} != {want}"
    else:  # ints, bools, strings, None: the same exactly
        assert got == want, f"{path}: {got!r} != {want!r}"
