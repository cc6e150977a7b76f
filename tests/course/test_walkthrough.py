"""The 512 / 8 x 64 walkthrough, its command, and the two parameter counts."""

from __future__ import annotations

import numpy as np
from xp_testing import xp_assert_equal

import mhattn
from mhattn.cli import main
from mhattn.course import counting, walkthrough


def test_every_step_has_the_textbook_shape():
    wt = walkthrough.run("a b c a d", d_model=512, num_heads=8)
    shapes = {name: shape for name, shape, _ in wt.steps}
    T = 5
    assert shapes["input X"] == (1, T, 512)
    assert shapes["q split into heads"] == (1, 8, T, 64)
    assert shapes["scores q k^T / sqrt(d_k)"] == (1, 8, T, T)
    assert shapes["concat"] == (1, T, 512)
    assert shapes["output concat W_o + b_o"] == (1, T, 512)
    assert wt.max_diff_vs_module < 1e-5
    x = mhattn.to_numpy(wt.steps[0][2])
    xp_assert_equal(x[0, 0], x[0, 3])  # the repeated word "a" has one embedding


def test_walkthrough_command_prints_shapes_and_counts(tmp_path, capsys):
    assert main(["walkthrough", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "(1, 8, 12, 64)" in out and "1,048,576" in out and "360,448" in out
    assert (tmp_path / "attention_heads.png").stat().st_size > 10_000


def test_explainer_formula_counts_the_block_diagonal_layer():
    d, h = 512, 8
    assert counting.standard_count(d, h, bias=False) == 4 * d * d == counting.standard_count(d, 1, bias=False)
    assert counting.count_block_diagonal(d, h) == 3 * d * d // h + d * d == 360_448
    assert counting.count_block_diagonal(d, 1) == 4 * d * d  # equal only at h = 1
    block = counting.block_diagonal_mha(64, 4, seed=0)
    mask = counting.block_diagonal_mask(64, 4)
    free = counting.free_parameters(block, {n: mask for n in ("W_q", "W_k", "W_v")})
    assert free == counting.count_block_diagonal(64, 4, bias=True)
    W = mhattn.to_numpy(block.params["W_q"])
    assert np.all(W[~mask] == 0) and np.all(W[mask] != 0)


def test_walkthrough_command_rejects_bad_arguments_with_a_message(capsys):
    import pytest

    for argv, msg in (
        (["--seed", "-1"], "argument --seed: must be an integer >= 0, got -1"),
        (["--num-heads", "3"], "argument --num-heads: must divide --d-model=512, got 3"),
        (["--sentence", "  "], "argument --sentence: must have 1 to 512 whitespace-separated tokens, got 0"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["walkthrough", *argv])
        assert exc.value.code == 2
        assert msg in capsys.readouterr().err


def test_matrix_products_cost_the_same_for_every_head_count():
    """Vaswani et al. 2017, §3.2.2: h heads of d_model/h cost about what one head of d_model costs."""
    counts = [counting.attention_flops(2, 5, 7, 64, h) for h in (1, 2, 4, 8, 16, 64)]
    matmuls = {c["projections"] + c["scores"] + c["weighted_sum"] for c in counts}
    assert matmuls == {2 * 2 * (2 * 5 + 2 * 7) * 64 * 64 + 2 * 2 * 2 * 5 * 7 * 64}
    assert [c["softmax_entries"] for c in counts] == [2 * h * 5 * 7 for h in (1, 2, 4, 8, 16, 64)]
