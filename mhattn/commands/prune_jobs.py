"""``mhattn prune``'s models run side by side: one worker process per model, one BLAS thread each.

The models are independent experiments. On a small machine two single-threaded processes
use both cores for all the work, where one process with a two-thread BLAS leaves the
second core idle outside the matrix products. The numbers do not depend on the split.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from mhattn.heads.prune import PruneSettings, run_prune
from mhattn.heads.report import model_report
from mhattn.training import loop
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells, else the CPU count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def prune_one(name, settings_kw, bar_position=0):
    """One checkpoint's experiment: ``(stem, ModelReport)``.

    ``bar_position``: the terminal line of this process's progress bars.
    """
    loop.BAR_POSITION = bar_position
    model, meta = load_checkpoint(name)
    task = task_from_meta(meta["task"])
    kw = dict(settings_kw)
    kw.setdefault("eval_size", 512 if task.name == "roles" else 256)
    details = run_prune(model, task, PruneSettings(**kw))
    return Path(str(name)).stem, model_report(details)


@contextlib.contextmanager
def _blas_threads(n):
    """Environment for new worker processes: ``n`` BLAS threads each, unless the user set a number."""
    saved = {v: os.environ.get(v) for v in BLAS_THREAD_VARIABLES}
    os.environ.update({v: str(n) for v, old in saved.items() if old is None})
    try:
        yield
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)


def prune_all(names, settings_kw, jobs=1):
    """:func:`prune_one` for every checkpoint, ``jobs`` at once; returns ``{stem: result}`` in ``names`` order."""
    if jobs <= 1 or len(names) <= 1:
        return dict(prune_one(n, settings_kw) for n in names)
    jobs = min(jobs, len(names))
    with _blas_threads(max(1, available_cpus() // jobs)):
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(prune_one, n, settings_kw, i) for i, n in enumerate(names)]
            return dict(f.result() for f in futures)
