"""``mhattn prune``'s main job: :mod:`mhattn.heads.sixes` for every layer of each checkpoint, on the machine's cores.

The layers of one model share one :class:`~mhattn.heads.mask_eval.HeadMaskEvaluator` (the forward below each head
mask is computed once) and are measured side by side in ``jobs`` threads, each with one BLAS thread (NumPy and BLAS
release the GIL for the work that counts), the costliest layer (the first: every block after it runs again) first.
The numbers do not depend on ``jobs``: each evaluation is the same sequence of calls on the same arrays.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from threadpoolctl import threadpool_limits

from mhattn.heads.sixes import SixesSettings, evaluator_for, header, measure_layer, subsets_count
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.loop import progress_bar
from mhattn.training.tasks import task_from_meta


def run_sixes(names, settings: SixesSettings | None = None, jobs: int = 2, progress: bool = True) -> dict:
    """Measure every layer of each checkpoint in ``names`` (:func:`mhattn.heads.sixes.measure_layer`).

    Args:
        names: shipped checkpoint names or files; settings: :class:`SixesSettings` (default: the course's);
        jobs: threads at once (1: one after another); progress: show a bar on stderr.

    Returns:
        ``{stem: measurement}`` in ``names`` order, each :func:`~mhattn.heads.sixes.header` with ``layers``.
    """
    s = settings or SixesSettings()
    models = {Path(str(n)).stem: load_checkpoint(n) for n in names}
    work = [(stem, layer) for stem, (m, _) in models.items() for layer in range(m.cfg.num_layers)]
    total = sum(subsets_count(m.cfg.num_heads, s.n_remove, s.n_subsets) for m, _ in models.values()
                for _ in range(m.cfg.num_layers))  # fmt: skip
    bar = progress_bar(total, "text" if progress else False, desc="sixes evaluated", unit="subset")
    lock = threading.Lock()

    def tick():
        with lock:
            bar.update()

    out, cache = {}, {}
    with threadpool_limits(1):  # one BLAS thread per worker thread
        for stem, (model, meta) in models.items():
            task = task_from_meta(meta["task"])
            ev, means = evaluator_for(model, task, s)
            cache[stem] = (model, ev, means)
            out[stem] = header(model, task, s, ev)
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            futures = {key: pool.submit(measure_layer, *cache[key[0]][:2], key[1], s, cache[key[0]][2], tick)
                       for key in work}  # fmt: skip
            results = {key: f.result() for key, f in futures.items()}
    bar.close()
    for (stem, _), r in results.items():
        out[stem].setdefault("layers", []).append(r)
    return out
