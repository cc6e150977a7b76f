"""Targets equal to the ignore index (-100) count nowhere: not in the loss, the accuracy or the gradient.

``evaluate`` (and ``HeadMaskEvaluator.evaluate``, through ``score_batches``) gives the mean over the counted
positions of the whole set at every batch size; a batch-size-dependent loss is huggingface/transformers#24839.
``cross_entropy_forward`` follows torch's ``F.cross_entropy(ignore_index=...)``, checked live to 1e-12 in float64,
except where every target is ignored: torch divides 0 by 0 (NaN), mhattn gives 0.0 and a zero gradient.
"""

from __future__ import annotations

import numpy as np
import pytest

from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.loop import evaluate, score_batches

IGNORE = -100


def _model_and_data(seed=0, n=7, t=5):
    cfg = ModelConfig(vocab_size=6, output_sizes=(4, 3), d_model=8, num_heads=2, d_ff=16)
    model = TransformerModel(cfg, seed=seed, dtype="float64")
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 6, (n, t))
    targets = [rng.integers(0, c, (n, t)) for c in cfg.output_sizes]
    targets[0][rng.random((n, t)) < 0.4] = IGNORE  # ignored positions spread unevenly over the batches
    targets[0][2:4] = IGNORE  # two whole sequences ignored: a batch of size 1 or 2 counts nothing
    targets[1][0, :3] = IGNORE
    return model, ids, targets


def _means_over_counted(model, ids, targets):
    """Loss and accuracy of each classifier over its counted positions, from one forward of the whole set."""
    logits = model.forward(ids)[0]
    out = []
    for z, y in zip(logits, targets, strict=True):
        z, y = np.asarray(z).reshape(-1, z.shape[-1]), y.reshape(-1)
        keep = y != IGNORE
        logp = z - z.max(-1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
        out.append((-logp[keep, y[keep]].mean(), (z.argmax(-1)[keep] == y[keep]).mean()))
    return out


@pytest.mark.parametrize("batch_size", [1, 2, 3, 7, 512])
def test_evaluate_is_the_mean_over_counted_positions_at_every_batch_size(batch_size):
    model, ids, targets = _model_and_data()
    want = _means_over_counted(model, ids, targets)
    got = evaluate(model, ids, targets, batch_size=batch_size)
    for k, (loss, acc) in enumerate(want):
        assert got[f"loss/{k}"] == pytest.approx(loss, rel=1e-12)
        assert got[f"acc/{k}"] == pytest.approx(acc, rel=1e-12)
    assert got["loss"] == pytest.approx(np.mean([w[0] for w in want]), rel=1e-12)
    assert got["min_acc"] == pytest.approx(min(w[1] for w in want), rel=1e-12)


def test_a_classifier_with_nothing_counted_scores_nan_like_a_mean_over_nothing():
    model, ids, targets = _model_and_data()
    (loss0, acc0), _ = _means_over_counted(model, ids, targets)
    targets[1][...] = IGNORE
    got = evaluate(model, ids, targets, batch_size=3)
    assert np.isnan(got["loss/1"]) and np.isnan(got["acc/1"])
    assert got["loss/0"] == pytest.approx(loss0, rel=1e-12) and got["acc/0"] == pytest.approx(acc0, rel=1e-12)


def test_score_batches_counts_ignored_positions_nowhere():
    # two batches of one sequence: the first all ignored but for one right answer, the second all counted
    z = np.zeros((2, 3, 2))
    z[..., 1] = 5.0  # every position predicts class 1
    y = np.array([[1, IGNORE, IGNORE], [0, 0, 1]])
    got = score_batches(((z[:1],), (z[1:],)), (y,), batch_size=1)
    logp1 = 5.0 - np.log(1 + np.exp(5.0))
    assert got["acc"] == pytest.approx(2 / 4)  # hits: (0,0) and (1,2), of 4 counted positions
    assert got["loss"] == pytest.approx(-(2 * logp1 + 2 * (logp1 - 5.0)) / 4)


@pytest.mark.torch
@pytest.mark.parametrize("ignore_index", [-100, -1, 2])
def test_cross_entropy_ignores_as_torch_does(ignore_index):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    z = rng.standard_normal((4, 6, 5))
    y = rng.integers(0, 5, (4, 6))
    y[rng.random(y.shape) < 0.3] = ignore_index
    z[y == ignore_index] = np.nan  # whatever an ignored row holds cannot reach the loss or the gradient
    loss, cache = cross_entropy_forward(z, y, ignore_index=ignore_index)
    dz = cross_entropy_backward(1.0, cache)
    zt = torch.tensor(np.where(np.isnan(z), 0.0, z), requires_grad=True)  # torch's mean would carry the NaN
    lt = torch.nn.functional.cross_entropy(zt.reshape(-1, 5), torch.tensor(y).reshape(-1), ignore_index=ignore_index)
    lt.backward()
    assert loss == pytest.approx(lt.item(), rel=1e-12)
    np.testing.assert_allclose(dz, zt.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.torch
def test_every_target_ignored_gives_zero_where_torch_gives_nan():
    torch = pytest.importorskip("torch")
    z, y = np.random.default_rng(0).standard_normal((3, 4)), np.full(3, IGNORE)
    loss, cache = cross_entropy_forward(z, y)
    assert loss == 0.0 and not np.any(cross_entropy_backward(1.0, cache))
    assert np.isnan(torch.nn.functional.cross_entropy(torch.tensor(z), torch.tensor(y)).item())  # the documented difference


def test_targets_out_of_range_are_refused_as_torch_refuses_them():
    z = np.zeros((2, 3))
    for bad in ([0, 3], [-1, 0], [-101, 0]):
        with pytest.raises(ValueError, match=r"targets must be in \[0, 3\) or -100"):
            cross_entropy_forward(z, np.array(bad))
