"""How much the loss needs each head: Michel et al. 2019's importance and single-head ablation.

Importance (Michel et al. 2019, §4.1 "Head Importance Score for Pruning"): ``I_h = E_x |∂L(x)/∂ξ_h|`` at
ξ = 1, with L(x) the loss of one sequence; normalised per layer by its ℓ2 norm (the same section). Ablation: the loss change
when one head's output is replaced by zeros (ξ_h = 0) or by its mean over the data.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import to_numpy
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.training.loop import evaluate, multi_loss


def masked_eval(model, ids, targets, head_mask=None, params=None):
    """:func:`~mhattn.training.loop.evaluate` with a ``(L, h)`` head mask (and, optionally, other parameters)."""
    if params is None:
        return evaluate(model, ids, targets, head_mask=head_mask)
    saved, model.params = model.params, params
    try:
        return evaluate(model, ids, targets, head_mask=head_mask)
    finally:
        model.params = saved


def head_importance(model, ids, targets, head_mask=None, batch_size=256):
    """Michel's head importance.

    Args:
        ids: ``(N, T)``; targets: K arrays ``(N, T)``; head_mask: ``(L, h)`` (pruned heads = 0), default all ones.

    Returns:
        ``(normalised, raw)``, both ``(L, h)``: raw ``E_x |∂L(x)/∂ξ_h|`` and the same divided
        by each layer's ℓ2 norm.
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    base = np.ones((L, h)) if head_mask is None else to_numpy(head_mask).astype(float)
    total = np.zeros((L, h))
    for s in range(0, ids.shape[0], batch_size):
        b = min(batch_size, ids.shape[0] - s)
        xi = model.place(np.repeat(base[:, None, :], b, axis=1), dtype="params")  # (L, b, h) one ξ per sequence
        logits, _ = model.forward(model.place(ids[s : s + batch_size, ...]), head_mask=xi)
        _, dlogits = multi_loss(logits, tuple(model.place(t[s : s + batch_size, ...]) for t in targets))
        model.backward(dlogits)
        total += np.abs(to_numpy(model.head_mask_grad) * b).sum(axis=1)  # batch mean -> per-sequence loss
    raw = total / len(ids)
    return normalise_importance(raw), raw


def normalise_importance(raw):
    """Each layer's raw importances ``(L, h)`` divided by that layer's ℓ2 norm (Michel et al. 2019, §4.1)."""
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    return raw / np.where(norm > 0, norm, 1.0)


def mean_head_outputs(model, ids, batch_size=512):
    """Each head's output averaged over sequences and positions: ``(L, h, d_k)``."""
    total, n = 0.0, 0
    for s in range(0, ids.shape[0], batch_size):
        model.forward(model.place(ids[s : s + batch_size, ...]))
        heads = [to_numpy(c.attn.heads) for c in model._cache.blocks]  # L x (b, h, T, d_k)
        total = total + np.stack([x.sum(axis=(0, 2)) for x in heads])
        n += heads[0].shape[0] * heads[0].shape[2]
    return total / n


def mean_ablation_params(model, layer, head, means):
    """Parameters in which head ``(layer, head)``'s output is its mean: zero it with ξ and
    add ``mean @ W_o[rows of that head]`` to ``b_o`` (the constant it would contribute). ``head``: one head, or an
    iterable of heads of ``layer`` whose constants are all added (the whole layer: ``range(h)``)."""
    d_k = model.cfg.d_model // model.cfg.num_heads
    pre = f"blocks.{layer}.attn."
    W_o = to_numpy(model.params[pre + "W_o"])
    heads = [head] if np.ndim(head) == 0 and not hasattr(head, "__iter__") else list(head)
    shift = sum(means[layer, j] @ W_o[j * d_k : (j + 1) * d_k] for j in heads)  # (d_model,)
    params = dict(model.params)
    params[pre + "b_o"] = model.place(to_numpy(model.params[pre + "b_o"]) + shift, dtype="params")
    return params


def ablation_deltas(model, ids, targets, mode="zero", base_mask=None, evaluator=None, frozen=False, effect=None):
    """Loss and accuracy change when each head (still present in ``base_mask``) is ablated alone.

    ``evaluator``: a :class:`~mhattn.heads.mask_eval.HeadMaskEvaluator` of ``model`` on these
    ``ids``/``targets`` to reuse (one is built otherwise); the numbers are the same either way.
    ``frozen``: every other head keeps its output from before the ablation
    (:meth:`~mhattn.heads.mask_eval.HeadMaskEvaluator.evaluate`'s ``frozen``); ``effect``: the level of freezing,
    ``"total"``, ``"heads-only"`` or ``"direct"`` (the same method's ``effect``, :mod:`mhattn.heads.effects`).

    Returns:
        ``(dloss, dacc)``, both ``(L, h)`` (NaN for heads already pruned).
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    base_mask = np.ones((L, h)) if base_mask is None else to_numpy(base_mask).astype(float)
    ev = evaluator or HeadMaskEvaluator(model, ids, targets)
    base = ev.evaluate(base_mask)
    means = mean_head_outputs(model, ids) if mode == "mean" else None
    dloss, dacc = np.full((L, h), np.nan), np.full((L, h), np.nan)
    for layer in range(L):
        for head in range(h):
            if base_mask[layer, head] == 0:
                continue
            mask = base_mask.copy()
            mask[layer, head] = 0.0
            params = mean_ablation_params(model, layer, head, means) if mode == "mean" else None
            r = ev.evaluate(mask, params, frozen=frozen, effect=effect)
            dloss[layer, head], dacc[layer, head] = r["loss"] - base["loss"], r["acc"] - base["acc"]
    return dloss, dacc


def _ranks(x, rtol):
    """Ranks 0..n-1 of ``x``; values within ``rtol * max|x|`` of their sorted neighbour share their average rank."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    tol = rtol * float(np.abs(x).max(initial=0.0))
    gaps = np.diff(x[order]) > tol  # a new tie group starts after each gap wider than tol
    group = np.concatenate([[0], np.cumsum(gaps)])
    for g in np.unique(group):  # average ranks over each tie group
        ranks[order[group == g]] = np.flatnonzero(group == g).mean()
    return ranks


def spearman(a, b, rtol=1e-5):
    """Spearman rank correlation of two equal-length vectors; tied values get their average rank.

    Two values count as tied when they differ by at most ``rtol`` times the largest magnitude in their
    vector: mhattn evaluates in float32, whose sums a CPU's BLAS kernel may order differently, moving
    the sixth or seventh digit (two heads of the shipped head-dropout model differ only there), and a
    rank should not depend on which kernel a machine picks. ``rtol=0`` ties only equal values.

    NaN and ±inf (the head analysis marks heads already pruned with NaN) are left out pairwise: the correlation is
    that of the pairs where both values are finite, and NaN when fewer than two such pairs remain (scipy's
    ``nan_policy="omit"``; not 0.0, which would read as "no correlation", scipy/scipy#6530). A constant vector
    gives 0.0.

    Raises:
        ValueError: ``a`` and ``b`` differ in length.
    """
    a, b = np.ravel(a).astype(float), np.ravel(b).astype(float)
    if a.shape != b.shape:
        raise ValueError(f"spearman: a has {a.size} values, b {b.size}")
    finite = np.isfinite(a) & np.isfinite(b)
    if finite.sum() < 2:
        return float("nan")
    a, b = a[finite], b[finite]
    ra, rb = _ranks(a, rtol), _ranks(b, rtol)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denom) if denom > 0 else 0.0
