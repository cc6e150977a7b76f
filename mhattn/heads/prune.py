"""The main experiment: remove heads and watch the loss (Michel et al. 2019, Voita et al. 2019).

:func:`run_prune` measures, on a fixed evaluation set, every quantity that ``mhattn prune`` (up to report version 4)
reports; :mod:`mhattn.heads.answers` turns them into the three answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from mhattn.backend import array_namespace
from mhattn.heads.gates import train_gates
from mhattn.heads.importance import ablation_deltas, masked_eval, normalise_importance, spearman
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.redundancy import head_similarity
from mhattn.heads.roles import attention_maps, detect_roles, planted_match
from mhattn.nn.transformer import TransformerModel
from mhattn.training.loop import progress_bar, train


@dataclass
class PruneSettings:
    n_remove: int = 6  # heads removed at once (from all L*h heads)
    n_random: int = 100  # random subsets of n_remove heads; benchmarks/random_subset_precision.py
    eval_size: int = 512  # sequences in the fixed evaluation set
    curve_orders: int = 3  # random removal orders averaged in the pruning curve (notebook 06's setting)
    finetune_steps: int = 100  # brief fine-tuning after pruning (re-learning); benchmarks/finetune_convergence.py
    gate_steps: int = 200  # hard-concrete gate training steps (0 skips); benchmarks/gate_convergence.py
    l0_lambda: float = 0.05  # L0 penalty weight
    seed: int = 0
    layer: int | None = None  # remove heads of this layer only (the question as asked: 6 of one layer's 12); None: any


def head_pool(L, h, layer=None):
    """The flat head indices a removal draws from: all ``L*h``, or layer ``layer``'s ``h``.

    Raises:
        ValueError: ``layer`` is not ``None`` or an integer in ``0..L-1``.
    """
    if layer is None:
        return list(range(L * h))
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < L:
        raise ValueError(f"layer must be None or an integer from 0 to {L - 1}, got {layer!r}")
    return list(range(layer * h, (layer + 1) * h))


def _mask(L, h, removed):
    """``(L, h)`` ones with zeros at the flat indices ``removed``."""
    m = np.ones(L * h)
    m[list(removed)] = 0.0
    return m.reshape(L, h)


def copy_model(model):
    """A :class:`~mhattn.nn.transformer.TransformerModel` like ``model`` with its own parameter arrays (copies, same
    namespace and device), so that training it (optimisers update arrays in place) leaves ``model`` as it was."""
    return TransformerModel(model.cfg, params={n: array_namespace(p).asarray(p, copy=True) for n, p in model.params.items()})


def random_removals(model, data, base, n_remove, n_random, rng, evaluator=None, pool=None, direct=False):
    """Loss/accuracy change for ``n_random`` random subsets of ``n_remove`` heads, and the loss change with the
    surviving heads' outputs frozen (``frozen_dloss``: :meth:`HeadMaskEvaluator.evaluate` with ``frozen=True``).

    ``evaluator``: a :class:`HeadMaskEvaluator` of ``model`` on ``data`` to reuse (built otherwise);
    ``pool``: the flat head indices to draw from (:func:`head_pool`; default all).
    ``direct``: also the accuracy change with the survivors frozen (``frozen_dacc``) and the direct effect
    (``direct_dloss``, ``direct_dacc``: ``effect="direct"``, everything downstream of the removed heads frozen), so
    that each subset carries the three levels of :mod:`mhattn.heads.effects` in loss and accuracy.
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    ev = evaluator or HeadMaskEvaluator(model, *data)
    pool = np.asarray(head_pool(L, h) if pool is None else pool)
    extra = ("frozen_dacc", "direct_dloss", "direct_dacc") if direct else ()
    out = {k: [] for k in ("subsets", "dloss", "dacc", "frozen_dloss", *extra)}
    levels = (("frozen", "heads-only"), ("direct", "direct")) if direct else (("frozen", "heads-only"),)
    bar = progress_bar(n_random, None, desc="random subsets", unit="subset")
    for _ in range(n_random):
        removed = sorted(rng.choice(pool, size=n_remove, replace=False).tolist())
        mask = _mask(L, h, removed)
        r = ev.evaluate(mask)
        out["subsets"].append(removed)
        out["dloss"].append(r["loss"] - base["loss"])
        out["dacc"].append(r["acc"] - base["acc"])
        for prefix, level in levels:
            r = ev.evaluate(mask, effect=level)
            out[f"{prefix}_dloss"].append(r["loss"] - base["loss"])
            if direct:
                out[f"{prefix}_dacc"].append(r["acc"] - base["acc"])
        bar.update()
    bar.close()
    return out


def michel_iterative(model, data, n_remove, step=1, start=(), evaluator=None, pool=None):
    """Remove the least important heads ``step`` at a time, re-scoring importance after each removal.

    Each re-scoring takes ``E|∂L/∂ξ|`` with the removed heads' ξ at 0 and normalises each layer by its ℓ2 norm
    over all of its heads, the removed ones included (their gradient at ξ = 0 is not zero); removed heads are
    then left out of the choice. That is the order of HuggingFace's ``run_bertology.py`` (``mask_heads``:
    importance with the head mask applied, normalised by layer, removed heads set to infinity), the public
    implementation of Michel et al. 2019 (§4.2); the paper does not say whether removed heads count in the norm.
    With ``step`` 10% of the heads this is Michel et al.'s iterative pruning (§4.2, :func:`pruning_curve`); with
    ``step=1``, one head at a time, it is what the course calls *one-at-a-time pruning* (the ``michel_iterative``
    choice of :func:`run_prune`).

    ``evaluator``: a :class:`HeadMaskEvaluator` of ``model`` on ``data`` to reuse (built otherwise);
    it remembers the importances it has computed, so a removal order met again costs nothing. ``pool``: the flat
    head indices that may be removed (:func:`head_pool`; default all).

    Returns:
        The flat indices removed, in order.
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    ev = evaluator or HeadMaskEvaluator(model, *data)
    removed = list(start)
    while len(removed) < n_remove:
        imp = normalise_importance(ev.importance_grads(_mask(L, h, removed)))
        flat = imp.ravel().copy()
        flat[removed] = np.inf
        if pool is not None:
            flat[np.setdiff1d(np.arange(L * h), pool)] = np.inf
        removed += np.argsort(flat, kind="stable")[: min(step, n_remove - len(removed))].tolist()
    return removed


def pruning_curve(model, data, base, orders, rng, evaluator=None, pool=None):
    """Loss after removing 0%, 10%, ..., 100% of the heads: by importance (Michel, re-scored) and at random.

    ``base`` (the unpruned model's :func:`masked_eval` on ``data``) is the 0% point of both curves;
    ``evaluator``: a :class:`HeadMaskEvaluator` of ``model`` on ``data`` to reuse (built otherwise); ``pool``: the
    flat head indices removed (:func:`head_pool`; default all), the fractions are of the pool.
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    pool = np.asarray(head_pool(L, h) if pool is None else pool)
    H = len(pool)
    ev = evaluator or HeadMaskEvaluator(model, *data)
    counts = sorted({int(round(f * H)) for f in np.linspace(0.0, 1.0, 11)})
    bar = progress_bar(2 * len(counts), None, desc="pruning curve", unit="point")
    by_imp, removed = [], []
    for k in counts:
        removed = michel_iterative(model, data, k, step=k - len(removed), start=removed, evaluator=ev, pool=pool) if k else []
        by_imp.append(ev.evaluate(_mask(L, h, removed)) if k else base)
        bar.update()
    perms = [rng.permutation(pool) for _ in range(orders)]
    rand = []
    for k in counts:
        rand.append([ev.evaluate(_mask(L, h, p[:k])) if k else base for p in perms])
        bar.update()
    bar.close()
    return {
        "fraction_removed": [k / H for k in counts],
        "importance_loss": [r["loss"] for r in by_imp],
        "importance_acc": [r["acc"] for r in by_imp],
        "random_loss": [float(np.mean([r["loss"] for r in rs])) for rs in rand],
        "random_acc": [float(np.mean([r["acc"] for r in rs])) for rs in rand],
    }


def finetune_recovery(model, task, data, base, removed, steps, seed, evaluator=None):
    """Prune ``removed``, fine-tune a copy of the rest briefly, report how much of the loss increase comes back
    (``recovered_fraction`` is ``None`` when nothing was lost or ``steps`` is 0)."""
    L, h = model.cfg.num_layers, model.cfg.num_heads
    mask = _mask(L, h, removed)
    before = (evaluator or HeadMaskEvaluator(model, *data)).evaluate(mask)
    tuned, _ = train(task, None, model=copy_model(model), head_mask=mask, steps=steps, lr=1e-3, seed=seed, progress=None)
    after = masked_eval(tuned, *data, mask)
    lost = before["loss"] - base["loss"]
    return {"removed": list(removed), "steps": steps, "loss_pruned": before["loss"], "loss_after_finetune": after["loss"],
            "acc_pruned": before["acc"], "acc_after_finetune": after["acc"],
            "recovered_fraction": float((before["loss"] - after["loss"]) / lost) if lost > 1e-9 and steps else None}  # fmt: skip


def gate_experiment(model, task, s: PruneSettings):
    """Pruning by training (Voita et al. 2019, §6): hard-concrete gates trained on a copy of ``model`` for
    ``s.gate_steps`` steps; the ``gates`` entry of :func:`run_prune`."""
    g = train_gates(copy_model(model), task, l0_lambda=s.l0_lambda, steps=s.gate_steps, seed=s.seed, progress=None)
    return {"lambda": s.l0_lambda, "steps": s.gate_steps, "values": g["gates"].tolist(), "open": g["open"]}


def run_prune(model, task, settings: PruneSettings | None = None, *, gates=True, evaluator=None, direct=False):
    """Every measurement of the pruning report for one model (see :mod:`mhattn.heads.answers`).

    ``gates``: also run :func:`gate_experiment` when ``settings.gate_steps`` > 0 (``mhattn prune`` runs it
    as a task of its own and adds it to the returned dict under ``gates``). ``evaluator``: a
    :class:`HeadMaskEvaluator` of ``model`` on ``task.eval_set(settings.eval_size)`` to reuse (several layers of one
    model share one; built otherwise). With ``settings.layer`` set, heads are removed from that layer only and the
    result describes that layer's heads alone (:func:`layer_view`).
    ``direct``: also measure the direct effect (:mod:`mhattn.heads.effects`) and the accuracy with the survivors
    frozen: ``ablation_direct_dloss``/``_dacc`` and ``ablation_frozen_dacc`` (one head at a time), and in ``random``
    ``frozen_dacc``, ``direct_dloss`` and ``direct_dacc`` (:func:`random_removals`); without it those keys are absent.
    """
    s = settings or PruneSettings()
    rng = np.random.default_rng(s.seed)
    L, h = model.cfg.num_layers, model.cfg.num_heads
    pool = head_pool(L, h, s.layer)
    data = task.eval_set(s.eval_size)
    ev = evaluator or HeadMaskEvaluator(model, *data)  # everything before the head mask, once
    base = ev.evaluate()
    out = {"settings": asdict(s), "num_layers": L, "num_heads": h, "baseline": base, **_single_heads(model, data, ev, direct)}
    out["random"] = random_removals(model, data, base, s.n_remove, s.n_random, rng, evaluator=ev, pool=pool, direct=direct)
    out.update(_chosen_removals(model, data, ev, out, s.n_remove, pool))
    out["curve"] = pruning_curve(model, data, base, s.curve_orders, rng, evaluator=ev, pool=pool)
    rand = out["random"]
    median_subset = rand["subsets"][int(np.argsort(rand["dloss"])[len(rand["dloss"]) // 2])]
    out["finetune"] = finetune_recovery(model, task, data, base, median_subset, s.finetune_steps, s.seed, evaluator=ev)
    weights = attention_maps(model, data[0][:256])
    out["similarity"] = head_similarity(model, data[0][:256], weights)
    out["roles"] = detect_roles(weights, data[0][:256], task.rarity())
    if task.name == "roles":
        out["planted_roles"] = planted_match(out["roles"])
    if gates and s.gate_steps:
        out["gates"] = gate_experiment(model, task, s)
    return out if s.layer is None else layer_view(out, s.layer)


def _single_heads(model, data, ev, direct=False):
    """Importance and every single-head ablation (zero, mean, zero with the other heads frozen and, with ``direct``,
    zero as a direct effect), ``(L, h)`` each."""
    raw = ev.importance_grads()
    imp = normalise_importance(raw)
    zero_dl, zero_da = ablation_deltas(model, *data, mode="zero", evaluator=ev)
    mean_dl, _ = ablation_deltas(model, *data, mode="mean", evaluator=ev)
    frozen_dl, frozen_da = ablation_deltas(model, *data, mode="zero", evaluator=ev, frozen=True)
    out = {
        "importance": imp.tolist(), "importance_raw": raw.tolist(), "ablation_zero_dloss": zero_dl.tolist(),
        "ablation_zero_dacc": zero_da.tolist(), "ablation_mean_dloss": mean_dl.tolist(),
        "ablation_frozen_dloss": frozen_dl.tolist(), "spearman_importance_vs_zero_ablation": spearman(imp, zero_dl),
        "spearman_importance_vs_mean_ablation": spearman(imp, mean_dl),
    }  # fmt: skip
    if direct:
        direct_dl, direct_da = ablation_deltas(model, *data, mode="zero", evaluator=ev, effect="direct")
        out.update(ablation_frozen_dacc=frozen_da.tolist(), ablation_direct_dloss=direct_dl.tolist(),
                   ablation_direct_dacc=direct_da.tolist())  # fmt: skip
    return out


def _chosen_removals(model, data, ev, out, n, pool):
    """The ``n`` heads of ``pool`` removed by choice: least and most important, lowest single costs, one-at-a-time
    pruning (``michel_iterative``, step 1)."""
    L, h = model.cfg.num_layers, model.cfg.num_heads
    pool = np.asarray(pool)
    imp, zero = np.ravel(out["importance"])[pool], np.ravel(out["ablation_zero_dloss"])[pool]
    order = pool[np.argsort(imp, kind="stable")]
    chosen = {"least_important": order[:n], "most_important": order[::-1][:n],
              "lowest_single_ablation": pool[np.argsort(zero, kind="stable")[:n]],
              "michel_iterative": michel_iterative(model, data, n, evaluator=ev, pool=pool)}  # fmt: skip
    return {key: {"removed": [int(i) for i in r], **ev.evaluate(_mask(L, h, r))} for key, r in chosen.items()}


DIRECT_SINGLES = ("ablation_frozen_dacc", "ablation_direct_dloss", "ablation_direct_dacc")


def layer_view(details, layer):
    """:func:`run_prune`'s ``details`` for removals from one layer, as a one-layer model of that layer's ``h`` heads:
    per-head arrays ``(1, h)``, head indices ``0..h-1`` within the layer, ``layer`` and ``model_num_layers`` added.
    Every downstream layer stays in the model; only the bookkeeping is the layer's."""
    h, L = details["num_heads"], details["num_layers"]
    local = lambda idx: [int(i) - layer * h for i in idx]  # noqa: E731
    row = lambda key: [list(np.asarray(details[key], dtype=float).reshape(L, h)[layer])]  # noqa: E731
    out = {**details, "num_layers": 1, "layer": layer, "model_num_layers": L}
    for key in ("importance", "importance_raw", "ablation_zero_dloss", "ablation_zero_dacc", "ablation_mean_dloss",
                "ablation_frozen_dloss", *(k for k in DIRECT_SINGLES if k in details)):  # fmt: skip
        out[key] = row(key)
    out["spearman_importance_vs_zero_ablation"] = spearman(out["importance"], out["ablation_zero_dloss"])
    out["spearman_importance_vs_mean_ablation"] = spearman(out["importance"], out["ablation_mean_dloss"])
    out["random"] = {**details["random"], "subsets": [local(sub) for sub in details["random"]["subsets"]]}
    for key in ("least_important", "most_important", "lowest_single_ablation", "michel_iterative", "finetune"):
        out[key] = {**details[key], "removed": local(details[key]["removed"])}
    out["similarity"] = {key: [v[layer]] for key, v in details["similarity"].items()}
    out["roles"] = [r for r in details["roles"] if r["layer"] == layer]
    return out
