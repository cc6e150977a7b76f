"""Heads removed from one layer only (``PruneSettings.layer``), described as that layer's heads alone (``layer_view``)."""

from __future__ import annotations

import numpy as np
import pytest
from small_models import shaken_model

from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import PruneSettings, head_pool, run_prune
from mhattn.heads.report import model_report

L, H = 3, 4


@pytest.fixture(scope="module")
def small():
    """A 3-layer model of 4 heads whose heads matter (parameters shaken), and its task."""
    return shaken_model(L, H)


def _settings(**kw):
    return PruneSettings(**{"n_remove": 2, "n_random": 5, "eval_size": 16, "curve_orders": 1, "finetune_steps": 0,
                            "gate_steps": 0, **kw})  # fmt: skip


@pytest.mark.parametrize("layer", [-1, 3, 1.0, True, "1"])
def test_a_layer_outside_the_model_is_refused_by_name(layer):
    with pytest.raises(ValueError, match="layer must be None or an integer from 0 to 2"):
        head_pool(L, H, layer)


def test_removals_from_one_layer_touch_only_its_heads_and_match_the_evaluator(small):
    model, task = small
    d = run_prune(model, task, _settings(layer=1), gates=False, direct=True)
    assert d["layer"] == 1 and d["num_layers"] == 1 and d["model_num_layers"] == L and d["num_heads"] == H
    ev = HeadMaskEvaluator(model, *task.eval_set(16))
    base = ev.evaluate()
    for sub, dl, fr, di in zip(*(d["random"][k] for k in ("subsets", "dloss", "frozen_dloss", "direct_dloss")), strict=True):
        assert all(0 <= i < H for i in sub)  # indices within the layer
        mask = np.ones((L, H))
        mask[1, sub] = 0.0  # ... of layer 1, every other layer whole
        for level, got in (("total", dl), ("heads-only", fr), ("direct", di)):
            assert got == pytest.approx(ev.evaluate(mask, effect=level)["loss"] - base["loss"], rel=1e-12, abs=1e-12)
    whole = run_prune(model, task, _settings(), gates=False, direct=True)  # the same single costs, row 1
    for key in ("ablation_zero_dloss", "ablation_frozen_dloss", "ablation_direct_dloss", "importance"):
        assert np.shape(d[key]) == (1, H) and np.allclose(d[key][0], whole[key][1], rtol=1e-12, atol=0)
    no_layer = np.ones((L, H))
    no_layer[1] = 0.0  # the naive reading's end point is the layer without heads, not the model without heads
    assert d["curve"]["fraction_removed"][-1] == 1.0
    assert d["curve"]["importance_loss"][-1] == pytest.approx(ev.evaluate(no_layer)["loss"], rel=1e-12)
    assert d["finetune"]["removed"] in d["random"]["subsets"]


def test_the_report_of_one_layer_counts_that_layers_heads(small):
    model, task = small
    r = model_report(run_prune(model, task, _settings(layer=2, n_random=8), gates=False, direct=True))
    e = r.expectation
    assert e.n_heads == H and e.n_remove == 2
    costs = np.ravel(r.details["ablation_zero_dloss"])
    assert e.additive_expected_dloss == pytest.approx(2 / H * costs.sum(), rel=1e-12)
    none = r.details["curve"]["importance_loss"][-1] - r.details["baseline"]["loss"]
    assert e.naive_expected_dloss == pytest.approx(2 / H * none, rel=1e-12)
    assert e.direct_dloss_median == pytest.approx(np.median(r.details["random"]["direct_dloss"]), rel=1e-12)
