"""Michel et al.'s iterative pruning order: what each re-scoring normalises over (removed heads included)."""

from __future__ import annotations

import numpy as np

from mhattn.heads.importance import normalise_importance
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import _mask, michel_iterative
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta


def test_second_choice_uses_the_layer_norm_over_all_heads_removed_included():
    """After the first removal, the next head is the argmin of E|dL/dξ| (ξ of the removed head at 0) divided by each
    layer's ℓ2 norm over all 8 heads; leaving the removed head out of the norm changes its layer's scores."""
    model, meta = load_checkpoint("text-deep")
    ids, targets = task_from_meta(meta["task"]).eval_set(32)
    ev = HeadMaskEvaluator(model, ids, targets)
    L, h = model.cfg.num_layers, model.cfg.num_heads
    first, second = michel_iterative(model, None, 2, evaluator=ev)
    raw = ev.importance_grads(_mask(L, h, [first]))
    assert raw.ravel()[first] > 0  # a removed head still has a gradient at ξ = 0
    with_removed = normalise_importance(raw).ravel()
    with_removed[first] = np.inf
    assert second == int(np.argmin(with_removed))
    kept = raw.copy()  # the other reading: the removed head left out of its layer's norm
    kept.ravel()[first] = 0.0
    without = normalise_importance(kept).ravel()
    without[first] = np.inf
    layer = first // h
    assert not np.allclose(with_removed[layer * h : (layer + 1) * h][np.isfinite(with_removed[layer * h : (layer + 1) * h])],
                           without[layer * h : (layer + 1) * h][np.isfinite(without[layer * h : (layer + 1) * h])])  # fmt: skip
