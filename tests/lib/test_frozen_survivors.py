"""Frozen survivors: compensation (surviving heads change what they do) against spare evidence (superadditivity that
stays when no surviving head can change), the bootstrap intervals the verdicts use, and the report built on them."""

from __future__ import annotations

import numpy as np
import pytest

from mhattn.functional.embedding import embedding_forward
from mhattn.functional.encoder import encoder_block_forward
from mhattn.functional.feedforward import feedforward_forward
from mhattn.functional.layernorm import layernorm_forward
from mhattn.functional.linear import linear_forward
from mhattn.functional.masks import causal_mask
from mhattn.functional.mha import PARAM_NAMES, multi_head_attention_forward
from mhattn.functional.positional import positional_encoding_forward
from mhattn.functional.transformer import block_params
from mhattn.heads import expectation as ex
from mhattn.heads.answers import Compensation, RemovalImproved, UnequalContribution, gini
from mhattn.heads.conclusion import ADDITIVE_TOLERANCE, conclusion, verdicts
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.loop import multi_loss
from mhattn.training.tasks import RolesTask


def _setup(num_layers, causal=False, dtype="float64"):
    """A small random model whose heads matter (parameters shaken), and 23 evaluation sequences."""
    task = RolesTask(vocab_size=10, seq_len=7)
    cfg = ModelConfig(vocab_size=10, output_sizes=task.output_sizes, d_model=16, num_heads=4, num_layers=num_layers,
                      d_ff=24, causal=causal)  # fmt: skip
    model = TransformerModel(cfg, seed=3, dtype=dtype)
    rng = np.random.default_rng(7)
    for p in model.params.values():
        p += 0.3 * rng.standard_normal(p.shape)
    ids, targets = task.eval_set(23)
    return model, ids, targets


def _frozen_reference(model, ids, targets, head_mask):
    """The frozen loss built from the functional pieces: layer l's attention reads LN1 of the *unmasked* stream
    ``x_l`` (no head sees the removal), is scaled by ξ_l, and is added to the masked stream, which alone runs
    through the residuals, LN2 and the feed-forward layers."""
    c, p = model.cfg, model.params
    attn_mask = causal_mask(ids.shape[1]) if c.causal else None
    x, _ = positional_encoding_forward(embedding_forward(ids, p["embed.W"])[0])  # (B, T, d_model) unmasked stream
    y = x  # (B, T, d_model) the stream that sees the removal
    for layer in range(c.num_layers):
        b = block_params(p, layer)
        a, _ = layernorm_forward(x, b["ln1.gamma"], b["ln1.beta"])
        attn = {n: b[f"attn.{n}"] for n in PARAM_NAMES}
        m, _, _ = multi_head_attention_forward(a, a, a, attn, c.num_heads, attn_mask=attn_mask, head_mask=head_mask[layer])
        y = y + m
        f, _ = layernorm_forward(y, b["ln2.gamma"], b["ln2.beta"])
        y = y + feedforward_forward(f, b["ff.W1"], b["ff.b1"], b["ff.W2"], b["ff.b2"])[0]
        x, _, _ = encoder_block_forward(x, b, c.num_heads, attn_mask=attn_mask)  # the unmasked stream moves on
    z, _ = layernorm_forward(y, p["ln_f.gamma"], p["ln_f.beta"])
    logits = tuple(linear_forward(z, p[f"out.{k}.W"], p[f"out.{k}.b"])[0] for k in range(len(c.output_sizes)))
    return multi_loss(logits, targets)[0]


def _mask(L, h, removed, value=0.0):
    m = np.ones((L, h))
    for layer, head in removed:
        m[layer, head] = value
    return m


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "num_layers, removed, value",
    [(2, [(0, 1)], 0.0), (2, [(0, 0), (0, 3), (1, 2)], 0.0), (3, [(0, 2), (2, 1)], 0.0), (3, [(1, 0), (1, 3)], 0.5)],
)
def test_frozen_evaluation_is_the_forward_whose_later_heads_read_the_unmasked_stream(num_layers, removed, value, causal):
    model, ids, targets = _setup(num_layers, causal)
    mask = _mask(num_layers, 4, removed, value)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)  # 23 sequences: batches of 8, 8, 7
    want = _frozen_reference(model, ids, targets, mask)
    assert ev.evaluate(mask, frozen=True)["loss"] == pytest.approx(want, rel=1e-9)
    assert abs(ev.evaluate(mask)["loss"] - want) > 1e-6  # the heads after the first masked layer do see the removal


def test_freezing_matters_only_before_the_last_layer():
    model, ids, targets = _setup(2)
    ev = HeadMaskEvaluator(model, ids, targets)
    early = _mask(2, 4, [(0, 1)])
    assert abs(ev.evaluate(early, frozen=True)["loss"] - ev.evaluate(early)["loss"]) > 1e-6
    for late in (_mask(2, 4, [(1, 0)]), _mask(2, 4, [(1, 1), (1, 3)]), _mask(2, 4, [(1, h) for h in range(4)], 0.5)):
        assert ev.evaluate(late, frozen=True) == ev.evaluate(late)  # the last layer: the very same computation


def test_with_one_layer_frozen_and_unfrozen_are_the_same_computation():
    model, ids, targets = _setup(1)
    ev = HeadMaskEvaluator(model, ids, targets)
    for mask in (None, _mask(1, 4, [(0, 2)]), _mask(1, 4, [(0, 0), (0, 1), (0, 3)]), np.zeros((1, 4)), np.full((1, 4), 0.3)):
        assert ev.evaluate(mask, frozen=True) == ev.evaluate(mask)


def test_frozen_and_unfrozen_results_are_remembered_apart():
    model, ids, targets = _setup(2)
    mask = _mask(2, 4, [(0, 0), (0, 2)])
    ev = HeadMaskEvaluator(model, ids, targets)
    plain, frozen = ev.evaluate(mask)["loss"], ev.evaluate(mask, frozen=True)["loss"]
    assert abs(plain - frozen) > 1e-6
    other = HeadMaskEvaluator(model, ids, targets)  # the other order
    assert other.evaluate(mask, frozen=True)["loss"] == frozen and other.evaluate(mask)["loss"] == plain
    assert ev.evaluate(mask)["loss"] == plain and ev.evaluate(mask, frozen=True)["loss"] == frozen  # again, from the memo


# ---- bootstrap intervals -----------------------------------------------------------------------------------------
def test_bootstrap_interval_of_the_mean_is_about_two_standard_errors_wide():
    v = np.random.default_rng(0).normal(3.0, 2.0, 2000)
    lo, hi = ex.bootstrap_interval(v)
    assert lo < v.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * v.std() / np.sqrt(v.size), rel=0.1)  # the normal approximation
    few = ex.bootstrap_interval(v[:20])
    assert few[1] - few[0] > 5 * (hi - lo)  # about sqrt(100) = 10 times wider
    half = ex.bootstrap_interval(v, level=0.5)
    assert lo < half[0] < half[1] < hi and half[1] - half[0] == pytest.approx((hi - lo) * 0.6745 / 1.96, rel=0.15)


def test_bootstrap_interval_uses_the_statistic_and_the_seed():
    v = np.random.default_rng(1).exponential(1.0, 3000)  # median ln 2 = 0.69, mean 1
    med = ex.bootstrap_interval(v, np.median)
    assert med[0] < np.median(v) < med[1] < 0.8 < ex.bootstrap_interval(v)[0]
    assert ex.bootstrap_interval(v[:50], seed=4) == ex.bootstrap_interval(v[:50], seed=4)
    assert ex.bootstrap_interval(v[:50], seed=4) != ex.bootstrap_interval(v[:50], seed=5)
    assert ex.bootstrap_interval([2.5, 2.5, 2.5]) == [2.5, 2.5]


@pytest.mark.parametrize("values, level, name", [([], 0.95, "values"), ([1.0, np.nan], 0.95, "values"),
                                                 ([1.0, np.inf], 0.95, "values"), ([1.0, 2.0], 0.0, "level"),
                                                 ([1.0, 2.0], 1.0, "level"), ([1.0, 2.0], 1.5, "level")])  # fmt: skip
def test_bootstrap_interval_refuses_bad_input_naming_the_argument(values, level, name):
    with pytest.raises(ValueError, match=name):
        ex.bootstrap_interval(values, level=level)


# ---- verdicts from the frozen fields -----------------------------------------------------------------------------
COSTS = np.linspace(0.05, 0.3, 12)  # frozen single costs of 2 x 6 heads; similar heads, so reason 1 never holds


def _details(excess, adapt, no_heads=8.0):
    """``run_prune``-like details for random halves: Δ_frozen(S) = Σ_S c + excess(S), Δ(S) = Δ_frozen(S) + adapt(S);
    the unfrozen single costs are 1.5 c (a single removal's cost changes too when the later heads see it)."""
    rng = np.random.default_rng(0)
    subsets = [sorted(rng.choice(12, 6, replace=False).tolist()) for _ in excess]
    frozen = np.array([COSTS[s].sum() for s in subsets]) + excess
    dloss = frozen + adapt
    return {"settings": {"n_remove": 6}, "baseline": {"loss": 1.0, "acc": 0.9}, "most_important": {"loss": 2.0},
            "ablation_zero_dloss": (1.5 * COSTS).reshape(2, 6).tolist(), "ablation_frozen_dloss": COSTS.reshape(2, 6).tolist(),
            "ablation_zero_dacc": (-0.01 * COSTS).reshape(2, 6).tolist(),
            "curve": {"fraction_removed": [0.0, 1.0], "importance_loss": [1.0, 1.0 + no_heads], "importance_acc": [0.9, 0.1]},
            "random": {"subsets": subsets, "dloss": dloss.tolist(), "dacc": [-0.1] * len(subsets),
                       "frozen_dloss": frozen.tolist()}}  # fmt: skip


def _judge(details):
    e = ex.expectation(details)
    one = UnequalContribution(COSTS.max(), float(np.median(COSTS)), 6, 0.3, gini(COSTS), 0.2, 1.5, 0.6, [0.1, 0.3])
    two = Compensation(e.observed_dloss_median, -0.1, 0.3, 0.3, 0.3, None, 1.0, 1.0, 0.1, 0.1)
    dloss = np.asarray(details["random"]["dloss"])
    three = RemovalImproved(int((dloss < 0).sum()), dloss.size, float(dloss.min()), 0, 0.05, [])
    v = verdicts(e, one, two, three)
    return e, v, conclusion(e, v, one, two, three)


def test_no_change_when_frozen_is_no_compensation_and_no_spare_evidence():
    e, v, text = _judge(_details(np.zeros(20), np.zeros(20)))
    assert e.adaptation_median == e.adaptation_p10 == e.adaptation_p90 == e.fraction_adaptation_lowers == 0.0
    assert e.frozen_excess_median == pytest.approx(0.0, abs=1e-12) and v.less_than_naive
    assert not (v.reason2_compensation_holds or v.spare_evidence)
    assert "freezing the survivors changes no subset's loss" in text and "spare evidence fails" in text
    assert "Answer: loss less than the naive reading" in text and "mechanisms whose test held: none." in text


def test_survivors_that_lower_the_cost_are_compensation():
    adapt = np.zeros(20)
    d = _details(np.zeros(20), adapt)
    adapt[:18] = -0.4 * np.asarray(d["random"]["frozen_dloss"])[:18]  # freeing the survivors saves 40%, in 90% of subsets
    e, v, text = _judge(_details(np.zeros(20), adapt))
    assert e.adaptation_median == pytest.approx(np.median(adapt), rel=1e-12) and e.fraction_adaptation_lowers == 0.9
    assert e.adaptation_p10 < e.adaptation_median < 0 and v.reason2_compensation_holds and not v.spare_evidence
    answer = text.split("Answer:")[1]
    assert "(compensation)" in answer and "spare evidence" not in answer
    assert "(lower in 90% of subsets): compensation holds" in text
    frozen = np.asarray(d["random"]["frozen_dloss"])
    split = np.where(np.arange(20) < 10, -0.4 * frozen, 0.05 * frozen)  # lower in half the subsets, higher in the rest
    e, v, _ = _judge(_details(np.zeros(20), split))
    assert e.adaptation_median < -0.1 * e.frozen_dloss_median and e.fraction_adaptation_lowers == 0.5
    assert not v.reason2_compensation_holds  # a median pulled down by half the subsets is not "lower in most"
    small = np.where(np.arange(20) < 18, -0.02 * frozen, 0.0)  # lower in 90% of subsets, but by 2%: below the threshold
    e, v, _ = _judge(_details(np.zeros(20), small))
    assert e.adaptation_median < 0 and e.fraction_adaptation_lowers == 0.9 and not v.reason2_compensation_holds


def test_superadditive_with_the_survivors_frozen_is_spare_evidence():
    excess = np.where(np.arange(20) < 15, 0.5, -0.1)  # 75% of subsets superadditive with every head frozen
    e, v, text = _judge(_details(excess, np.zeros(20)))
    assert e.frozen_excess_median == pytest.approx(0.5) and e.fraction_frozen_superadditive == 0.75
    assert v.spare_evidence and not v.reason2_compensation_holds
    assert "(spare evidence)" in text.split("Answer:")[1] and "compensation" not in text.split("Answer:")[1]
    _, v, _ = _judge(_details(-excess, np.zeros(20)))  # subadditive with the survivors frozen
    assert not v.spare_evidence


def test_a_median_whose_interval_reaches_the_naive_expectation_is_not_less_than_naive():
    spread = np.linspace(-0.6, 0.6, 20)
    d = _details(spread, np.zeros(20))
    median = float(np.median(d["random"]["dloss"]))
    e, v, text = _judge(_details(spread, np.zeros(20), no_heads=2 * (median + 0.03)))  # naive = median + 0.03
    assert e.observed_dloss_median < e.naive_expected_dloss < e.observed_dloss_median_ci[1]  # below it, but not clearly
    assert not v.less_than_naive
    assert "loss not clearly less than the naive reading" in text
    answer = text.split("Answer:")[1]  # no mechanism is offered for what the numbers do not show
    assert "loss not clearly less than the naive reading" in answer and "because" not in answer
    _, v, _ = _judge(_details(spread, np.zeros(20), no_heads=2 * (median + 1.0)))  # the whole interval below naive
    assert v.less_than_naive


# ---- the whole experiment on a tiny model ------------------------------------------------------------------------
def test_run_prune_records_the_frozen_losses_and_the_report_builds():
    from mhattn.heads.prune import PruneSettings, finetune_recovery, run_prune
    from mhattn.heads.report import model_report

    task = RolesTask(vocab_size=10, seq_len=7)
    model, _, _ = _setup(2, dtype="float32")
    s = PruneSettings(n_remove=3, n_random=3, eval_size=16, curve_orders=1, finetune_steps=0, gate_steps=0)
    d = run_prune(model, task, s)
    assert len(d["random"]["frozen_dloss"]) == len(d["random"]["dloss"]) == 3
    frozen_singles, zero = np.asarray(d["ablation_frozen_dloss"]), np.asarray(d["ablation_zero_dloss"])
    assert frozen_singles.shape == (2, 4)
    assert frozen_singles[1] == pytest.approx(zero[1], rel=1e-6, abs=1e-9)  # the last layer: nothing to freeze
    assert np.max(np.abs(frozen_singles[0] - zero[0])) > 1e-6
    ev = HeadMaskEvaluator(model, *task.eval_set(16))
    base = ev.evaluate()["loss"]
    for removed, got in zip(d["random"]["subsets"], d["random"]["frozen_dloss"], strict=True):
        mask = np.ones(8)
        mask[removed] = 0.0
        assert got == pytest.approx(ev.evaluate(mask.reshape(2, 4), frozen=True)["loss"] - base, rel=1e-6, abs=1e-9)
    assert d["finetune"]["steps"] == 0 and d["finetune"]["recovered_fraction"] is None
    costly = np.argsort(zero.ravel())[::-1][:3].tolist()  # a removal that does cost loss: n/a, not 0% recovered
    ft = finetune_recovery(model, task, task.eval_set(16), ev.evaluate(), costly, 0, 0, evaluator=ev)
    assert ft["loss_pruned"] > base + 1e-3 and ft["recovered_fraction"] is None
    r = model_report(d)
    assert "no fine-tuning was run" in r.summary and "re-learning" not in r.conclusion and "Answer:" in r.conclusion


def test_a_small_frozen_excess_is_not_spare_evidence_and_one_changed_subset_is_reported():
    """Superadditive in every subset but by 5% of the frozen single costs: about additive, not spare evidence. And a
    single subset whose loss changes when the survivors are freed is enough to drop "changes no subset's loss"."""
    sums = np.array([COSTS[s].sum() for s in _details(np.zeros(20), np.zeros(20))["random"]["subsets"]])
    adapt = np.zeros(20)
    adapt[3] = -0.2  # one subset out of twenty: its 10th-90th percentile is still 0
    e, v, text = _judge(_details(0.05 * sums, adapt))
    assert e.fraction_frozen_superadditive == 1.0 and e.frozen_excess_median > 0 and not v.spare_evidence
    assert e.adaptation_p10 == e.adaptation_p90 == 0.0 and e.adaptation_max_abs == pytest.approx(0.2)
    assert "changes no subset's loss" not in text and "lower in 5% of subsets" in text
    e, v, _ = _judge(_details(0.5 * sums, np.zeros(20)))
    assert v.spare_evidence and e.frozen_excess_median > ADDITIVE_TOLERANCE * e.frozen_single_sum_median


@pytest.mark.parametrize("n", [0, -3, 2.5])
def test_bootstrap_interval_refuses_a_bad_resample_count(n):
    with pytest.raises(ValueError, match="n_resamples"):
        ex.bootstrap_interval([1.0, 2.0], n_resamples=n)
