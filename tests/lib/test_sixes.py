"""The main job's measurements (:mod:`mhattn.heads.sixes`), its reasons (:mod:`mhattn.heads.reasons`) and its box
(:mod:`mhattn.heads.box`): every number against an independent computation, every verdict word against its interval."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from small_models import shaken_model

from mhattn.heads import box, reasons
from mhattn.heads.importance import masked_eval, mean_ablation_params, mean_head_outputs
from mhattn.heads.main_report import shipped
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.sixes import SixesSettings, draw_subsets, measure_layer, subsets_count

L, H = 3, 4


@pytest.fixture(scope="module")
def small():
    """A 3-layer model of 4 heads whose heads matter (parameters shaken), its evaluation set and evaluator."""
    model, task = shaken_model(L, H)
    ids, targets = task.eval_set(24)
    return model, ids, targets, HeadMaskEvaluator(model, ids, targets)


def test_complement_pairs_hold_every_head_once_and_cover_all_when_asked():
    rng = np.random.default_rng(0)
    subsets, paired = draw_subsets(12, 6, 200, rng)
    assert paired and len(subsets) == 200 == subsets_count(12, 6, 200)
    for a, b in zip(subsets[0::2], subsets[1::2], strict=True):
        assert sorted(a + b) == list(range(12)) and len(a) == 6
    assert len({tuple(s) for s in subsets}) == 200  # drawn without replacement
    every, _ = draw_subsets(12, 6, 10_000, rng)
    assert len({tuple(s) for s in every}) == math.comb(12, 6) == subsets_count(12, 6, 10_000)
    odd, paired = draw_subsets(12, 5, 30, rng)
    assert not paired and len({tuple(s) for s in odd}) == 30 and all(len(s) == 5 for s in odd)
    with pytest.raises(ValueError, match="n_remove must be between 1 and the layer's 12 heads, got 13"):
        draw_subsets(12, 13, 4, rng)


def test_each_layer_draws_its_own_sixes(small):
    model, ids, targets, ev = small
    s = SixesSettings(n_remove=2, n_subsets=2)
    draws = [measure_layer(model, ev, layer, s)["subsets"] for layer in range(L)]
    assert draws[0] != draws[1] or draws[1] != draws[2]  # one stream per layer, not one shared draw


def test_a_layers_measurements_are_the_masked_models(small):
    """Total effect: the ordinary forward with the mask (masked_eval, no cache); the mean ablation likewise."""
    model, ids, targets, ev = small
    base = masked_eval(model, ids, targets)
    r = measure_layer(model, ev, 1, SixesSettings(n_remove=2, n_subsets=4), means=mean_head_outputs(model, ids))
    for s, dloss, dacc in zip(r["subsets"], r["sixes"]["total"]["dloss"], r["sixes"]["total"]["dacc"], strict=True):
        mask = np.ones((L, H))
        mask[1, s] = 0.0
        direct = masked_eval(model, ids, targets, mask)
        assert dloss == pytest.approx(direct["loss"] - base["loss"], abs=1e-12)
        assert dacc == pytest.approx(direct["acc"] - base["acc"], abs=1e-12)
    mask = np.ones((L, H))
    mask[1, 2] = 0.0
    assert r["single"]["total"]["dloss"][2] == pytest.approx(masked_eval(model, ids, targets, mask)["loss"] - base["loss"])
    mask[1, :] = 0.0
    means = mean_head_outputs(model, ids)
    mean = masked_eval(model, ids, targets, mask, mean_ablation_params(model, 1, range(H), means))
    assert r["all"]["mean"]["dloss"] == pytest.approx(mean["loss"] - base["loss"], abs=1e-12)
    assert r["all"]["total"]["dloss"] == pytest.approx(masked_eval(model, ids, targets, mask)["loss"] - base["loss"])


def test_the_last_layer_has_no_head_after_it(small):
    model, _, _, ev = small
    r = measure_layer(model, ev, L - 1, SixesSettings(n_remove=2, n_subsets=2))
    assert r["sixes"]["heads-only"] == r["sixes"]["total"]
    assert reasons.layer_reasons(r, L).heads == "none after"


def test_the_wilson_interval_and_the_interval_verdict():
    s = reasons.share(0, 800)
    assert s.ci[0] == 0.0 and s.ci[1] == pytest.approx(0.00478, abs=1e-4)  # zero seen: still an upper bound
    assert reasons.share(5, 10).ci == pytest.approx([0.2366, 0.7634], abs=1e-4)  # the textbook value
    assert reasons.side([0.1, 0.2], 0.5, "below", "above") == "below"
    assert reasons.side([0.6, 0.7], 0.5, "below", "above") == "above"
    assert reasons.side([0.4, 0.6], 0.5, "below", "above") == "unclear"  # straddles: no verdict from the point


def _layer(total, direct, frozen, whole=2.0, singles=None, paired=True, k=2, h=4, layer=0):
    """A measurement of one layer with the given per-subset losses (complement pairs of 2 of 4 heads)."""
    subsets = [[0, 1], [2, 3]] * (len(total) // 2)
    singles = [0.2, 0.2, 0.2, 0.2] if singles is None else singles
    lv = lambda d: {"dloss": list(d), "dacc": [-x / 10 for x in d]}  # noqa: E731
    return {
        "layer": layer, "num_heads": h, "n_remove": k, "paired": paired, "subsets": subsets,
        "single": {level: lv(singles) for level in ("total", "heads-only", "direct")},
        "all": {level: {"dloss": whole, "dacc": -whole / 10} for level in ("total", "heads-only", "direct", "mean")},
        "sixes": {"total": lv(total), "heads-only": lv(frozen), "direct": lv(direct)},
    }  # fmt: skip


def test_overlap_is_decided_by_the_pairs_interval():
    rng = np.random.default_rng(1)
    total = 0.6 + 0.01 * rng.standard_normal(40)  # a pair costs about 1.2 of a whole 2.0: 0.6 of it
    r = reasons.layer_reasons(_layer(total, total / 2, total), 2)
    assert r.pair_ratio.ci[1] < 1 and r.overlap == "supported"
    spread = np.where(np.arange(40) % 4 < 2, 0.4, 1.6)  # pairs at 0.8 and 3.2 of 2.0: a median that straddles 1
    r = reasons.layer_reasons(_layer(spread, spread, spread, singles=[1, 1, 1, 1]), 2)
    assert r.pair_ratio.ci[0] < 1 < r.pair_ratio.ci[1] and r.overlap == "unclear"
    big = 1.5 + 0.01 * rng.standard_normal(40)  # halves cost more than the whole, less than their singles
    r = reasons.layer_reasons(_layer(big, big, big, singles=[1, 1, 1, 1]), 2)
    assert r.overlap == "not supported"


def test_repair_and_amplification_follow_mcgrath_and_the_interval():
    rng = np.random.default_rng(2)
    direct = 0.5 + 0.01 * rng.standard_normal(40)
    below = reasons.layer_reasons(_layer(direct - 0.1, direct, direct - 0.05), 2)
    assert below.downstream == "repair" and below.heads == "compensate" and below.rest == "repair"
    above = reasons.layer_reasons(_layer(direct + 0.1, direct, direct + 0.15), 2)
    assert above.downstream == "amplification" and above.heads == "compensate" and above.rest == "amplification"
    noisy = reasons.layer_reasons(_layer(direct + 0.02 * rng.standard_normal(40), direct, direct), 2)
    assert noisy.downstream == "unclear"


def test_unequal_heads_cannot_lower_a_typical_half():
    """At k = h/2 the added-up costs are symmetric, so reason 1 is not supported even when the observed sixes are
    skewed; with k != h/2 and a skew in both, it is."""
    skewed = np.concatenate([np.full(30, 0.3), np.full(10, 3.0)])  # most halves cheap, a few dear
    r = reasons.layer_reasons(_layer(skewed, skewed, skewed, singles=[0.05, 0.05, 0.05, 2.0]), 2)
    assert r.additive_median_over_mean == pytest.approx(1.0) and r.typical_cheaper == "supported"
    assert r.unequal == "not supported"
    one = _layer(skewed, skewed, skewed, singles=[0.01, 0.01, 0.01, 3.0], paired=False, k=1)
    one["subsets"] = [[i % 4] for i in range(40)]
    r = reasons.layer_reasons(one, 2)
    assert r.additive_median_over_mean < 1 and r.unequal == "supported"


def test_noise_counts_single_heads_too():
    total = np.full(20, 0.5)
    r = reasons.layer_reasons(_layer(total, total, total, singles=[0.2, -0.001, 0.2, 0.2]), 2)
    assert r.singles_lower_loss.count == 1 and r.sixes_lower_loss.count == 0 and r.noise == "seen"


@pytest.fixture(scope="module")
def deep():
    data = shipped()["text-deep12"]
    return data, {seed: reasons.model_reasons(m) for seed, m in data.items()}


def test_the_box_names_supported_reasons_first_with_one_number_each(deep):
    data, rows = deep
    text = box.model_box("text-deep12", data["0"], rows["0"], [rows["1"], rows["2"]])
    assert box.word_count(text) <= box.BOX_WORDS
    lines = box.verdict_lines(rows["0"], [rows["1"], rows["2"]])
    assert lines[0].startswith("Answer: the data support ")
    verdicts = [line.split(",")[0] for line in lines[1:]]
    assert verdicts == sorted(verdicts, key=lambda v: v != "Supported")  # supported first
    assert all(f'"{words}"' in text for words in box.REASONS.values())
    assert not any("no role" in line or "duplicated roles" in line for line in lines)  # roles were not measured here
    for line in lines[1:]:
        assert any(ch.isdigit() for ch in line)  # each reason carries a number, supported or not


def test_the_box_follows_the_verdicts_not_the_other_way_round(deep):
    data, rows = deep
    flipped = copy.deepcopy(rows["0"])
    for r in flipped:
        r.overlap = "unclear"
    lines = box.verdict_lines(flipped)
    assert any(line.startswith('Not supported, "the heads that remain') for line in lines)
    assert "overlapping information" not in lines[0]


def test_the_shipped_box_states_two_reasons_for_the_twelve_head_model(deep):
    """What notebook 07 and ``mhattn prune`` say, checked on the shipped data of every seed: overlap in every layer
    (each interval below 1), the later heads compensating somewhere, and no noise in the loss."""
    _, rows = deep
    for seed_rows in rows.values():
        assert all(r.overlap == "supported" and r.pair_ratio.ci[1] < 1 for r in seed_rows)
        assert any(r.heads == "compensate" for r in seed_rows)
        assert all(r.downstream == "amplification" for r in seed_rows)  # total above direct: no self-repair
        assert all(r.unequal == "not supported" for r in seed_rows)  # k = h/2
        assert all(r.noise == "not seen" for r in seed_rows)
        assert all(r.vs_naive == "less" for r in seed_rows)


@pytest.mark.slow  # about 15 s on 2 loaded cores
def test_the_shipped_data_is_what_the_code_measures():
    """Seed 0's last layer measured again from the shipped checkpoint, to float32 tolerance (a BLAS may sum in
    another order on another machine)."""
    from mhattn.heads.sixes import evaluator_for
    from mhattn.training.checkpoint import load_checkpoint
    from mhattn.training.tasks import task_from_meta
    from mhattn.training.textdata import text_sha256

    if text_sha256() != shipped()["text_sha256"]:
        pytest.skip("this Python's documentation differs from the text the data file was measured on")
    stored = shipped()["text-deep12"]["0"]
    model, meta = load_checkpoint("text-deep12")
    task = task_from_meta(meta["task"])
    s = SixesSettings(**{k: stored["settings"][k] for k in ("n_remove", "n_subsets", "eval_size", "seed")})
    ev, means = evaluator_for(model, task, s)
    again = measure_layer(model, ev, 3, s, means)
    old = stored["layers"][3]
    assert again["subsets"] == old["subsets"]
    for level in ("total", "direct"):
        np.testing.assert_allclose(again["sixes"][level]["dloss"], old["sixes"][level]["dloss"], rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(again["single"][level]["dloss"], old["single"][level]["dloss"], rtol=1e-3, atol=1e-5)
