"""The tests' one array comparison (tests/xp_testing.py) fails on each thing it checks: namespace, device,
dtype, shape, values."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close, xp_assert_equal


def test_equal_arrays_pass_and_each_difference_fails_with_its_name():
    a = np.linspace(0.0, 1.0, 6).reshape(2, 3)
    xp_assert_equal(a, a.copy())
    xp_assert_close(a * (1 + 1e-13), a, rtol=1e-12)
    with pytest.raises(AssertionError, match="numpy.ndarray"):
        xp_assert_close(a.tolist(), a)
    with pytest.raises(AssertionError, match="dtype float32, expected float64"):
        xp_assert_close(a.astype(np.float32), a)
    with pytest.raises(AssertionError, match=r"shape \(1, 2, 3\), expected \(2, 3\)"):
        xp_assert_equal(a[None], a)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        xp_assert_close(a * (1 + 1e-9), a, rtol=1e-12)
    one_ulp = a.copy()
    one_ulp[0, 1] = np.nextafter(one_ulp[0, 1], 2.0)
    with pytest.raises(AssertionError, match="Arrays are not equal"):
        xp_assert_equal(one_ulp, a)


def test_the_default_tolerance_follows_the_dtype():
    a = np.ones(4, np.float32)
    xp_assert_close(a * np.float32(1 + 1e-4), a)  # 4 x sqrt(eps32) = 1.4e-3
    with pytest.raises(AssertionError):
        xp_assert_close(np.ones(4) * (1 + 1e-4), np.ones(4))  # 4 x sqrt(eps64) = 6e-8


def test_another_library_or_device_fails_before_the_values():
    strict = pytest.importorskip("array_api_strict")
    here, there = strict.Device("device1"), strict.Device("CPU_DEVICE")
    host = np.arange(3.0)
    on_device1 = strict.asarray(host, device=here)
    xp_assert_equal(on_device1, host, xp=strict, device=here)
    xp_assert_equal(on_device1, strict.asarray(host, device=here))
    with pytest.raises(AssertionError, match="numpy.ndarray"):
        xp_assert_equal(on_device1, host)
    with pytest.raises(AssertionError, match="on device"):
        xp_assert_equal(on_device1, strict.asarray(host, device=there))
    import array_api_compat.numpy as compat_numpy

    with pytest.raises(AssertionError, match="namespace array_api_strict, expected array_api_compat.numpy"):
        xp_assert_equal(on_device1, host, xp=compat_numpy)
