"""The main experiment: remove heads and watch the loss (Michel et al. 2019, Voita et al. 2019).

:func:`run_prune` measures, on a fixed evaluation set, every quantity that ``mhattn prune``
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
    curve_orders: int = 3  # random removal orders averaged in the pruning curve (notebook 07's setting)
    finetune_steps: int = 100  # brief fine-tuning after pruning (re-learning); benchmarks/finetune_convergence.py
    gate_steps: int = 200  # hard-concrete gate training steps (0 skips); benchmarks/gate_convergence.py
    l0_lambda: float = 0.05  # L0 penalty weight
    seed: int = 0


def _mask(L, h, removed):
    """``(L, h)`` ones with zeros at the flat indices ``removed``."""
    m = np.ones(L * h)
    m[list(removed)] = 0.0
    return m.reshape(L, h)


def _copy(model):
    """A model with its own parameter arrays (optimisers update arrays in place)."""
    return TransformerModel(model.cfg, params={n: array_namespace(p).asarray(p, copy=True) for n, p in model.params.items()})


def random_removals(model, data, base, n_remove, n_random, rng, evaluator=None):
    """Loss/accuracy change for ``n_random`` random subsets of ``n_remove`` heads, and the loss change with the
    surviving heads' outputs frozen (``frozen_dloss``: :meth:`HeadMaskEvaluator.evaluate` with ``frozen=True``).

    ``evaluator``: a :class:`HeadMaskEvaluator` of ``model`` on ``data`` to reuse (built otherwise).
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    ev = evaluator or HeadMaskEvaluator(model, *data)
    subsets, dloss, dacc, frozen = [], [], [], []
    bar = progress_bar(n_random, None, desc="random subsets", unit="subset")
    for _ in range(n_random):
        removed = sorted(rng.choice(L * h, size=n_remove, replace=False).tolist())
        mask = _mask(L, h, removed)
        r = ev.evaluate(mask)
        subsets.append(removed)
        dloss.append(r["loss"] - base["loss"])
        dacc.append(r["acc"] - base["acc"])
        frozen.append(ev.evaluate(mask, frozen=True)["loss"] - base["loss"])
        bar.update()
    bar.close()
    return {"subsets": subsets, "dloss": dloss, "dacc": dacc, "frozen_dloss": frozen}


def michel_iterative(model, data, n_remove, step=1, start=(), evaluator=None):
    """Remove the least important heads ``step`` at a time, re-scoring importance after each removal.

    Each re-scoring takes ``E|∂L/∂ξ|`` with the removed heads' ξ at 0 and normalises each layer by its ℓ2 norm
    over all of its heads, the removed ones included (their gradient at ξ = 0 is not zero); removed heads are
    then left out of the choice. That is the order of HuggingFace's ``run_bertology.py`` (``mask_heads``:
    importance with the head mask applied, normalised by layer, removed heads set to infinity), the public
    implementation of Michel et al. 2019 (§4.2); the paper does not say whether removed heads count in the norm.

    ``evaluator``: a :class:`HeadMaskEvaluator` of ``model`` on ``data`` to reuse (built otherwise);
    it remembers the importances it has computed, so a removal order met again costs nothing.

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
        removed += np.argsort(flat, kind="stable")[: min(step, n_remove - len(removed))].tolist()
    return removed


def pruning_curve(model, data, base, orders, rng, evaluator=None):
    """Loss after removing 0%, 10%, ..., 100% of the heads: by importance (Michel, re-scored) and at random.

    ``base`` (the unpruned model's :func:`masked_eval` on ``data``) is the 0% point of both curves;
    ``evaluator``: a :class:`HeadMaskEvaluator` of ``model`` on ``data`` to reuse (built otherwise).
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    H = L * h
    ev = evaluator or HeadMaskEvaluator(model, *data)
    counts = sorted({int(round(f * H)) for f in np.linspace(0.0, 1.0, 11)})
    bar = progress_bar(2 * len(counts), None, desc="pruning curve", unit="point")
    by_imp, removed = [], []
    for k in counts:
        removed = michel_iterative(model, data, k, step=k - len(removed), start=removed, evaluator=ev) if k else []
        by_imp.append(ev.evaluate(_mask(L, h, removed)) if k else base)
        bar.update()
    perms = [rng.permutation(H) for _ in range(orders)]
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
    tuned, _ = train(task, None, model=_copy(model), head_mask=mask, steps=steps, lr=1e-3, seed=seed, progress=None)
    after = masked_eval(tuned, *data, mask)
    lost = before["loss"] - base["loss"]
    return {"removed": list(removed), "steps": steps, "loss_pruned": before["loss"], "loss_after_finetune": after["loss"],
            "acc_pruned": before["acc"], "acc_after_finetune": after["acc"],
            "recovered_fraction": float((before["loss"] - after["loss"]) / lost) if lost > 1e-9 and steps else None}  # fmt: skip


def gate_experiment(model, task, s: PruneSettings):
    """Pruning by training (Voita et al. 2019, §6): hard-concrete gates trained on a copy of ``model`` for
    ``s.gate_steps`` steps; the ``gates`` entry of :func:`run_prune`."""
    g = train_gates(_copy(model), task, l0_lambda=s.l0_lambda, steps=s.gate_steps, seed=s.seed, progress=None)
    return {"lambda": s.l0_lambda, "steps": s.gate_steps, "values": g["gates"].tolist(), "open": g["open"]}


def removed_together(model, data, importance, single_dloss, n_remove, evaluator=None):
    """Four chosen subsets of ``n_remove`` heads, each removed at once: the least and the most important
    (``importance``, normalised Michel scores), the lowest single-ablation costs (``single_dloss``) and
    :func:`michel_iterative`'s order.

    Returns:
        ``{"least_important" | "most_important" | "lowest_single_ablation" | "michel_iterative":
        {"removed": flat head indices, "loss", "acc"}}``, in that order.
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    ev = evaluator or HeadMaskEvaluator(model, *data)
    order = np.argsort(np.ravel(importance), kind="stable")
    chosen = {
        "least_important": order[:n_remove].tolist(),
        "most_important": order[::-1][:n_remove].tolist(),
        "lowest_single_ablation": np.argsort(np.ravel(single_dloss), kind="stable")[:n_remove].tolist(),
        "michel_iterative": michel_iterative(model, data, n_remove, evaluator=ev),
    }
    return {name: {"removed": removed, **ev.evaluate(_mask(L, h, removed))} for name, removed in chosen.items()}


def run_prune(model, task, settings: PruneSettings | None = None, *, gates=True):
    """Every measurement of the pruning report for one model (see :mod:`mhattn.heads.answers`).

    ``gates``: also run :func:`gate_experiment` when ``settings.gate_steps`` > 0 (``mhattn prune`` runs it
    as a task of its own and adds it to the returned dict under ``gates``).
    """
    s = settings or PruneSettings()
    rng = np.random.default_rng(s.seed)
    L, h = model.cfg.num_layers, model.cfg.num_heads
    data = task.eval_set(s.eval_size)
    ev = HeadMaskEvaluator(model, *data)  # everything before the head mask, once
    base = ev.evaluate()
    raw = ev.importance_grads()
    imp = normalise_importance(raw)
    zero_dl, zero_da = ablation_deltas(model, *data, mode="zero", evaluator=ev)
    mean_dl, _ = ablation_deltas(model, *data, mode="mean", evaluator=ev)
    frozen_dl, _ = ablation_deltas(model, *data, mode="zero", evaluator=ev, frozen=True)
    rand = random_removals(model, data, base, s.n_remove, s.n_random, rng, evaluator=ev)
    chosen = removed_together(model, data, imp, zero_dl, s.n_remove, evaluator=ev)
    median_subset = rand["subsets"][int(np.argsort(rand["dloss"])[len(rand["dloss"]) // 2])]
    weights = attention_maps(model, data[0][:256])
    roles = detect_roles(weights, data[0][:256], task.rarity())
    out = {
        "settings": asdict(s), "num_layers": L, "num_heads": h, "baseline": base,
        "importance": imp.tolist(), "importance_raw": raw.tolist(),
        "ablation_zero_dloss": zero_dl.tolist(), "ablation_zero_dacc": zero_da.tolist(), "ablation_mean_dloss": mean_dl.tolist(),
        "ablation_frozen_dloss": frozen_dl.tolist(),
        "spearman_importance_vs_zero_ablation": spearman(imp, zero_dl),
        "spearman_importance_vs_mean_ablation": spearman(imp, mean_dl),
        "random": rand, **chosen,
        "curve": pruning_curve(model, data, base, s.curve_orders, rng, evaluator=ev),
        "finetune": finetune_recovery(model, task, data, base, median_subset, s.finetune_steps, s.seed, evaluator=ev),
        "similarity": head_similarity(model, data[0][:256], weights),
        "roles": roles,
    }  # fmt: skip
    if task.name == "roles":
        out["planted_roles"] = planted_match(roles)
    if gates and s.gate_steps:
        out["gates"] = gate_experiment(model, task, s)
    return out
