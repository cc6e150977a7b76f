"""Every NumPy array a learner may hold is an array: memory-mapped files and every memory layout.

``np.load(path, mmap_mode="r")`` gives an ``np.memmap`` (an ``ndarray`` subclass, numpy/numpy#28721): mhattn takes
it wherever it takes an array, with the results, bit for bit and type for type, of the plain-array path. A
negative stride (``np.flip``, ``x[:, ::-1]``) is one torch refuses (pytorch/pytorch#92680): moving such an array
to torch (or CuPy) goes through a contiguous copy, on every leg of tests/conftest.py. Masked arrays and
``np.matrix`` stay refused: their arithmetic is not ndarray's.
"""

from __future__ import annotations

import numpy as np
import pytest

import mhattn
from mhattn import functional as F
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.loop import evaluate

CFG = ModelConfig(vocab_size=7, output_sizes=(3,), d_model=8, num_heads=2, d_ff=16)


def _mapped(tmp_path, a, name="a"):
    """``a`` written with ``np.save`` and read back memory-mapped, read-only."""
    path = tmp_path / f"{name}.npy"
    np.save(path, a)
    m = np.load(path, mmap_mode="r")
    assert type(m) is np.memmap
    return m


def _assert_same(got, want):
    """Equal bit for bit and of the same type (a plain ``ndarray``, not a memmap)."""
    assert type(got) is type(want), (type(got), type(want))
    np.testing.assert_array_equal(got, want)


def test_multi_head_attention_takes_memmap_inputs_and_gradients(tmp_path, rng):
    x, dout = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    xm, dm = _mapped(tmp_path, x, "x"), _mapped(tmp_path, dout, "dout")
    mask = _mapped(tmp_path, np.triu(np.ones((5, 5), bool), 1), "mask")
    results = []
    for q, d, m in ((x, dout, np.asarray(mask)), (xm, dm, mask)):
        mha = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
        out, w = mha.forward(q, attn_mask=m, head_mask=np.array([1.0, 0.5]))
        results.append((out, w, *mha.backward(d), *(mha.grads[k] for k in sorted(mha.grads))))
    for got, want in zip(results[1], results[0], strict=True):
        _assert_same(got, want)


def test_functional_steps_take_memmap_arrays(tmp_path, rng):
    x, gamma, beta = rng.standard_normal((3, 4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    xm, gm, bm = _mapped(tmp_path, x, "x"), _mapped(tmp_path, gamma, "g"), _mapped(tmp_path, beta, "b")
    out, cache = layernorm_forward(xm, gm, bm)
    ref, ref_cache = layernorm_forward(x, gamma, beta)
    np.testing.assert_array_equal(out, ref)
    for got, want in zip(layernorm_backward(xm, cache), layernorm_backward(x, ref_cache), strict=True):
        np.testing.assert_array_equal(got, want)
    params = mhattn.MultiHeadAttention(6, 2, dtype="float64", seed=1).params
    mapped = {k: _mapped(tmp_path, v, k) for k, v in params.items()}
    got, _, _ = F.multi_head_attention_forward(xm, xm, xm, mapped, 2)
    np.testing.assert_array_equal(got, F.multi_head_attention_forward(x, x, x, params, 2)[0])


def test_a_model_evaluates_memmap_token_ids_and_targets(tmp_path, rng):
    ids, y = rng.integers(0, 7, (5, 4)), rng.integers(0, 3, (5, 4))
    model = TransformerModel(CFG, seed=0, dtype="float64")
    idm, ym = _mapped(tmp_path, ids, "ids"), _mapped(tmp_path, y, "y")
    for got, want in zip(model.forward(idm)[0], model.forward(ids)[0], strict=True):
        _assert_same(got, want)
    assert evaluate(model, idm, (ym,), batch_size=2) == evaluate(model, ids, (y,), batch_size=2)


def test_memmap_parameters_load_and_move_to_every_leg(backend, tmp_path, rng):
    model = TransformerModel(CFG, seed=0, dtype="float64")
    host = {k: rng.standard_normal(mhattn.to_numpy(v).shape) for k, v in model.params.items()}
    model.load_params({k: _mapped(tmp_path, v, k) for k, v in host.items()})
    for k, v in host.items():
        np.testing.assert_array_equal(backend.to_numpy(model.params[k]), v)
    mapped = _mapped(tmp_path, host["embed.W"], "w")
    moved = mhattn.asarray(mapped)
    assert backend.is_here(moved)
    np.testing.assert_array_equal(backend.to_numpy(moved), host["embed.W"])
    if backend.name != "numpy":  # another library gets a copy, never the read-only mapped pages (torch would share them)
        assert not np.shares_memory(mhattn.to_numpy(moved), mapped)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_masked_arrays_and_matrices_stay_refused_with_a_message(rng):
    mha = mhattn.MultiHeadAttention(4, 2, dtype="float64", seed=0)
    x = rng.standard_normal((1, 4))
    for bad, kind in ((np.ma.masked_array(x[None]), "MaskedArray"), (np.asmatrix(x), "matrix")):
        with pytest.raises(TypeError, match=f"query must be an array .*got {kind}"):
            mha.forward(bad)


LAYOUTS = {
    "negative stride (np.flip)": lambda a: np.flip(a, 1),
    "negative strides ([::-1, ::-1])": lambda a: a[::-1, ::-1],
    "transposed": lambda a: np.swapaxes(a, 0, 1),
    "every other row": lambda a: np.concatenate([a, a], 1)[:, ::2],
    "Fortran order": np.asfortranarray,
    "read-only": lambda a: _read_only(a),
    "broadcast (stride 0)": lambda a: np.broadcast_to(a[:1], a.shape),
}


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_numpy_inputs_of_any_layout_move_to_every_leg(backend, layout, rng):
    host = rng.standard_normal((4, 6, 8))
    arranged = LAYOUTS[layout](host)
    moved = mhattn.asarray(arranged)
    assert backend.is_here(moved)
    np.testing.assert_array_equal(backend.to_numpy(moved), arranged)
    model = TransformerModel(CFG, seed=0, dtype="float64")
    ids = LAYOUTS[layout](rng.integers(0, 7, (4, 6)))
    placed = model.place(ids)
    assert backend.is_here(placed)
    np.testing.assert_array_equal(backend.to_numpy(placed), ids)
    y = LAYOUTS[layout](rng.integers(0, 3, (4, 6)))
    got = evaluate(model, ids, (y,), batch_size=3)
    with mhattn.use_backend("numpy"):
        host_model = TransformerModel(CFG, seed=0, dtype="float64")
        want = evaluate(host_model, np.ascontiguousarray(ids), (np.ascontiguousarray(y),), batch_size=3)
    assert got == pytest.approx(want, rel=1e-12)


def test_negative_stride_parameters_load_on_every_leg(backend, rng):
    model = TransformerModel(CFG, seed=0, dtype="float64")
    host = {k: rng.standard_normal(mhattn.to_numpy(v).shape) for k, v in model.params.items()}
    model.load_params({k: v[::-1] for k, v in host.items()})
    for k, v in host.items():
        np.testing.assert_array_equal(backend.to_numpy(model.params[k]), v[::-1])
    mha = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
    sd = {k: np.flip(v, 0) for k, v in mha.to_torch_state_dict().items()}
    mha.load_torch_state_dict(sd)
    assert all(np.array_equal(v, sd[k]) for k, v in mha.to_torch_state_dict().items())
