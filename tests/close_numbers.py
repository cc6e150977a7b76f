"""Nested results compared within a tolerance: for paths whose arithmetic is the same maths summed in another order.

Two code paths that group a sum differently (a cached prefix against a full forward, one worker's BLAS threads
against two's) give the same numbers only on some BLAS kernels; on another kernel (``OPENBLAS_CORETYPE=Haswell``)
they differ in the last bits of float32. A claim of the same numbers is then a tolerance, here ``rel``.
"""

from __future__ import annotations

import numpy as np
import pytest


def assert_close_tree(got, want, rel=1e-5, abs=1e-7, path="result"):
    """``got`` and ``want`` have the same keys, lengths, strings and integers, and floats within ``rel``/``abs``."""
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
