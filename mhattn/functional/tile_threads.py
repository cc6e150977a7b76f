"""Threads for the tiled attention on NumPy: one pool and one BLAS-thread controller, kept between calls.

NumPy's elementwise ops and BLAS release the GIL, so independent (batch, head) items can run
on threads at once; BLAS is held to one thread each so that the cores are not oversubscribed.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

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
    if workers == 1 or len(items) == 1:
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
    """Work items: one (b, head) pair each on NumPy; everything at once elsewhere."""
    B, h = q.shape[:2]
    if xp.__name__ == "numpy":
        return [(b, i) for b in range(B) for i in range(h)]
    return [(slice(None), slice(None))]
