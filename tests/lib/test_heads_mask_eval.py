"""The cached head-mask evaluation gives the numbers of a full forward.

The cache runs the layers before the mask once for the whole set and the rest in pieces, so its sums are grouped
otherwise than a full forward's: equal on some BLAS kernels, within float32 rounding on others.
What the cache gives twice (its memo) is the same arithmetic, and stays bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from xp_testing import assert_close_tree, xp_assert_close

from mhattn.heads.importance import masked_eval, mean_ablation_params, mean_head_outputs
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.tasks import RolesTask


def _setup(num_layers, causal=False):
    task = RolesTask(vocab_size=10, seq_len=7)
    cfg = ModelConfig(vocab_size=10, output_sizes=task.output_sizes, d_model=16, num_heads=4, num_layers=num_layers,
                      d_ff=24, causal=causal)  # fmt: skip
    model = TransformerModel(cfg, seed=3)
    ids, targets = task.eval_set(23)  # 23 sequences in batches of 8: a short last batch
    return model, ids, targets


MASKS = [None, [[1, 1, 1, 1], [1, 1, 1, 1]], [[1, 0, 1, 1], [1, 1, 1, 1]], [[1, 1, 1, 1], [0, 1, 0.5, 1]],
         [[0, 0, 1, 0], [1, 0, 1, 1]], [[0, 0, 0, 0], [0, 0, 0, 0]]]  # fmt: skip


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_every_mask_gives_exactly_the_full_forwards_numbers(num_layers, causal):
    model, ids, targets = _setup(num_layers, causal)
    assert_close_tree(HeadMaskEvaluator(model, ids, targets).evaluate(), masked_eval(model, ids, targets))  # batches of 512
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)
    for mask in MASKS:
        m = None if mask is None else np.asarray(mask, dtype=float)[:num_layers]
        first = ev.evaluate(m)
        assert_close_tree(first, _full(model, ids, targets, m))
        assert ev.evaluate(m) == first  # a second time: from the memo, the very same numbers


def _full(model, ids, targets, mask):
    from mhattn.training.loop import evaluate

    return evaluate(model, ids, targets, head_mask=mask, batch_size=8)


def test_mean_ablation_params_after_the_mask_are_used_and_earlier_ones_refused():
    model, ids, targets = _setup(2)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)
    means = mean_head_outputs(model, ids)
    params = mean_ablation_params(model, 1, 2, means)
    mask = np.ones((2, 4))
    mask[1, 2] = 0.0
    want = model.params
    model.params = params
    try:
        expected = _full(model, ids, targets, mask)
    finally:
        model.params = want
    assert_close_tree(ev.evaluate(mask, params), expected)
    stale = dict(model.params, **{"blocks.0.attn.b_o": model.params["blocks.0.attn.b_o"] + 1})
    with pytest.raises(ValueError, match="blocks.0.attn.b_o"):
        ev.evaluate(mask, stale)  # layer 0 runs from the cache when only layer 1 is masked
    with pytest.raises(ValueError, match="W_q"):
        ev.evaluate(None, dict(model.params, **{"blocks.1.attn.W_q": model.params["blocks.1.attn.W_q"] * 2}))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_importance_from_the_cache_is_head_importance(num_layers, causal):
    from mhattn.heads.importance import head_importance

    model, ids, targets = _setup(num_layers, causal)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)  # 23 sequences: batches of 8, 8, 7
    for mask in MASKS:
        m = None if mask is None else np.asarray(mask, dtype=float)[:num_layers]
        _, want = head_importance(model, ids, targets, head_mask=m, batch_size=4)
        got = ev.importance_grads(m, batch_size=4)
        assert got.shape == (num_layers, 4)
        xp_assert_close(got, want, rtol=1e-5)
        assert np.any(got != 0)
        first = got.copy()
        got[...] = -1.0  # the caller's copy: the remembered value is untouched
        assert np.array_equal(ev.importance_grads(m, batch_size=4), first)


def test_importance_batch_size_must_divide_the_evaluators():
    model, ids, targets = _setup(1)
    with pytest.raises(ValueError, match="batch_size 3 must be positive and divide the evaluator's batch_size 8"):
        HeadMaskEvaluator(model, ids, targets, batch_size=8).importance_grads(batch_size=3)


def test_michel_iterative_removes_the_least_important_head_each_time_and_reuses_scores():
    from mhattn.heads.importance import head_importance
    from mhattn.heads.prune import _mask, michel_iterative

    model, ids, targets = _setup(2)
    removed = []  # the reference: re-score with the full forward and backward after every removal
    for _ in range(3):
        imp, _ = head_importance(model, ids, targets, head_mask=_mask(2, 4, removed))
        flat = imp.ravel().copy()
        flat[removed] = np.inf
        removed.append(int(np.argsort(flat, kind="stable")[0]))
    ev = HeadMaskEvaluator(model, ids, targets)
    assert michel_iterative(model, (ids, targets), 3, evaluator=ev) == removed
    assert len(ev._importance) == 3  # one importance per removed set
    assert michel_iterative(model, (ids, targets), 4, start=removed[:2], evaluator=ev)[:3] == removed
    assert len(ev._importance) == 4  # the sets seen before were not scored again


@pytest.mark.parametrize("tokens", [7, 14, 20])  # pieces of 1, 2 and 2 sequences of 7 positions
def test_the_tail_in_pieces_gives_the_same_numbers(monkeypatch, tokens):
    import mhattn.heads.mask_eval as mask_eval

    model, ids, targets = _setup(2, causal=True)
    monkeypatch.setattr(mask_eval, "TAIL_TOKENS", tokens)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)
    for mask in MASKS:
        m = None if mask is None else np.asarray(mask, dtype=float)
        assert_close_tree(ev.evaluate(m), _full(model, ids, targets, m))


def test_importance_takes_a_flat_mask_and_any_batch_on_a_one_batch_evaluator():
    from mhattn.heads.importance import head_importance

    model, ids, targets = _setup(2)
    mask = np.array([[1, 0, 1, 1], [1, 1, 0, 1]], dtype=float)
    _, want = head_importance(model, ids, targets, head_mask=mask, batch_size=5)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=100)  # 23 sequences: one batch, 5 does not divide 100
    xp_assert_close(ev.importance_grads(mask.ravel(), batch_size=5), want, rtol=1e-5)
    with pytest.raises(ValueError, match="must be positive"):
        ev.importance_grads(batch_size=0)


def test_gates_that_never_move_report_settled_at_zero_and_moving_ones_a_step_within_the_run():
    from mhattn.heads.gates import train_gates

    model, _, _ = _setup(1)
    task = RolesTask(vocab_size=10, seq_len=7)
    still = train_gates(model, task, steps=3, batch_size=4, init=10.0, seed=0)  # Adam moves log α by <= 0.3
    assert still["settled_at"] == 0 and still["open"] == 4
    moved = train_gates(model, task, steps=12, batch_size=4, gate_lr=1.0, init=0.1, l0_lambda=5.0, seed=0)
    assert 1 <= moved["settled_at"] <= 12 and moved["open"] < 4
