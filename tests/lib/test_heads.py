"""Head analysis: roles, confidence, importance, ablation, gates, and the planted roles of the shipped model."""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import xp_assert_close

from mhattn.heads import gates
from mhattn.heads.answers import gini
from mhattn.heads.importance import ablation_deltas, head_importance, mean_ablation_params, mean_head_outputs, spearman
from mhattn.heads.roles import attention_maps, detect_roles, head_confidence, positional_stats, rare_token_stats
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.loop import evaluate, multi_loss
from mhattn.training.tasks import RolesTask


def _one_hot_weights(N=3, T=5):
    """(L=1, N, h=3, T, T): head 0 looks one back (clamped), head 1 at itself, head 2 uniform."""
    w = np.zeros((1, N, 3, T, T))
    for t in range(T):
        w[0, :, 0, t, max(t - 1, 0)] = 1.0
        w[0, :, 1, t, t] = 1.0
    w[0, :, 2] = 1.0 / T
    return w


def test_positional_stats_find_the_offset_and_its_frequency():
    offset, frac = positional_stats(_one_hot_weights())
    assert offset[0, 0] == -1 and frac[0, 0] == pytest.approx(4 / 5)  # position 0 cannot look back
    assert offset[0, 1] == 0 and frac[0, 1] == 1.0


def test_confidence_is_mean_max_weight():
    conf = head_confidence(_one_hot_weights())
    assert conf[0].tolist() == pytest.approx([1.0, 1.0, 0.2])


def test_rare_token_stats_and_role_labels():
    ids = np.array([[0, 1, 5, 2, 1]] * 3)  # the rarest (largest) id sits at position 2
    w = np.zeros((1, 3, 2, 5, 5))
    w[0, :, 0, :, 2] = 1.0  # head 0 always looks at position 2
    w[0, :, 1, :, 0] = 1.0  # head 1 always at position 0
    assert rare_token_stats(w, ids, np.arange(6))[0].tolist() == [1.0, 0.0]
    roles = detect_roles(w, ids, np.arange(6))
    assert roles[0]["role"] == "rare" and roles[1]["role"] == "other"


def test_spearman_and_gini_known_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)  # 1 - 6*4/(5*24)
    # ties get average ranks: a = (1, 2, 2, 3) ranks (0, 1.5, 1.5, 3) against b's (0, 1, 2, 3): r = 0.9487
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(3 / np.sqrt(10))
    # values within rtol * max|x| are float32 noise: tied, whichever way a BLAS kernel ordered them
    near, far = [1.0, 2.0, 2.0 + 1e-7, 3.0], [1.0, 2.0 + 1e-7, 2.0, 3.0]
    assert spearman(near, [1, 2, 3, 4]) == spearman(far, [1, 2, 3, 4]) == pytest.approx(3 / np.sqrt(10))
    assert spearman(near, [1, 2, 3, 4], rtol=0) == pytest.approx(1.0)
    assert spearman(far, [1, 2, 3, 4], rtol=0) == pytest.approx(0.8)
    assert gini([1, 1, 1, 1]) == pytest.approx(0.0) and gini([0, 0, 0, 4]) == pytest.approx(0.75)


def _tiny(rng):
    task = RolesTask(vocab_size=6, seq_len=5)
    cfg = ModelConfig(vocab_size=6, output_sizes=task.output_sizes, d_model=8, num_heads=2, d_ff=8)
    model = TransformerModel(cfg, seed=0, dtype="float64")
    for p in model.params.values():
        p += 0.3 * rng.standard_normal(p.shape)
    ids, targets = task.sample(3, rng)
    return model, ids, targets


def test_importance_is_mean_abs_per_sequence_gradient_of_the_head_gate(rng):
    model, ids, targets = _tiny(rng)
    _, raw = head_importance(model, ids, targets)
    # centred differences of each sequence's own loss in ξ_h, then E_x |.|
    expected = np.zeros((1, 2))
    for n in range(len(ids)):
        for h in range(2):
            vals = []
            for e in (1e-6, -1e-6):
                xi = np.ones((1, 2))
                xi[0, h] += e
                vals.append(multi_loss(model.forward(ids[n : n + 1], head_mask=xi)[0], tuple(t[n : n + 1] for t in targets))[0])
            expected[0, h] += abs(vals[0] - vals[1]) / 2e-6 / len(ids)
    xp_assert_close(raw, expected, atol=1e-08, rtol=1e-6)
    imp, _ = head_importance(model, ids, targets)
    assert np.linalg.norm(imp) == pytest.approx(1.0)


def test_mean_ablation_replaces_a_head_by_its_mean_output(rng):
    """ξ_h = 0 plus ``mean_h @ W_o[rows of h]`` added to b_o equals swapping head h's output for its mean."""
    model, ids, targets = _tiny(rng)
    means = mean_head_outputs(model, ids)  # (L, h, d_k)
    model.forward(ids)
    heads = model._cache.blocks[0].attn.heads.copy()  # (B, h, T, d_k)
    heads[:, 1] = means[0, 1]
    concat = heads.transpose(0, 2, 1, 3).reshape(*ids.shape, -1)  # (B, T, d_model)
    direct = concat @ model.params["blocks.0.attn.W_o"] + model.params["blocks.0.attn.b_o"]
    params = mean_ablation_params(model, 0, 1, means)
    saved, model.params = model.params, params
    model.forward(ids, head_mask=np.array([[1.0, 0.0]]))
    model.params = saved
    oc = model._cache.blocks[0].attn.out_proj
    trick = oc.x @ oc.W + params["blocks.0.attn.b_o"]
    xp_assert_close(trick, direct, rtol=1e-05, atol=1e-12)
    assert not np.allclose(trick, oc.x @ oc.W + saved["blocks.0.attn.b_o"])  # the shift matters
    d, _ = ablation_deltas(model, ids, targets, mode="mean")
    assert d.shape == (1, 2) and np.isfinite(d).all()


def test_hard_concrete_gate_gradients_and_limits():
    la = np.array([[-8.0, 0.3, 8.0]])
    z = gates.deterministic_gates(la)
    assert z[0, 0] == 0.0 and z[0, 2] == 1.0 and 0 < z[0, 1] < 1
    _, dz = gates.sample_gates(la, 4, np.random.default_rng(0))
    z_plus, _ = gates.sample_gates(la + 1e-6, 4, np.random.default_rng(0))
    z_minus, _ = gates.sample_gates(la - 1e-6, 4, np.random.default_rng(0))
    xp_assert_close(dz, (z_plus - z_minus) / 2e-6, rtol=1e-05, atol=1e-5)
    l0, dl0 = gates.expected_l0(la)
    num = (gates.expected_l0(la + [[0, 1e-6, 0]])[0] - gates.expected_l0(la - [[0, 1e-6, 0]])[0]) / 2e-6
    assert dl0[0, 1] == pytest.approx(num, rel=1e-5) and 0 < l0 < 3


@pytest.fixture(scope="module")
def plain():
    model, meta = load_checkpoint("roles-plain")
    return model, RolesTask(**{k: v for k, v in meta["task"].items() if k != "name"})


def test_shipped_plain_model_grew_the_planted_positional_heads(plain):
    model, task = plain
    ids, _ = task.eval_set(256)
    roles = {r["role"] for r in detect_roles(attention_maps(model, ids), ids, task.rarity())}
    assert {"offset-1", "offset+1"} <= roles


def test_zero_ablation_matches_a_masked_evaluation(plain):
    model, task = plain
    ids, targets = task.eval_set(256)
    d, _ = ablation_deltas(model, ids, targets)
    base = evaluate(model, ids, targets)["loss"]
    mask = np.ones((1, 12))
    mask[0, 5] = 0
    assert d[0, 5] == pytest.approx(evaluate(model, ids, targets, head_mask=mask)["loss"] - base)


# ---- the conclusion's verdicts follow the tests notebook 07 teaches -----------------------------------------
COSTS = np.array([1.34, 0.59, 0.22, 0.13, 0.11, 0.09, 0.06, 0.03, 0.02, 0.01, 0.002, 0.0002])  # Gini above 0.5


def _verdict_inputs(costs, k, observed, improved=0, frozen=None):
    """``(Expectation, UnequalContribution, Compensation, RemovalImproved)`` for random removals costing ``observed``.

    ``frozen``: the same removals with every surviving head's output frozen; default ``observed`` (as in a one-layer
    model, where every head reads only the embeddings and freezing changes nothing); the frozen single costs are
    ``costs`` then too. The intervals are real bootstraps of ``observed``.
    """
    import dataclasses

    from mhattn.heads import expectation as ex
    from mhattn.heads.answers import Compensation, RemovalImproved, UnequalContribution

    sums, observed = ex.subset_sums(costs, k), np.asarray(observed, dtype=float)
    frozen = observed if frozen is None else np.asarray(frozen, dtype=float)
    add, inter, excess, adapt = ex.additive_expectation(costs, k), observed - sums, frozen - sums, observed - frozen
    blank = {"list[float]": [0.0, 0.0], "float | None": None}  # the intervals, and what was not measured
    e = ex.Expectation(**{f.name: blank.get(f.type, 0.0) for f in dataclasses.fields(ex.Expectation)})
    e = dataclasses.replace(
        e, n_heads=costs.size, n_remove=k, sum_single_dloss=float(costs.sum()), additive_expected_dloss=add,
        additive_median_dloss=float(np.median(sums)), additive_std_dloss=float(sums.std()),
        naive_expected_dloss=4.0 * k / costs.size, observed_dloss_mean=float(observed.mean()),
        observed_dloss_mean_ci=ex.bootstrap_interval(observed), observed_dloss_median=float(np.median(observed)),
        observed_dloss_median_ci=ex.bootstrap_interval(observed, np.median),
        observed_dloss_p10=float(np.percentile(observed, 10)), observed_dloss_p90=float(np.percentile(observed, 90)),
        observed_dloss_worst=float(observed.max()), observed_mean_over_additive=float(observed.mean()) / add,
        interaction_median=float(np.median(inter)), fraction_superadditive=float((inter > 0).mean()),
        frozen_dloss_median=float(np.median(frozen)), frozen_excess_median=float(np.median(excess)),
        frozen_single_sum_median=float(np.median(sums)), adaptation_max_abs=float(np.abs(adapt).max()),
        frozen_excess_p10=float(np.percentile(excess, 10)), frozen_excess_p90=float(np.percentile(excess, 90)),
        fraction_frozen_superadditive=float((excess > 0).mean()), adaptation_median=float(np.median(adapt)),
        adaptation_p10=float(np.percentile(adapt, 10)), adaptation_p90=float(np.percentile(adapt, 90)),
        fraction_adaptation_lowers=float((adapt < 0).mean()),
    )  # fmt: skip
    one = UnequalContribution(costs.max(), float(np.median(costs)), 1, 0.7, gini(costs), 0.5, 3.0, 0.6, [0.0, 1.0])
    two = Compensation(e.observed_dloss_median, -0.1, 0.1, 0.2, 0.2, None, 1.0, 0.1, 0.1, 0.1)
    return e, one, two, RemovalImproved(improved, observed.size, 0.1, 0, 0.0, [])


def test_reason_1_fails_for_an_additive_model_with_unequal_costs_when_half_the_heads_go():
    """Costs that add up exactly, Gini >= 0.5, k = h/2: the mean and the median stay at (k/h) Σ c (nb07 cell 8)."""
    from mhattn.heads import expectation as ex
    from mhattn.heads.conclusion import conclusion, verdicts

    args = _verdict_inputs(COSTS, 6, ex.subset_sums(COSTS, 6))  # every six, removed additively
    v = verdicts(*args)
    assert gini(COSTS) >= 0.5 and v.unequal_costs and v.about_additive
    assert not v.reason1_unequal_explains
    text = conclusion(args[0], v, *args[1:])
    assert "in its additive form it fails" in text
    assert "the mean loss is about the additive expectation" in text and "cost more together than alone" not in text


def test_reason_1_holds_only_where_skew_makes_a_typical_removal_cheap():
    """A quarter of the heads: the additive median falls below the mean, and an additive model's median sits there."""
    from mhattn.heads import expectation as ex
    from mhattn.heads.conclusion import conclusion, verdicts

    args = _verdict_inputs(COSTS, 3, ex.subset_sums(COSTS, 3))
    v = verdicts(*args)
    assert v.reason1_unequal_explains and "in its additive form it holds" in conclusion(args[0], v, *args[1:])
    twice = _verdict_inputs(COSTS, 3, 2 * ex.subset_sums(COSTS, 3))  # skewed, but the costs do not add up
    assert not verdicts(*twice).reason1_unequal_explains
    assert "in its additive form it fails" in conclusion(twice[0], verdicts(*twice), *twice[1:])


def test_a_small_models_conclusion_does_not_contradict_itself():
    """Observed mean 10% above additive: 'about' additive, so neither 'more together than alone' nor 'not close'."""
    from mhattn.heads import expectation as ex
    from mhattn.heads.conclusion import conclusion, verdicts

    costs = np.array([0.05, 0.04, 0.04, 0.03])  # four similar heads: not unequal
    args = _verdict_inputs(costs, 2, 1.1 * ex.subset_sums(costs, 2))
    v = verdicts(*args)
    assert v.about_additive and v.more_than_additive and not v.unequal_costs
    text = conclusion(args[0], v, *args[1:])
    assert "the mean loss is about the additive expectation" in text
    # a 10% excess is "about additive": not spare evidence either, so the Answer does not say the heads cost more
    assert not v.spare_evidence and "cost more together than alone" not in text and "not close" not in text
    assert "are not very unequal (Gini" in text and "in its additive form it fails" in text
