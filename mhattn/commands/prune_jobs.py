"""``mhattn prune``'s models run side by side: one worker process per model, one BLAS thread each.

The models are independent experiments. On a small machine two single-threaded processes
use both cores for all the work, where one process with a two-thread BLAS leaves the
second core idle outside the matrix products. The numbers do not depend on the split.
Each worker also draws its model's attention maps, so the two figures are drawn side by side too.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from mhattn.heads.prune import PruneSettings, run_prune
from mhattn.heads.report import model_report
from mhattn.plots.pruning import FIGURES, figure_pngs  # matplotlib is imported only when a figure is drawn
from mhattn.training import loop
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells, else the CPU count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def attention_pngs(stem, model, task):
    """Per-head attention maps of one evaluation sequence: ``{file name: PNG bytes}``, one per layer."""
    from mhattn.heads.roles import attention_maps
    from mhattn.plots.attention import attention_heatmaps

    seq = task.eval_set(1)[0]
    tokens = [str(t) for t in seq[0]] if task.name == "roles" else None
    pngs = {}
    for layer, w in enumerate(attention_maps(model, seq)[:, 0]):  # (h, T, T) per layer
        buf = io.BytesIO()
        attention_heatmaps(w, tokens, title=f"{stem}, layer {layer}", ncols=6).savefig(buf, format="png", dpi=80)
        pngs[f"attention_{stem}_layer{layer}.png"] = buf.getvalue()
    return pngs


def prune_one(name, settings_kw, bar_position=0, figures=False):
    """One checkpoint's experiment: ``(stem, ModelReport, {file name: PNG bytes})``.

    ``bar_position``: the terminal line of this process's progress bars; ``figures``: also
    draw the model's attention maps (:func:`attention_pngs`; none otherwise).
    """
    loop.BAR_POSITION = bar_position
    model, meta = load_checkpoint(name)
    task = task_from_meta(meta["task"])
    kw = dict(settings_kw)
    kw.setdefault("eval_size", 512 if task.name == "roles" else 256)
    details = run_prune(model, task, PruneSettings(**kw))  # works on copies: model keeps its parameters
    stem = Path(str(name)).stem
    return stem, model_report(details), attention_pngs(stem, model, task) if figures else {}


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


def prune_all(names, settings_kw, jobs=1, figures=False):
    """:func:`prune_one` for every checkpoint, ``jobs`` at once.

    ``figures``: also draw the attention maps (in each model's worker) and the report's figures
    (:data:`mhattn.plots.pruning.FIGURES`, split over the same workers once every model is done).

    Returns:
        ``({stem: ModelReport}, {file name: PNG bytes})``, the reports in ``names`` order.
    """
    if jobs <= 1 or len(names) <= 1:
        results = [prune_one(n, settings_kw, 0, figures) for n in names]
        reports, pngs = _collect(results)
        if figures:
            pngs.update(figure_pngs({n: r.details for n, r in reports.items()}))
        return reports, pngs
    jobs = min(jobs, len(names))
    with _blas_threads(max(1, available_cpus() // jobs)):
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(prune_one, n, settings_kw, i, figures) for i, n in enumerate(names)]
            reports, pngs = _collect([f.result() for f in futures])
            if figures:
                details, parts = {n: r.details for n, r in reports.items()}, list(FIGURES)
                for drawn in pool.map(figure_pngs, [details] * jobs, [parts[i::jobs] for i in range(jobs)]):
                    pngs.update(drawn)
    return reports, pngs


def _collect(results):
    """``[(stem, report, pngs)]`` -> ``({stem: report}, {file name: PNG bytes})``."""
    return {stem: report for stem, report, _ in results}, {f: png for *_, pngs in results for f, png in pngs.items()}
