"""The prune experiment of many models, run side by side in worker processes with one BLAS thread each.

What ``mhattn prune`` and notebook 07 run (:func:`run`, :func:`prune_all`), and the one place that turns the
command's options into :class:`~mhattn.heads.prune.PruneSettings` (:func:`settings_for`).

The models are independent experiments, and each model's gate experiment is independent of its
other measurements, so every model is two tasks. On a small machine two single-threaded processes
use both cores for all the work, where one process with a two-thread BLAS leaves the second core
idle outside the matrix products. The numbers do not depend on the split. The drawings are tasks
of the same pool, so a worker that finishes early draws them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from dataclasses import replace
from pathlib import Path

from mhattn.heads.prune import PruneSettings, gate_experiment, run_prune
from mhattn.heads.report import ModelReport, model_report
from mhattn.kernels import pool
from mhattn.plots.png import png_bytes
from mhattn.plots.pruning import FIGURES, figure_pngs  # matplotlib is imported only when a figure is drawn
from mhattn.training import loop
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus() -> int:
    """CPUs this process may run on: the engine's count (:func:`mhattn.kernels.pool.available_cpus`), which also
    bounds its thread pool."""
    return pool.available_cpus()


def attention_pngs(name):
    """Per-head attention maps of one evaluation sequence of checkpoint ``name``: ``{file name: PNG bytes}``,
    one per layer."""
    from mhattn.heads.roles import attention_maps
    from mhattn.plots.attention import attention_heatmaps

    model, task, stem = _load(name)
    seq = task.eval_set(1)[0]
    tokens = [str(t) for t in seq[0]] if task.name == "roles" else None
    pngs = {}
    for layer, w in enumerate(attention_maps(model, seq)[:, 0]):  # (h, T, T) per layer
        fig = attention_heatmaps(w, tokens, title=f"{stem}, layer {layer}", ncols=6)
        pngs[f"attention_{stem}_layer{layer}.png"] = png_bytes(fig, dpi=80)
    return pngs


def _load(name):
    """``(model, task, stem)`` of checkpoint ``name``; ``stem`` keys its report and names its files."""
    model, meta = load_checkpoint(name)
    return model, task_from_meta(meta["task"]), Path(str(name)).stem


def settings_for(task, settings_kw):
    """``PruneSettings`` from the command's options, with the task's evaluation-set size unless given
    (512 roles sequences, 256 text windows)."""
    return PruneSettings(**{"eval_size": 512 if task.name == "roles" else 256, **settings_kw})


def job_stem(name, settings_kw) -> str:
    """The key of one experiment in the report: the checkpoint's file name without suffix, and ``-layer<l>`` when
    heads are removed from layer ``l`` only."""
    stem = Path(str(name)).stem
    return stem if settings_kw.get("layer") is None else f"{stem}-layer{settings_kw['layer']}"


def expand(names, settings_kw):
    """``[(name, settings_kw)]``, one experiment each: ``layer="each"`` becomes one experiment per layer of the model."""
    if settings_kw.get("layer") != "each":
        return [(n, settings_kw) for n in names]
    return [(n, {**settings_kw, "layer": layer}) for n in names for layer in range(load_checkpoint(n)[0].cfg.num_layers)]


def measure_one(name, settings_kw):
    """Every measurement of checkpoint ``name`` but the gates, the three levels of freezing included:
    ``(stem, details)`` (:func:`run_prune`, :func:`job_stem`)."""
    model, task, _ = _load(name)
    s = settings_for(task, settings_kw)
    return job_stem(name, settings_kw), run_prune(model, task, s, gates=False, direct=True)  # works on copies


def gates_one(name, settings_kw):
    """The gate experiment of checkpoint ``name`` (:func:`gate_experiment`), ``None`` with 0 gate steps."""
    model, task, _ = _load(name)
    s = settings_for(task, settings_kw)
    return gate_experiment(model, task, s) if s.gate_steps else None


def with_gates(report: ModelReport, gates) -> ModelReport:
    """``report`` with :func:`gates_one`'s result added to its details (nothing else in a report reads the
    gates, so the report of the measurements alone is drawn before the gates are trained)."""
    return report if gates is None else replace(report, details={**report.details, "gates": gates})


def _init_worker(positions):
    """Pool initializer: this worker's terminal line for its progress bars (one line per worker), and a
    thread lock for tqdm. tqdm's default lock holds a named semaphore, made in the worker with its first
    bar; a worker terminated on an error or Ctrl-C cannot release it, and the resource tracker then warns
    about a "leaked semaphore" at exit (python/cpython#122770). A worker's bars need no lock across
    processes: each worker writes its own line."""
    loop.BAR_POSITION = positions.get()
    try:
        from tqdm import tqdm
    except ImportError:  # no bars without tqdm (the course extra)
        return
    tqdm.set_lock(threading.RLock())


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


def run(names, settings_kw, jobs=1):
    """Run the experiment for each checkpoint in ``jobs`` worker processes (:func:`prune_all`, no figures).

    Returns:
        ``{stem: ModelReport}`` (each checkpoint's file name without suffix) in ``names`` order.
    """
    return prune_all(names, settings_kw, jobs)[0]


def prune_all(names, settings_kw, jobs=1, figures=False):
    """The experiment for every checkpoint (every layer of it with ``settings_kw["layer"] == "each"``, :func:`expand`),
    ``jobs`` worker processes at once.

    Each model's measurements (:func:`measure_one`) and its gates (:func:`gates_one`, the longest single
    step) are separate tasks, queued in that order, so a worker that finishes early takes the next one.
    ``figures``: also draw each model's attention maps (:func:`attention_pngs`, queued behind the
    experiments) and the report's figures (:data:`mhattn.plots.pruning.FIGURES`, one task each, queued
    once every model's measurements are done: no figure shows the gates).

    Returns:
        ``({stem: ModelReport}, {file name: PNG bytes})``, the reports in ``names`` order.
    """
    entries, names = expand(names, settings_kw), list(dict.fromkeys(names))
    if jobs <= 1:
        reports, pngs = {}, {}
        for n, kw in entries:
            stem, r = _measured_report(measure_one(n, kw))
            reports[stem] = with_gates(r, gates_one(n, kw))
        if figures:
            pngs = {f: png for n in names for f, png in attention_pngs(n).items()}
            pngs.update(figure_pngs({n: r.figure_data() for n, r in reports.items()}))
        return reports, pngs
    with worker_pool(min(jobs, 2 * len(entries))) as pool:  # two tasks per experiment
        measured = [pool.apply_async(measure_one, (n, kw)) for n, kw in entries]
        gates = [pool.apply_async(gates_one, (n, kw)) for n, kw in entries]
        maps = [pool.apply_async(attention_pngs, (n,)) for n in names] if figures else []
        _wait_all(measured, watch=gates)
        # the report's figures need no gates: queued now, a worker whose gates finish first draws them
        reports = dict(_measured_report(m.get()) for m in measured)
        data = {n: r.figure_data() for n, r in reports.items()}
        drawn = [pool.apply_async(figure_pngs, (data, [part])) for part in FIGURES] if figures else []
        _wait_all(gates, watch=maps + drawn)
        reports = {stem: with_gates(r, g.get()) for (stem, r), g in zip(reports.items(), gates, strict=True)}
        _wait_all(maps + drawn)
        pngs = {f: png for task in maps + drawn for f, png in task.get().items()}
    return reports, pngs


def _measured_report(measured):
    """``(stem, ModelReport)`` from :func:`measure_one`'s result (no gates yet: :func:`with_gates`)."""
    stem, details = measured
    return stem, model_report(details)


@contextlib.contextmanager
def worker_pool(jobs):
    """A ``multiprocessing`` pool of ``jobs`` spawned workers, each with ``available_cpus() // jobs`` BLAS
    threads (unless the user set a number) and its own progress-bar line (:func:`_init_worker`).

    Leaving the block normally closes the pool and waits for its idle workers; leaving it on an error or
    Ctrl-C terminates them, which stops every queued task at once.
    """
    ctx = multiprocessing.get_context("spawn")
    positions = ctx.SimpleQueue()
    for i in range(jobs):
        positions.put(i)
    with _blas_threads(max(1, available_cpus() // jobs)):
        with ctx.Pool(jobs, initializer=_init_worker, initargs=(positions,)) as pool:
            yield pool
            pool.close()
            pool.join()


def _wait_all(tasks, watch=(), poll=0.1):
    """Wait until every ``multiprocessing`` async result in ``tasks`` is ready; re-raise the first error of
    ``tasks`` or ``watch`` as soon as one fails, not after the tasks queued before it."""
    pending, watched = list(tasks), list(watch)
    while pending:
        pending[0].wait(poll)
        for task in [t for t in pending + watched if t.ready()]:
            task.get()  # raises the task's exception
            (pending if task in pending else watched).remove(task)
