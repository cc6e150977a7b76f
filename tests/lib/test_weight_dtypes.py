"""16-bit weights load, cast to each parameter's dtype; a 16-bit model is refused.

torch checkpoints often hold bfloat16 or float16 tensors. ``TransformerModel.load_params`` and
``MultiHeadAttention.load_torch_state_dict`` cast them, as torch's ``load_state_dict`` does (``param.copy_``),
although NumPy has no bfloat16 (``tensor.numpy()`` raises "unsupported ScalarType BFloat16",
pytorch/pytorch#110285; every bfloat16 is a float32, so mhattn goes through float32, exactly). A model *in*
float16 is refused at construction and at load, with a message that says to load the weights into a float32 model.
"""

from __future__ import annotations

import numpy as np
import pytest

import mhattn
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.checkpoint import load_checkpoint, save_checkpoint

CFG = ModelConfig(vocab_size=5, output_sizes=(3,), d_model=8, num_heads=2, d_ff=16)


@pytest.mark.torch
@pytest.mark.parametrize("weights", ["bfloat16", "float16"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_16_bit_torch_weights_load_cast_to_each_parameters_dtype(backend, weights, dtype):
    torch = pytest.importorskip("torch")
    model = TransformerModel(CFG, seed=0, dtype=dtype)
    before = {k: id(v) for k, v in model.params.items()}
    g = torch.Generator().manual_seed(0)
    state = {k: torch.randn(tuple(v.shape), generator=g).to(getattr(torch, weights)) for k, v in model.params.items()}
    model.load_params(state)
    for k, v in state.items():
        got = backend.to_numpy(model.params[k])
        assert got.dtype == np.dtype(dtype) and id(model.params[k]) == before[k]
        np.testing.assert_array_equal(got, v.float().numpy().astype(dtype))  # exact: 16-bit values are float32s


@pytest.mark.torch
@pytest.mark.parametrize("weights", ["bfloat16", "float16"])
def test_16_bit_torch_state_dicts_load_into_multi_head_attention(backend, weights):
    torch = pytest.importorskip("torch")
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(getattr(torch, weights))
    mha = mhattn.MultiHeadAttention(8, 2, dtype="float64", seed=0)
    mha.load_torch_state_dict(ref.state_dict())
    for k, v in mha.to_torch_state_dict().items():
        assert v.dtype == np.float64
        np.testing.assert_array_equal(v, ref.state_dict()[k].float().numpy())


@pytest.mark.torch
def test_to_numpy_gives_bfloat16_as_the_float32_values_it_holds():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, -2.5, 3.0e38, 1.0 / 3.0], dtype=torch.bfloat16)
    got = mhattn.to_numpy(t)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, t.float().numpy())


def test_a_float16_checkpoint_loads_into_a_float32_model(tmp_path):
    model = TransformerModel(CFG, seed=0)
    path = save_checkpoint(tmp_path / "m.npz", model, {"task": "test"})
    with np.load(path) as z:
        arrays = {k: z[k].astype(np.float16) if k.startswith("param/") else z[k] for k in z.files}
    np.savez(tmp_path / "half.npz", **arrays)
    loaded, _ = load_checkpoint(tmp_path / "half.npz")
    for k, v in loaded.params.items():
        assert v.dtype == np.float32
        np.testing.assert_array_equal(v, arrays[f"param/{k}"].astype(np.float32))
    into = TransformerModel(CFG, seed=1, dtype="float64")
    load_checkpoint(tmp_path / "half.npz", into=into)
    np.testing.assert_array_equal(into.params["embed.W"], arrays["param/embed.W"].astype(np.float64))


def test_a_float16_model_is_refused_at_construction_and_at_load(tmp_path):
    """A model stays float32/float64; the attention layer alone takes float16 (and bfloat16 on torch), computed in
    float32."""
    with pytest.raises(ValueError, match="dtype is float16; a model is float32 or float64"):
        TransformerModel(CFG, dtype="float16")
    half = {k: v.astype(np.float16) for k, v in TransformerModel(CFG).params.items()}
    with pytest.raises(ValueError, match=r"parameter \S+ is float16; a model is float32 or float64"):
        TransformerModel(CFG, params=half)
    path = save_checkpoint(tmp_path / "m.npz", TransformerModel(CFG), {"task": "test"})
    with pytest.raises(ValueError, match="dtype is float16; a model is float32 or float64"):
        load_checkpoint(path, dtype="float16")
    with pytest.raises(ValueError, match=r"dtype bfloat16 needs a backend that has it \(torch\); numpy has none"):
        mhattn.MultiHeadAttention(8, 2, dtype="bfloat16")
    assert mhattn.MultiHeadAttention(8, 2, dtype="float16").dtype == np.float16  # the layer alone: tests/lib/test_half.py
