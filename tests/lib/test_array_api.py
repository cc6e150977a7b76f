"""Every functional forward/backward pair and MultiHeadAttention on every array-library leg, against NumPy.

Each case builds the same host inputs from a fixed seed, runs once on NumPy and once on the leg (see
tests/conftest.py: array-api-strict on ``Device("device1")``, torch on the CPU, CuPy and torch CUDA where a GPU
is there), and checks that every output and gradient is an array of the inputs' namespace on their device
and equals NumPy's: to 1e-12 in float64; in float32 to rtol 1e-5, atol 5e-6 (another library's kernels sum
in another order; measured on torch CPU and strict, the worst entry, a weight gradient,
is off by 2.3e-7 beyond rtol 1e-5, so atol leaves a GPU's reduction order a 20-fold margin).
Dropout masks come from a seeded ``numpy.random.Generator``, so every leg drops the same entries.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LEGS, LEGS_AND_DTYPES
from xp_testing import xp_assert_close

import mhattn
from mhattn import functional as F
from mhattn.functional.attention_tiled import tiled_attention_backward, tiled_attention_forward
from mhattn.functional.dropout import dropout_backward, dropout_forward
from mhattn.functional.embedding import embedding_backward, embedding_forward
from mhattn.functional.encoder import encoder_block_backward, encoder_block_forward
from mhattn.functional.feedforward import feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.functional.positional import positional_encoding_backward, positional_encoding_forward
from mhattn.functional.transformer import transformer_backward, transformer_forward
from mhattn.nn.init import init_encoder_block, init_mha_params
from mhattn.nn.transformer import ModelConfig, init_params

TOL = {"float64": dict(rtol=1e-12, atol=1e-12), "float32": dict(rtol=1e-5, atol=5e-6)}
B, T, S, D, H = 2, 4, 5, 8, 2  # batch, queries, keys, d_model, heads: small, so the legs stay quick


def flatten(obj, prefix=""):
    """``{path: leaf}`` of nested dicts/tuples of arrays and floats (None left out)."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (tuple, list)):
        items = enumerate(obj)
    else:
        return {prefix: obj}
    out = {}
    for k, v in items:
        out.update(flatten(v, f"{prefix}/{k}" if prefix else str(k)))
    return out


class Inputs:
    """Host inputs from one seed, moved by ``put`` (NumPy itself, or the leg's ``asarray``)."""

    def __init__(self, put, dtype):
        self.rng, self.put, self.dtype = np.random.default_rng(42), put, dtype

    def normal(self, *shape, scale=1.0):
        return self.put((scale * self.rng.standard_normal(shape)).astype(self.dtype))

    def bools(self, *shape, p=0.3):
        return self.put(self.rng.random(shape) < p)


def assert_leg_matches_numpy(leg, case):
    """Run ``case(inputs)`` on NumPy and on ``leg``; compare every leaf of the results."""
    with mhattn.use_backend("numpy"):
        ref = flatten(case(Inputs(np.asarray, leg.dtype)))
    got = flatten(case(Inputs(leg.asarray, leg.dtype)))
    assert sorted(got) == sorted(ref)
    for key, want in ref.items():
        if isinstance(want, float):
            assert got[key] == pytest.approx(want, rel=TOL[leg.dtype]["rtol"]), key
            continue
        xp_assert_close(got[key], want, like=leg, err_msg=key, **TOL[leg.dtype])


def _dout(out, shape):
    """A fixed upstream gradient shaped like ``out``, on its namespace/device."""
    host = np.cos(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape)
    return mhattn.backend.array_namespace(out).asarray(host, dtype=out.dtype, device=mhattn.backend.device_of(out))


def _attention(i, fwd, bwd, *masks, **kw):
    q, k, v = i.normal(B, H, T, 3), i.normal(B, H, S, 3), i.normal(B, H, S, 2)
    out, second, cache = fwd(q, k, v, *masks, **kw)
    return {"out": out, "weights_or_lse": second, "grads": bwd(_dout(out, out.shape), cache)}


def _mha_params(i, kdim=D, vdim=D):
    host = init_mha_params(D, kdim, vdim, True, np.dtype(i.dtype), i.rng)
    return {n: i.put(p + 0.1 * i.rng.standard_normal(p.shape).astype(i.dtype)) for n, p in host.items()}


def _mha(i, tiled=False):
    q, k, v = i.normal(B, T, D), i.normal(B, S, 6), i.normal(B, S, 5)
    params, pad = _mha_params(i, 6, 5), np.zeros((B, S), bool)
    pad[1, -2:] = True
    kw = dict(attn_mask=i.bools(T, S), key_padding_mask=i.put(pad), head_mask=i.normal(B, H), is_causal=True)
    if not tiled:
        kw.update(dropout_p=0.3, rng=np.random.default_rng(3))
    out, w, cache = F.multi_head_attention_forward(q, k, v, params, H, tiled=tiled, **kw)
    return {"out": out, "weights": w, "grads": F.multi_head_attention_backward(_dout(out, out.shape), cache)}


def _block(i):
    params = {n: i.put(p) for n, p in init_encoder_block(D, 16, i.rng, np.dtype(i.dtype)).items()}
    x, causal = i.normal(B, T, D), i.put(np.triu(np.ones((T, T), bool), 1))
    out, w, cache = encoder_block_forward(
        x, params, H, attn_mask=causal, head_mask=i.normal(H), dropout_p=0.2, rng=np.random.default_rng(5)
    )
    return {"out": out, "weights": w, "grads": encoder_block_backward(_dout(out, out.shape), cache)}


def _transformer(i):
    cfg = ModelConfig(vocab_size=7, output_sizes=(3, 7), d_model=D, num_heads=H, num_layers=2, d_ff=16, causal=True)
    params = init_params(cfg, np.random.default_rng(0), i.dtype)  # on the current backend: NumPy, then the leg
    ids = i.put(i.rng.integers(0, 7, (B, T)))
    logits, w, cache = transformer_forward(
        ids, params, H, 2, 2, causal=True, head_mask=i.normal(2, H), dropout_p=0.1, rng=np.random.default_rng(9)
    )
    return {"logits": logits, "weights": w, "grads": transformer_backward([_dout(z, z.shape) for z in logits], cache)}


def _loss(i):
    targets = i.rng.integers(0, 5, (B, T))
    targets[0, 1] = -100  # ignored
    loss, cache = cross_entropy_forward(i.normal(B, T, 5, scale=2.0), i.put(targets))
    return {"loss": loss, "dlogits": cross_entropy_backward(0.5, cache)}


def _embedding(i):
    ids = i.rng.integers(0, 6, (B, T))
    ids[0] = 2  # repeated ids: the backward must add their rows up
    out, cache = embedding_forward(i.put(ids), i.normal(6, D))
    return {"out": out, "dW": embedding_backward(_dout(out, out.shape), cache)}


def _one(fwd, bwd, *shapes, **kw):
    """A pair whose forward takes float arrays of ``shapes`` (and ``kw``; ``rng`` a seed)."""

    def case(i):
        seeded = {k: np.random.default_rng(v) if k == "rng" else v for k, v in kw.items()}  # a fresh generator each run
        out, cache = fwd(*(i.normal(*s) for s in shapes), **seeded)
        return {"out": out, "grads": bwd(_dout(out, out.shape), cache)}

    return case


def _softmax(i):
    mask = i.rng.random((3, 4, 5)) < 0.4
    mask[1, 2] = True  # a row with nothing allowed: zeros, not NaN
    out, cache = F.softmax_forward(i.normal(3, 4, 5, scale=3.0), i.put(mask))
    return {"out": out, "grads": F.softmax_backward(_dout(out, out.shape), cache)}


CASES = {
    "linear": _one(F.linear_forward, F.linear_backward, (B, T, 5), (5, 3), (3,)),
    "split_heads": _one(F.split_heads_forward, F.split_heads_backward, (B, T, D), num_heads=H),
    "combine_heads": _one(F.combine_heads_forward, F.combine_heads_backward, (B, H, T, 3)),
    "softmax_masked": _softmax,
    "sdpa_bool_mask": lambda i: _attention(
        i, F.scaled_dot_product_attention_forward, F.scaled_dot_product_attention_backward, i.bools(B, 1, T, S)
    ),
    "sdpa_float_mask_dropout": lambda i: _attention(
        i,
        F.scaled_dot_product_attention_forward,
        F.scaled_dot_product_attention_backward,
        i.normal(T, S),
        0.4,
        np.random.default_rng(1),
    ),
    "tiled_causal_bool_mask": lambda i: _attention(
        i, tiled_attention_forward, tiled_attention_backward, i.bools(T, S), causal=True, block_q=3, block_k=2, workers=1
    ),
    "tiled_float_mask": lambda i: _attention(
        i, tiled_attention_forward, tiled_attention_backward, i.normal(B, 1, T, S), block_k=2
    ),
    "mha_masks_head_mask_dropout": _mha,
    "mha_tiled": lambda i: _mha(i, tiled=True),
    "dropout": _one(dropout_forward, dropout_backward, (B, T, D), p=0.5, rng=2),
    "embedding": _embedding,
    "positional": _one(positional_encoding_forward, positional_encoding_backward, (B, T, D)),
    "layernorm": _one(layernorm_forward, layernorm_backward, (B, T, D), (D,), (D,)),
    "feedforward": _one(feedforward_forward, feedforward_backward, (B, T, D), (D, 16), (16,), (16, D), (D,)),
    "cross_entropy": _loss,
    "encoder_block": _block,
    "transformer": _transformer,
    "causal_and_merged_masks": lambda i: {
        "causal": mhattn.causal_mask(T, S),
        "merged": F.merge_masks(i.bools(T, S), i.bools(B, S), B, H, T, S, i.normal(1).dtype),
    },
}


@pytest.mark.parametrize("backend", LEGS_AND_DTYPES, indirect=True)
@pytest.mark.parametrize("name", list(CASES))
def test_functional_pair_matches_numpy(backend, name):
    assert_leg_matches_numpy(backend, CASES[name])


def _module(i, kind):
    """nn.MultiHeadAttention made under the current backend: forward, backward, every gradient."""
    kdim, vdim = (None, None) if kind == "causal_self" else (6, 5)
    mod = mhattn.MultiHeadAttention(D, H, kdim=kdim, vdim=vdim, dropout=0.3, dtype=i.dtype, seed=11)
    q = i.normal(B, T, D)
    kv = () if kind == "causal_self" else (i.normal(B, S, 6), i.normal(B, S, 5))
    pad = np.zeros((B, S), bool)
    pad[0, -1] = True
    kw = {
        "bool_mask_padding": dict(attn_mask=i.bools(T, S), key_padding_mask=i.put(pad), average_attn_weights=False),
        "float_mask_head_mask": dict(attn_mask=i.normal(T, S), head_mask=i.normal(B, H)),
        "causal_self": dict(is_causal=True, head_mask=i.normal(H)),
        "dropout_training": dict(key_padding_mask=i.put(pad), training=True, average_attn_weights=False),
    }[kind]
    out, w = mod(q, *kv, **kw)
    return {"params": mod.params, "out": out, "weights": w, "dinputs": mod.backward(_dout(out, out.shape)), "grads": mod.grads}


@pytest.mark.parametrize("backend", LEGS_AND_DTYPES, indirect=True)
@pytest.mark.parametrize("kind", ["bool_mask_padding", "float_mask_head_mask", "causal_self", "dropout_training"])
def test_multi_head_attention_module_matches_numpy(backend, kind):
    """Parameters land on the leg (use_backend), and everything it returns or fills stays there."""
    assert_leg_matches_numpy(backend, lambda i: _module(i, kind))


NOT_NUMPY = [leg for leg in LEGS if leg.values[0][0] != "numpy"]


@pytest.mark.parametrize("backend", NOT_NUMPY, indirect=True)
def test_mixing_libraries_is_a_type_error_naming_both(backend, rng):
    x, library = backend.floats(rng.standard_normal((B, T, D))), backend.xp.__name__.split(".")[-1]
    with pytest.raises(TypeError, match=rf"(?=.*numpy)(?=.*{library})"):
        F.linear_forward(x, rng.standard_normal((D, 3)))
    mod = mhattn.MultiHeadAttention(D, H, dtype="float64", seed=0)  # parameters on the leg
    with pytest.raises(TypeError, match=rf"(?=.*numpy)(?=.*{library})"):
        mod(rng.standard_normal((B, T, D)))


def _other_device(leg):
    if leg.name == "array_api_strict":
        import array_api_strict

        return array_api_strict.Device("CPU_DEVICE")
    if leg.name == "torch":
        import torch

        return torch.device("meta" if leg.device.type == "cpu" else "cpu")  # meta: shapes only, no memory
    pytest.skip(f"no second device to mix with on {leg}")


@pytest.mark.parametrize("backend", NOT_NUMPY, indirect=True)
def test_mixing_devices_is_a_value_error_naming_both(backend, rng):
    other = _other_device(backend)
    x = backend.floats(rng.standard_normal((B, T, D)))
    W = backend.xp.asarray(rng.standard_normal((D, 3)), device=other)
    names = [str(d).split("'")[1] if "'" in str(d) else str(d) for d in (backend.device, other)]
    pattern = rf"(?=.*{names[0]})(?=.*{names[1]})"
    with pytest.raises(ValueError, match=pattern):
        F.linear_forward(x, W)
    mod = mhattn.MultiHeadAttention(D, H, dtype="float64", seed=0)  # parameters on the leg's device
    with pytest.raises(ValueError, match=pattern):
        mod(backend.xp.asarray(rng.standard_normal((B, T, D)), device=other))
