"""The engine's tile helpers for tiled attention on NumPy: reused buffers, in-place fills, the shift-free test.

Fresh 1-4 MiB arrays per tile cost page faults on NumPy (~20% of a tiled call), so each (batch, head) work item
makes its buffers once (:func:`workspace`) and every tile's GEMM writes into a corner of them
(:func:`matmul_into`). The reference (:mod:`mhattn.functional.attention_tiled`) makes fresh arrays instead.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# |score| below this needs no shift before exp (float32 max ~3.4e38, float64 ~1.8e308)
NO_SHIFT_BOUND = {"float32": 30.0, "float64": 300.0}


class Workspace(NamedTuple):
    """One work item's tile buffers."""

    s: object  # (block_q, block_k) scores, then weights P
    ds: object  # (block_q, block_k) dP, then dS
    kv: object  # (block_k, max(d_k, d_v)) a tile's dV or dK contribution
    extra: tuple = ()  # backward: ([K | 1]^T, [V | 1]^T), each (d + 1, S), contiguous


def workspace(q, d_v, block_q, block_k, S) -> Workspace:
    """Buffers for one work item ``q`` ``(T, d_k)`` with values of ``d_v`` features over ``S`` keys."""
    bq, bk, d = min(block_q, q.shape[-2]), min(block_k, S), max(q.shape[-1], d_v)
    return Workspace(*(np.empty(shape, dtype=q.dtype) for shape in ((bq, bk), (bq, bk), (bk, d))))


def matmul_into(a, b, buf, rows, cols):
    """``a @ b`` ``(rows, cols)``, written into the top-left corner of ``buf``."""
    return np.matmul(a, b, out=buf[..., :rows, :cols])


def fill_where(s, where, value=-np.inf):
    """``where(where, value, s)`` in place (``copyto``); returns ``s``."""
    np.copyto(s, value, where=where)
    return s


def with_column(a, column):
    """``[a | column]``: ``(..., n, d)`` and ``column`` broadcastable to ``(..., n, 1)`` -> ``(..., n, d + 1)``."""
    return np.concatenate([a, np.broadcast_to(column, (*a.shape[:-1], 1))], axis=-1)


def key_norm(k) -> float:
    """``max |k_s|`` over the keys ``(S, d_k)`` of one work item, for :func:`shift_free`."""
    return float(np.sqrt(np.max(np.sum(k * k, axis=-1))))


def shift_free(qs, k_norm, mask) -> bool:
    """Whether every score of the block lies within ``NO_SHIFT_BOUND``: ``|q . k| <= |q| max|k|`` (Cauchy-Schwarz).

    Then exp(S) can neither overflow nor underflow a row's largest term, so the shift by the running max (whose only
    job is that) can be 0: softmax is the same for any shift. A float mask may add any number, so it always takes
    the shift.
    """
    if mask is not None and mask.dtype != np.bool_:
        return False
    bound = NO_SHIFT_BOUND["float32" if qs.dtype == np.float32 else "float64"]
    return float(np.sqrt(np.max(np.sum(qs * qs, axis=-1)))) * k_norm <= bound
