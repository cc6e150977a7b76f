"""What "expected" means for a random removal, the verdicts, and the report's JSON form."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from mhattn.heads import expectation as ex
from mhattn.heads.answers import Compensation, RemovalImproved, UnequalContribution
from mhattn.heads.conclusion import conclusion, verdicts

COSTS = np.array([1.34, 0.59, 0.22, 0.13, 0.11, 0.09, 0.06, 0.03, 0.02, 0.01, 0.002, 0.0002])


def test_additive_mean_is_k_over_h_of_the_sum_whatever_the_inequality():
    sums = ex.subset_sums(COSTS, 6)
    assert len(sums) == math.comb(12, 6)
    assert sums.mean() == pytest.approx(ex.additive_expectation(COSTS, 6), rel=1e-12)
    assert ex.additive_expectation(COSTS, 6) == pytest.approx(COSTS.sum() / 2)


def test_inequality_widens_the_spread_without_moving_the_mean():
    equal = np.full(12, COSTS.mean())
    s_eq, s_uneq = ex.subset_sums(equal, 6), ex.subset_sums(COSTS, 6)
    assert s_eq.mean() == pytest.approx(s_uneq.mean())
    assert s_eq.std() < 1e-12 < 0.3 < s_uneq.std()


def test_half_of_the_heads_is_symmetric_a_quarter_is_skewed():
    """k = h/2: a subset's complement is another half with sum Σ - s, so the median equals the mean;
    for k < h/2 a few large costs pull the median below the mean."""
    half, quarter = ex.subset_sums(COSTS, 6), ex.subset_sums(COSTS, 3)
    assert np.median(half) == pytest.approx(half.mean(), abs=1e-12)
    assert np.median(quarter) < 0.8 * quarter.mean()


def test_sampled_subset_sums_when_there_are_too_many_subsets():
    c = np.arange(40, dtype=float)
    with pytest.raises(ValueError, match="rng"):
        ex.subset_sums(c, 20)
    s = ex.subset_sums(c, 20, np.random.default_rng(0), n_samples=20_000)
    assert s.shape == (20_000,) and s.mean() == pytest.approx(ex.additive_expectation(c, 20), rel=0.01)


def test_chance_of_missing_the_two_costliest_heads():
    assert ex.p_miss_costliest(12, 6, 2) == pytest.approx(210 / 924)
    assert ex.p_miss_costliest(12, 6, 0) == 1.0 and ex.p_miss_costliest(12, 12, 1) == 0.0


def test_naive_expectation_moves_k_over_h_of_the_way_to_no_heads():
    assert ex.naive_expectation(0.0, 9.0, 6, 12) == pytest.approx(4.5)
    assert ex.naive_expectation(1.0, 0.1, 3, 12) == pytest.approx(0.775)  # accuracy falls a quarter of the way


def test_interactions_sign_superadditive_positive():
    assert ex.interactions([[0, 1], [2, 3]], [2.5, 0.1], COSTS).round(4).tolist() == [0.57, -0.25]


@pytest.mark.parametrize("bad, k", [(np.array([1.0, np.nan]), 1), (COSTS, 13), (COSTS, -1)])
def test_bad_input_names_the_argument(bad, k):
    with pytest.raises(ValueError, match="single_costs|k="):
        ex.additive_expectation(bad, k)


def _fake(gini, sim, median, mean, improved=0, adapt=0.0):
    """The verdicts' inputs for random removals of median ``median`` and mean ``mean`` (95% intervals ±10%);
    ``adapt``: the median of Δ(S) - Δ_frozen(S), what letting the surviving heads change does (0: nothing)."""
    blank = {"list[float]": [0.0, 0.0], "float | None": None}  # the intervals, and what was not measured
    e = ex.Expectation(**{f.name: blank.get(f.type, 0.0) for f in dataclasses.fields(ex.Expectation)})
    e.n_heads, e.n_remove, e.naive_expected_dloss, e.additive_expected_dloss = 12, 6, 4.0, 1.0
    e.observed_dloss_median, e.observed_dloss_mean, e.observed_mean_over_additive = median, mean, mean / 1.0
    e.observed_dloss_median_ci, e.observed_dloss_mean_ci = [0.9 * median, 1.1 * median], [0.9 * mean, 1.1 * mean]
    e.frozen_dloss_median, e.adaptation_median, e.adaptation_max_abs = median - adapt, adapt, abs(adapt)
    e.adaptation_p10, e.adaptation_p90, e.fraction_adaptation_lowers = 1.5 * adapt, 0.5 * adapt, 0.9 if adapt < 0 else 0.0
    one = UnequalContribution(1.0, 0.1, 1, 0.7, gini, 0.5, 3.0, 0.6, [0.1, 1.0])
    two = Compensation(median, -0.1, 0.1, 0.2, 0.2, 0.9, 1.0, 0.1, sim, 0.5)
    three = RemovalImproved(improved, 200, -0.01 if improved else 0.1, 0, 0.0, [])
    return e, one, two, three


def test_verdicts_follow_the_numbers():
    plain = verdicts(*_fake(gini=0.7, sim=0.09, median=2.2, mean=2.3))
    assert plain.less_than_naive and plain.more_than_additive and plain.unequal_costs
    assert not (plain.reason1_unequal_explains or plain.reason2_compensation_holds or plain.reason3_noise_holds)
    redundant = verdicts(*_fake(gini=0.6, sim=0.67, median=0.03, mean=0.2, adapt=-0.47))  # frozen survivors: +0.50
    assert redundant.reason2_compensation_holds and not redundant.reason1_unequal_explains
    additive = verdicts(*_fake(gini=0.7, sim=0.1, median=0.9, mean=1.1, improved=3))
    assert additive.reason3_noise_holds and additive.about_additive  # reason 1: tests/lib/test_heads.py (median vs skew)
    assert not additive.reason1_unequal_explains  # the observed median is far from the additive median (0 here)


def test_conclusion_words_change_with_the_verdicts():
    args = _fake(gini=0.7, sim=0.09, median=2.2, mean=2.3)
    text = conclusion(args[0], verdicts(*args), *args[1:])
    assert "less than the naive" in text and "freezing the survivors changes no" in text and "re-learning" in text
    args = _fake(gini=0.6, sim=0.67, median=0.03, mean=0.2, adapt=-0.47)
    assert "compensation holds" in conclusion(args[0], verdicts(*args), *args[1:])


def _details(dloss):
    """What the histogram draws of one model: its random removals and the two expected loss changes
    (as :meth:`~mhattn.heads.report.ModelReport.figure_data` hands them; no heads at all costs 4 nats here)."""
    c = np.linspace(0.0, 0.2, 12).reshape(1, 12)
    return {"random": {"dloss": dloss}, "settings": {"n_remove": 6}, "ablation_zero_dloss": c.tolist(),
            "additive": ex.additive_expectation(c, 6), "naive": ex.naive_expectation(0.0, 4.0, 6, 12)}  # fmt: skip


def test_histogram_counts_values_beyond_its_range_instead_of_clipping_silently():
    pytest.importorskip("matplotlib")
    from mhattn.plots.pruning import random_removal_hist

    fig = random_removal_hist({"m": _details([0.1, 0.2, 0.3, 5.0, 7.0])}, xmax=1.0)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("2 beyond 1.00" in t for t in labels) and any("naive" in t and "beyond the axis" in t for t in labels)
    fig = random_removal_hist({"m": _details([0.1, 0.2, 0.3])})
    assert not any("beyond" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_histogram_draws_the_expectations_it_is_handed():
    """The figure computes no expectation of its own: the lines stand where the report put them."""
    pytest.importorskip("matplotlib")
    from mhattn.plots.pruning import random_removal_hist

    data = {**_details([0.1, 0.2, 0.3]), "additive": 0.37, "naive": 0.83}
    ax = random_removal_hist({"m": data}).axes[0]
    lines = {line.get_label().split()[0]: line.get_xdata()[0] for line in ax.get_lines() if line.get_label()[0] != "_"}
    assert lines["additive"] == 0.37 and lines["naive"] == 0.83
    no_naive = random_removal_hist({"m": {**data, "naive": None}}).axes[0]
    assert not any("naive" in t.get_text() for t in no_naive.get_legend().get_texts())


def test_the_figure_data_of_a_report_holds_its_expectations():
    """``ModelReport.figure_data``: the measurements and the report's additive and naive expected changes."""
    from mhattn.heads.report import ModelReport

    e = dataclasses.make_dataclass("E", ["additive_expected_dloss", "naive_expected_dloss"])(0.25, 1.5)
    details = {"random": {"dloss": [0.1]}, "settings": {"n_remove": 6}}
    data = ModelReport(None, None, None, e, None, "", "", details).figure_data()
    assert data == {**details, "additive": 0.25, "naive": 1.5} and "additive" not in details


def test_scratch_comparison_refuses_models_that_do_not_match():
    from mhattn.heads.scratch import compare_scratch_vs_pruned
    from mhattn.training.checkpoint import load_checkpoint

    full, meta = load_checkpoint("roles-plain")
    with pytest.raises(ValueError, match="must match"):
        compare_scratch_vs_pruned(full, meta, full, meta, None, [0, 1, 2, 3, 4, 5])


def test_shipped_six_head_checkpoint_matches_its_recipe():
    """roles-6heads: the roles-plain recipe with 6 heads (python -m mhattn.training.recipes roles-6heads)."""
    from mhattn.training.checkpoint import load_checkpoint
    from mhattn.training.loop import evaluate
    from mhattn.training.recipes import RECIPES
    from mhattn.training.tasks import task_from_meta

    model, meta = load_checkpoint("roles-6heads")
    r = RECIPES["roles-6heads"]
    assert (model.cfg.num_heads, model.cfg.d_model, meta["training"]["steps"]) == (6, 96, RECIPES["roles-plain"]["steps"])
    assert {k: v for k, v in r.items() if k not in ("num_heads", "file")} == {
        k: v for k, v in RECIPES["roles-plain"].items() if k not in ("num_heads", "file")
    }
    task = task_from_meta(meta["task"])
    assert evaluate(model, *task.eval_set(1024))["min_acc"] >= 0.99
