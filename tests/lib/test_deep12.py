"""The 12-heads-per-layer deep model (``text-deep12``) and its data file: a slice re-computed from the checkpoint.

``benchmarks/deep12_pruning.py`` wrote ``mhattn/data/text-deep12-pruning.json`` (what ``mhattn prune --task
text-deep12`` measures, for three training seeds); notebook 07 reads it. Here seed 0's first random sixes of one
layer, at all three levels of freezing, and two of that layer's single costs are measured again on the same 256
validation windows. Tolerance as tests/lib/test_deep_model.py: float32 evaluation, whose sums a CPU's BLAS may order
differently between machines, so losses agree to 1e-3 relative, not bit for bit.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest
from xp_testing import xp_assert_close

from mhattn.heads.jobs import settings_for
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import head_pool, random_removals
from mhattn.heads.report import model_report
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint, shipped_path
from mhattn.training.recipes import RECIPES
from mhattn.training.tasks import task_from_meta
from mhattn.training.textdata import text_sha256

DATA = json.loads((DATA_DIR / "text-deep12-pruning.json").read_text())
LAYER = 3  # the last layer: the cheapest tail to re-run


@pytest.fixture(scope="module")
def measured():
    if text_sha256() != DATA["text_sha256"]:
        pytest.skip("this Python's documentation differs from the text the data file was measured on")
    model, meta = load_checkpoint("text-deep12")
    task = task_from_meta(meta["task"])
    return model, task, HeadMaskEvaluator(model, *task.eval_set(256))


def test_checkpoint_is_small_float32_with_twelve_heads_in_every_layer():
    assert shipped_path("text-deep12").stat().st_size <= 5 * 2**20
    model, meta = load_checkpoint("text-deep12")
    assert (model.cfg.num_layers, model.cfg.num_heads, model.cfg.d_model) == (4, 12, 96) and model.cfg.causal
    with np.load(shipped_path("text-deep12")) as z:
        assert {z[k].dtype for k in z.files if k.startswith("param/")} == {np.dtype("float32")}
    assert meta["training"]["seconds"] > 0 and meta["training"]["steps"] == RECIPES["text-deep12"]["steps"]


def test_the_data_file_holds_three_seeds_each_layer_six_of_twelve():
    assert [s["seed"] for s in DATA["seeds"]] == [0, 1, 2]
    for s in DATA["seeds"]:
        assert [d["layer"] for d in s["layers"]] == [0, 1, 2, 3]
        for d in s["layers"]:
            assert d["settings"]["n_remove"] == 6 and len(d["random"]["dloss"]) == d["settings"]["n_random"] >= 200
            assert all(len(sub) == 6 and set(sub) <= set(range(12)) for sub in d["random"]["subsets"])
            assert {"direct_dloss", "frozen_dloss", "dacc"} <= set(d["random"])
        assert s["half"]["settings"]["n_remove"] == 24 and s["half"]["settings"]["layer"] is None
    seed0 = DATA["seeds"][0]
    assert seed0["training_seconds"] == load_checkpoint("text-deep12")[1]["training"]["seconds"]  # the shipped one


def test_a_layers_first_sixes_match_what_mhattn_prune_measures(measured):
    model, task, ev = measured
    stored = DATA["seeds"][0]["layers"][LAYER]
    s = settings_for(task, {**DATA["layer"], "layer": LAYER})
    assert stored["settings"] == asdict(s)  # the command's settings for --task text-deep12 --layer 3
    base = ev.evaluate()
    again = random_removals(model, None, base, 6, 3, np.random.default_rng(s.seed), evaluator=ev,
                            pool=head_pool(4, 12, LAYER), direct=True)  # fmt: skip
    assert [[i - 12 * LAYER for i in sub] for sub in again["subsets"]] == stored["random"]["subsets"][:3]
    for key in ("dloss", "frozen_dloss", "direct_dloss"):
        xp_assert_close(np.asarray(again[key]), np.asarray(stored["random"][key][:3]), rtol=1e-3, check_namespace=False)
    assert not np.allclose(again["dloss"], again["direct_dloss"], rtol=1e-3)  # the levels differ here
    for head in (0, 7):  # two single costs of the layer, as the direct effect
        mask = np.ones((4, 12))
        mask[LAYER, head] = 0.0
        got = ev.evaluate(mask, effect="direct")["loss"] - base["loss"]
        xp_assert_close(np.asarray(got), np.asarray(stored["ablation_direct_dloss"][0][head]), rtol=1e-3, atol=1e-6,
                        check_namespace=False)  # fmt: skip


def test_reports_rebuild_from_the_stored_measurements():
    """Every layer's report and verdicts come from the stored measurements by the code the command uses."""
    for s in DATA["seeds"]:
        for d in s["layers"]:
            r = model_report(d)
            assert r.expectation.n_heads == 12 and r.expectation.n_remove == 6
            assert r.expectation.direct_dloss_median is not None and r.verdicts.direct_superadditive is not None
