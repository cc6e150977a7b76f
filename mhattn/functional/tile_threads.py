"""How the tiled attention runs on each library: its NumPy-only speed tricks, one named helper each, with the
standard's version beside it, and its default tile sizes (:func:`plan_blocks`).

- threads: NumPy's elementwise ops and BLAS release the GIL, so independent (batch, head) items run on
  threads at once, BLAS held to one thread each so that the cores are not oversubscribed (:func:`run_items`);
  any other library gets all items at once (:func:`work_items`);
- reused tile buffers and ``matmul(out=)`` (:func:`workspace`, :func:`matmul_into`): fresh 1-4 MiB arrays
  per tile cost page faults on NumPy (about 20%); elsewhere ``a @ b``;
- ``copyto(where=)`` (:func:`fill_where`), ``exp(out=)`` (:func:`exp_in_place`), ``ascontiguousarray``
  (:func:`contiguous`): in place on NumPy; the standard's ``where``, ``exp`` and the array itself elsewhere;
- the shift-free exponentials (:func:`shift_free`): a bound that needs a ``float()`` of the data, cheap on the
  host, a wait for the device elsewhere, so it is taken on NumPy only.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from mhattn.backend import is_numpy

_POOLS = {}  # workers -> ThreadPoolExecutor, made once and kept (no shutdown: another call may be using it)
_BLAS = []  # [threadpoolctl controller or None], made once
_LOCK = threading.Lock()


def _pool(workers):
    """A thread pool of ``workers`` threads and a BLAS-thread controller, both kept between calls.

    Making them per call cost 1-30 ms each (thread start; threadpoolctl scanning the loaded libraries).
    """
    with _LOCK:
        if not _BLAS:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # BLAS may then oversubscribe the cores; results are the same
                ThreadpoolController = None
            _BLAS.append(ThreadpoolController() if ThreadpoolController else None)
        if workers not in _POOLS:
            _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mhattn-tiled")
        return _POOLS[workers], _BLAS[0]


def run_items(xp, workers, job, items):
    """``job(item)`` for every item: on threads for NumPy (BLAS at one thread each), in turn otherwise."""
    if workers == 1 or len(items) <= 1:
        for it in items:
            job(it)
        return
    pool, blas = _pool(workers)
    limits = None if blas is None else blas.limit(limits=1, user_api="blas")
    try:
        list(pool.map(job, items))  # list(): re-raises a worker's exception here
    finally:
        if limits is not None:
            limits.restore_original_limits()


def work_items(xp, q):
    """Work items, as index tuples into ``(B, h, ...)``: one (b, head) pair each on NumPy; everything at once
    elsewhere; none for an empty batch."""
    B, h = q.shape[:2]
    if is_numpy(xp):
        return [(b, i) for b in range(B) for i in range(h)]
    return [(slice(None), slice(None))] if B * h else []


class Workspace(NamedTuple):
    """Tile buffers, made once per work item on NumPy (``None`` elsewhere: CuPy's and torch's memory pools
    make fresh arrays cheap already)."""

    s: object  # (..., block_q, block_k) scores, then weights P
    ds: object  # (..., block_q, block_k) dP, then dS
    kv: object  # (..., block_k, d) a tile's dV or dK contribution
    extra: tuple = ()  # backward: ([K | 1]^T, [V | 1]^T), each (..., d + 1, S), contiguous


def workspace(xp, q, block_q, block_k, S):
    """Buffers for one work item ``q`` ``(..., T, d)`` on NumPy; ``Workspace(None, None, None)`` elsewhere."""
    if not is_numpy(xp):
        return Workspace(None, None, None)
    lead, bq, bk = q.shape[:-2], min(block_q, q.shape[-2]), min(block_k, S)
    return Workspace(*(xp.empty((*lead, *shape), dtype=q.dtype) for shape in ((bq, bk), (bq, bk), (bk, q.shape[-1]))))


def matmul_into(xp, a, b, buf, rows, cols):
    """``a @ b``, written into the top-left ``(rows, cols)`` corner of ``buf`` when there is one (NumPy)."""
    return a @ b if buf is None else xp.matmul(a, b, out=buf[..., :rows, :cols])


def fill_where(xp, s, where, value=-float("inf")):
    """``s`` with ``value`` where ``where`` is True: in place on NumPy (``copyto``), a fresh ``where`` elsewhere."""
    if is_numpy(xp):
        xp.copyto(s, value, where=where)
        return s
    return xp.where(where, value, s)


def exp_in_place(xp, s):
    """``exp(s)``: written into ``s`` on NumPy (``out=``), a fresh array elsewhere."""
    return xp.exp(s, out=s) if is_numpy(xp) else xp.exp(s)


def contiguous(xp, a):
    """``a`` with its rows contiguous on NumPy (GEMMs on strided views run ~30% slower); ``a`` itself elsewhere."""
    return xp.ascontiguousarray(a) if is_numpy(xp) else a


def plan_blocks(xp, q, S, block_q, block_k, workers):
    """Default tile sizes and thread count for this namespace and shape."""
    N = q.shape[0] * q.shape[1]
    if is_numpy(xp):
        workers = max(1, min(os.cpu_count() or 1, N)) if workers is None else workers
        return 256 if block_q is None else block_q, min(S, 1024) if block_k is None else block_k, workers
    block_k = S if block_k is None else block_k
    # one GPU launch per op covers every (batch, head): keep a tile near 2**26 elements
    return max(64, min(q.shape[2], 2**26 // max(1, N * S))) if block_q is None else block_q, block_k, 1


def at(idx, rows=slice(None)):
    """The index of ``rows`` of work item ``idx`` in a ``(B, h, L, ...)`` array (the standard wants the ``...``)."""
    return (*idx, rows, ...)


# |score| below this needs no shift before exp (float32 max ~3.4e38, float64 ~1.8e308): see _forward_block
NO_SHIFT_BOUND = {"float32": 30.0, "float64": 300.0}


def key_norm(xp, k):
    """``max |k_s|`` over the keys of one work item, for :func:`shift_free`; ``None`` off NumPy."""
    return float(xp.sqrt(xp.max(xp.sum(k * k, axis=-1)))) if is_numpy(xp) else None


def shift_free(xp, qs, k_norm, mask):
    """Whether every score of the block lies within ``NO_SHIFT_BOUND``: ``|q . k| <= |q| max|k|`` (Cauchy-Schwarz).

    Then exp(S) cannot overflow nor underflow a row's largest term, so the shift by the running max
    (whose only job is that) can be 0: softmax is the same for any shift. A float mask may add any
    number, so it always takes the shift. Only on NumPy (a float() here would wait for the GPU).
    """
    if k_norm is None or (mask is not None and mask.dtype != xp.bool):
        return False
    bound = NO_SHIFT_BOUND["float32" if qs.dtype == xp.float32 else "float64"]
    return float(xp.sqrt(xp.max(xp.sum(qs * qs, axis=-1)))) * k_norm <= bound
