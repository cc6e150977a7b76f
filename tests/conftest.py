"""Shared fixtures: every backend test runs on NumPy, and on CuPy where a GPU is there."""

from __future__ import annotations

import numpy as np
import pytest

import mhattn


def _cupy_ok() -> bool:
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:
        return False


BACKENDS = [
    "numpy",
    pytest.param("cupy", marks=pytest.mark.skipif(not _cupy_ok(), reason="CuPy with a CUDA device is not available")),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Runs the test under each backend; yields the array module (numpy or cupy)."""
    with mhattn.use_backend(request.param):
        yield mhattn.backend.current_array_module()


@pytest.fixture(autouse=True)
def _host_backend_unless_parametrised(request):
    """Tests that do not ask for ``backend`` build NumPy inputs: run them on NumPy.

    Device coverage comes from the ``backend``-parametrised tests, which run on CuPy
    wherever a GPU is there, whatever MHATTN_BACKEND says.
    """
    if "backend" in request.fixturenames:
        yield
    else:
        with mhattn.use_backend("numpy"):
            yield


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# The grader's test submissions (edits of solutions/) are data for tests/test_grade*.py, not tests.
collect_ignore = ["grader_attacks"]
