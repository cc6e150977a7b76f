"""Issue 33's ten public bug kinds, each fixed as a kind: every test here failed on the tree before it (d93fe17).

Each names the public report it is a kind of. One test per kind, on the input that showed it.
"""

from __future__ import annotations

import argparse
import os
import threading

import numpy as np
import pytest

import mhattn
from mhattn import functional as F
from mhattn.functional.attention_tiled import tiled_attention_backward, tiled_attention_forward
from mhattn.functional.losses import cross_entropy_forward
from mhattn.gradcheck import numerical_gradient
from mhattn.heads.importance import spearman
from mhattn.kernels import tiled as engine_tiled
from mhattn.nn.init import init_mha_params


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_numerical_gradient_takes_its_step_in_float64(dtype):
    """jax-ml/jax#7742: a step of 1e-6 added in float16 rounds back to x, and every difference was 0."""
    x = np.array([0.5, 1.0, 1.5, 3.0], dtype=dtype)
    g = numerical_gradient(lambda a: a * a, x, np.ones(4, dtype=dtype))
    assert g.dtype == x.dtype
    np.testing.assert_allclose(g.astype(float), 2 * x.astype(float), rtol=1e-3)


def test_numerical_gradient_refuses_integer_inputs():
    with pytest.raises(TypeError, match="real floating"):
        numerical_gradient(lambda a: a * a, np.arange(3), np.ones(3))


def test_two_saves_of_one_checkpoint_path_at_once_both_succeed(tmp_path, monkeypatch):
    """One fixed temporary name: the second save's rename found the file gone (FileNotFoundError)."""
    from mhattn.nn.transformer import ModelConfig, TransformerModel
    from mhattn.training import checkpoint

    model = TransformerModel(ModelConfig(vocab_size=5, output_sizes=(3,), d_model=8, num_heads=2, d_ff=16), seed=0)
    both_written, real_replace, errors = threading.Barrier(2, timeout=20), os.replace, []
    monkeypatch.setattr(checkpoint.os, "replace", lambda a, b: (both_written.wait(), real_replace(a, b))[1])

    def save():
        try:
            checkpoint.save_checkpoint(tmp_path / "m.npz", model, {"name": "roles"})
        except Exception as err:  # noqa: BLE001 - recorded for the assertion below
            errors.append(err)

    threads = [threading.Thread(target=save) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]  # no temporary file left behind
    loaded, _ = checkpoint.load_checkpoint(tmp_path / "m.npz")
    assert set(loaded.params) == set(model.params)


TILED_PAIRS = {
    "reference": (tiled_attention_forward, tiled_attention_backward),
    "engine": (engine_tiled.tiled_attention_forward, engine_tiled.tiled_attention_backward),
}


@pytest.mark.parametrize("forward, backward", list(TILED_PAIRS.values()), ids=list(TILED_PAIRS))
def test_tiled_backward_with_value_heads_wider_than_key_heads(forward, backward):
    """Dao-AILab/flash-attention#753: d_v > d_k broke the tiled backward (a tile buffer sized by d_k)."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 2, 5, 3)), rng.standard_normal((2, 2, 6, 3))
    v, dout = rng.standard_normal((2, 2, 6, 7)), rng.standard_normal((2, 2, 5, 7))
    out, _, cache = forward(q, k, v, block_q=2, block_k=4)
    dq, dk, dv = backward(dout, cache)
    want_out, _, c = F.scaled_dot_product_attention_forward(q, k, v)
    for got, want in zip((out, dq, dk, dv), (want_out, *F.scaled_dot_product_attention_backward(dout, c)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "uint32"])
def test_small_integer_token_ids_on_torch(dtype):
    """pytorch/pytorch#17346: index_select takes int32/int64 only, so a uint8 batch of ids failed on torch."""
    pytest.importorskip("torch")
    from mhattn.nn.transformer import ModelConfig, TransformerModel

    ids = np.array([[0, 1, 4], [2, 2, 3]], dtype=dtype)
    cfg = ModelConfig(vocab_size=5, output_sizes=(3,), d_model=8, num_heads=2, d_ff=16)
    want = TransformerModel(cfg, seed=0, dtype="float64")(ids)[0][0]
    with mhattn.use_backend("torch", "cpu"):
        model = TransformerModel(cfg, seed=0, dtype="float64")
        got = model(model.place(ids))[0][0]
    np.testing.assert_allclose(mhattn.to_numpy(got), want, rtol=1e-12)


def test_unsigned_targets_never_match_a_negative_ignore_index_on_torch():
    """On torch, uint8 target 156 == -100 was True (-100 wraps to 156): a real class was ignored."""
    torch = pytest.importorskip("torch")
    logits = np.random.default_rng(0).standard_normal((2, 200))
    targets = np.array([156, 3], dtype=np.uint8)
    want, _ = cross_entropy_forward(logits, targets)  # NumPy compares by value: 156 is a class
    got, _ = cross_entropy_forward(torch.from_numpy(logits), torch.from_numpy(targets))
    assert got == pytest.approx(want, rel=1e-12)


def test_spearman_leaves_out_the_pairs_with_nan():
    """scipy/scipy#6530: a NaN made the correlation 0.0, which reads as "no correlation"."""
    assert spearman([1.0, 2.0, 3.0, np.nan, 5.0], [10.0, 20.0, 30.0, 40.0, 50.0]) == pytest.approx(1.0)
    assert np.isnan(spearman([np.nan, 1.0], [1.0, 2.0]))  # fewer than two finite pairs: no correlation to give
    with pytest.raises(ValueError, match="length|values"):
        spearman([1.0, 2.0], [1.0, 2.0, 3.0])


def test_float16_scores_do_not_overflow_before_scaling():
    """q k^T = 64 * 40 * 40 = 102400 overflows float16 (max 65504) before the 1/sqrt(d_k) = 1/8 that makes it 12800."""
    q = np.full((1, 1, 2, 64), 40.0, dtype=np.float16)
    v = np.arange(128, dtype=np.float16).reshape(1, 1, 2, 64) / 128
    out, weights, _ = F.scaled_dot_product_attention_forward(q, q, v)
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    want, _, _ = F.scaled_dot_product_attention_forward(q.astype(np.float64), q.astype(np.float64), v.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-2, atol=1e-3)


def test_masks_are_documented_as_constants():
    """pytorch/pytorch#148476: an additive float mask gets no gradient; the package said every array input did."""
    doc = " ".join(F.__doc__.split())
    assert "Masks are constants" in doc and "no gradient" in doc
    rng = np.random.default_rng(0)
    q, mask = rng.standard_normal((1, 1, 3, 2)), rng.standard_normal((3, 3))
    _, _, cache = F.scaled_dot_product_attention_forward(q, q, q, mask)
    assert len(F.scaled_dot_product_attention_backward(q, cache)) == 3  # dq, dk, dv: nothing for the mask
    assert "no gradient" in " ".join(F.scaled_dot_product_attention_forward.__doc__.split())


def test_course_init_quotes_the_folder_it_prints(tmp_path, capsys):
    """``mhattn course init "my course ü"`` printed ``cd my course ü``: a shell reads three words."""
    from mhattn.commands import course

    dest = tmp_path / "my course ü"
    assert course.main(argparse.Namespace(dir=dest, force=None)) == 0
    out = capsys.readouterr().out
    assert f"cd '{dest}'" in out and f"cd {dest}\n" not in out


def test_functional_attention_takes_numpy_integer_head_counts():
    """Modules, configs and checkpoints took num_heads=np.int64(2); the functional path refused it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8))
    params = init_mha_params(8, 8, 8, True, np.dtype("float64"), rng)
    want = F.multi_head_attention_forward(x, x, x, params, 2)[0]
    got, _, cache = F.multi_head_attention_forward(x, x, x, params, np.int64(2))
    np.testing.assert_array_equal(got, want)
    assert type(cache.split.num_heads) is int
    with pytest.raises(TypeError, match="num_heads"):
        F.multi_head_attention_forward(x, x, x, params, 2.0)
