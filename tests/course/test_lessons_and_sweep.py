"""Claims the notebooks rest on, checked with values (notebooks 02, 03, 06, 07)."""

import numpy as np
import pytest
from xp_testing import xp_assert_close

from mhattn.course import lessons, sweep
from mhattn.functional import softmax_backward, softmax_forward
from mhattn.gradcheck import check_backward, numerical_gradient, rel_error


def test_dot_product_variance_grows_like_d_k_and_scaling_brings_it_back_to_one():
    for r in lessons.dot_product_variance([4, 64, 512], n=20_000, seed=0):
        assert r["var_raw"] == pytest.approx(r["d_k"], rel=0.05)
        assert r["var_scaled"] == pytest.approx(1.0, rel=0.05)


def test_unscaled_scores_saturate_the_softmax_and_shrink_its_gradient():
    scaled, raw = (lessons.softmax_saturation(512, scaled=s, seed=0) for s in (True, False))
    assert raw["max_weight"] > 0.9 > 0.5 > scaled["max_weight"]
    assert raw["grad_norm"] < scaled["grad_norm"] / 3


def test_naive_softmax_overflows_where_the_stable_one_does_not():
    s = np.array([[1000.0, 1001.0, 1002.0]])
    assert np.isnan(lessons.naive_softmax(s)).all()
    xp_assert_close(softmax_forward(s)[0].sum(), 1.0, rtol=1e-05, atol=1e-08, check_namespace=False)


def test_the_diagonal_only_softmax_backward_fails_its_gradient_check():
    scores = np.random.default_rng(0).standard_normal((2, 3, 5))
    assert check_backward(softmax_forward, softmax_backward, [scores])[0] < 1e-7
    assert check_backward(softmax_forward, lessons.softmax_backward_diagonal_only, [scores])[0] > 0.05


def test_weights_bytes_counts_b_h_t_s_entries():
    assert lessons.weights_bytes(8, 8, 2048, dtype="float32") == 8 * 8 * 2048 * 2048 * 4
    assert lessons.weights_bytes(1, 2, 3, 5, dtype="float64") == 1 * 2 * 3 * 5 * 8


def test_sweep_targets_are_the_tokens_at_each_offset():
    cfg = sweep.SweepConfig(batch=3)
    x, y = sweep.make_batch(cfg, np.random.default_rng(0))
    tokens = x[..., : cfg.vocab].argmax(-1)  # (B, T)
    for i, o in enumerate(cfg.offsets):
        assert (y[:, :, i] == np.roll(tokens, o, axis=1)).all()


def test_cross_entropy_gradient_matches_centred_differences():
    rng = np.random.default_rng(1)
    logits, targets = rng.standard_normal((2, 3, 4, 5)), rng.integers(0, 5, (2, 3, 4))
    _, grad = sweep.cross_entropy(logits, targets)
    f = lambda z: np.array(sweep.cross_entropy(z, targets)[0])
    assert rel_error(grad, numerical_gradient(f, logits, np.array(1.0))) < 1e-7


def test_offset_model_backward_matches_centred_differences():
    cfg = sweep.SweepConfig(batch=2, vocab=3, seq_len=3, offsets=(1,))
    model = sweep.OffsetModel(cfg, 2, seed=0)
    x, y = sweep.make_batch(cfg, np.random.default_rng(0))
    _, dlogits = sweep.cross_entropy(model.forward(x), y)
    grad = model.backward(dlogits)["W_r"]

    def loss_of(W):
        old, model.readout["W_r"] = model.readout["W_r"], W
        try:
            return np.array(sweep.cross_entropy(model.forward(x), y)[0])
        finally:
            model.readout["W_r"] = old

    assert rel_error(grad, numerical_gradient(loss_of, model.readout["W_r"].copy(), np.array(1.0))) < 1e-6


def test_four_heads_solve_the_four_offset_task_and_one_head_cannot():
    cfg = sweep.SweepConfig(steps=250)
    one, four = sweep.train(cfg, 1, seed=0), sweep.train(cfg, 4, seed=0)
    assert four["accuracy"] > 0.95
    assert one["accuracy"] < 0.6
    assert sweep.OffsetModel(cfg, 1, 0).mha.num_parameters() == sweep.OffsetModel(cfg, 16, 0).mha.num_parameters()
