"""mhattn on torch tensors against torch itself, and a model trained one step on a simulated device against NumPy.

1. ``nn.MultiHeadAttention`` under ``use_backend("torch")`` (CPU; CUDA where a GPU is there) on float64 tensors,
   against ``torch.nn.MultiheadAttention(batch_first=True)`` on the *same* tensors with the same weights: outputs,
   attention weights (per head and averaged) and every gradient, mhattn's hand-written backward against torch
   autograd, to 1e-9, with bool and float ``attn_mask``, ``key_padding_mask`` and ``is_causal``.
2. A 2-layer ``TransformerModel`` doing forward, backward and one Adam step on array-api-strict's ``device1``
   (which refuses host conversion, as a GPU would) ends where the same model on NumPy ends: float64, 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LEGS
from xp_testing import xp_assert_close

import mhattn
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.nn.torch_io import params_to_torch
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.optim import Adam

TORCH_LEGS = [leg for leg in LEGS if leg.values[0][0] == "torch"]
B, T, S, D, H = 2, 5, 6, 12, 3
TOL = dict(rtol=1e-9, atol=1e-9)

# name -> (key/value kind, masks): "self" is q = k = v; "cross" has kdim = vdim = D; "kdim" has kdim 5, vdim 7
CASES = {
    "self": ("self", ()),
    "self_is_causal": ("self", ("is_causal",)),
    "self_bool_mask_and_is_causal": ("self", ("bool", "is_causal")),
    "cross_bool_mask": ("cross", ("bool",)),
    "cross_float_mask": ("cross", ("float",)),
    "cross_key_padding_mask": ("cross", ("padding",)),
    "kdim_vdim_bool_mask_and_padding": ("kdim", ("bool", "padding")),
}


def _tensors(torch, device, kind, masks):
    """Inputs, ``dout``, the masks mhattn gets and the masks torch gets (its is_causal needs the mask itself)."""
    rng = np.random.default_rng(len(kind) + 10 * len(masks))
    t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
    S_ = T if kind == "self" else S
    q = t(rng.standard_normal((B, T, D)))
    k = q if kind == "self" else t(rng.standard_normal((B, S_, 5 if kind == "kdim" else D)))
    v = q if kind == "self" else t(rng.standard_normal((B, S_, 7 if kind == "kdim" else D)))
    ours, theirs = {}, {}
    if "bool" in masks:
        m = rng.random((T, S_)) < 0.4
        m[:, 0] = False  # every query keeps a key (torch gives NaN otherwise)
        ours["attn_mask"] = theirs["attn_mask"] = t(m)
    if "float" in masks:
        ours["attn_mask"] = theirs["attn_mask"] = t(rng.standard_normal((T, S_)))
    if "padding" in masks:
        pad = np.zeros((B, S_), bool)
        pad[0, -2:], pad[1, -1] = True, True
        ours["key_padding_mask"] = theirs["key_padding_mask"] = t(pad)
    if "is_causal" in masks:
        causal = t(np.triu(np.ones((T, S_), bool), 1))
        ours["is_causal"] = theirs["is_causal"] = True
        theirs["attn_mask"] = causal if "attn_mask" not in theirs else theirs["attn_mask"] | causal
    return (q, k, v), t(rng.standard_normal((B, T, D))), ours, theirs


def _torch_module(torch, device, kind, rng):
    kdim, vdim = (5, 7) if kind == "kdim" else (None, None)
    ref = torch.nn.MultiheadAttention(D, H, kdim=kdim, vdim=vdim, batch_first=True, dtype=torch.float64, device=device)
    with torch.no_grad():  # biases start at zero: give them values so their gradients are tested for real
        for p in ref.parameters():
            p.add_(torch.as_tensor(0.1 * rng.standard_normal(tuple(p.shape)), device=device))
    return ref


@pytest.mark.torch
@pytest.mark.parametrize("backend", TORCH_LEGS, indirect=True)
@pytest.mark.parametrize("name", list(CASES))
def test_multi_head_attention_on_torch_tensors_matches_torch(backend, name):
    torch = pytest.importorskip("torch")
    kind, masks = CASES[name]
    ref = _torch_module(torch, backend.device, kind, np.random.default_rng(5))
    mod = mhattn.MultiHeadAttention(D, H, kdim=ref.kdim, vdim=ref.vdim, dtype="float64")
    mod.load_torch_state_dict(ref.state_dict())  # the same weights, on the current backend: torch
    (q, k, v), dout, ours, theirs = _tensors(torch, backend.device, kind, masks)

    _, w_avg = mod(q, k, v, **ours)
    out, w = mod(q, k, v, average_attn_weights=False, **ours)
    dq, dk, dv = mod.backward(dout)
    got = {"out": out, "weights": w, "weights_avg": w_avg, "dquery": dq + dk + dv if kind == "self" else dq}
    if kind != "self":
        got.update(dkey=dk, dvalue=dv)
    assert all(backend.is_here(a) and a.dtype == torch.float64 for a in [*got.values(), *mod.grads.values()])
    got = {n: backend.to_numpy(a) for n, a in got.items()}
    got.update({f"grad/{n}": g for n, g in params_to_torch(mod.grads, D, mod.kdim, mod.vdim).items()})

    for a in {id(a): a for a in (q, k, v)}.values():  # the very tensors mhattn just used
        a.requires_grad_(True)
    t_out, t_w = ref(q, k, v, need_weights=True, average_attn_weights=False, **theirs)
    t_out.backward(dout)
    want = {"out": t_out, "weights": t_w, "weights_avg": t_w.mean(dim=1), "dquery": q.grad}
    if kind != "self":
        want.update(dkey=k.grad, dvalue=v.grad)
    want.update({f"grad/{n}": p.grad for n, p in ref.named_parameters()})
    want = {n: a.detach().cpu().numpy() for n, a in want.items()}

    assert sorted(got) == sorted(want)
    for n in want:
        xp_assert_close(got[n], want[n], err_msg=f"{name}/{n}", **TOL)


CFG = ModelConfig(vocab_size=11, output_sizes=(11, 3), d_model=16, num_heads=4, num_layers=2, d_ff=24, causal=True, dropout=0.1)


def _one_adam_step(put):
    """A 2-layer causal model with two classifiers and dropout: forward, loss, backward, one Adam step."""
    cfg = CFG
    model = TransformerModel(cfg, seed=7, dtype="float64")  # parameters on the current backend
    opt = Adam(model.params, lr=1e-2, weight_decay=0.01, clip=0.5)
    rng = np.random.default_rng(3)
    ids = put(rng.integers(0, 11, (3, 6)))
    targets = [put(rng.integers(0, c, (3, 6))) for c in cfg.output_sizes]
    logits, weights = model.forward(ids, training=True)
    losses = [cross_entropy_forward(z, y) for z, y in zip(logits, targets, strict=True)]
    model.backward([cross_entropy_backward(0.5, cache) for _, cache in losses])
    norm = opt.step(model.grads)
    after, _ = model.forward(ids)
    arrays = {**{f"param/{n}": p for n, p in model.params.items()}, **{f"grad/{n}": g for n, g in model.grads.items()}}
    arrays.update({f"logits/{i}": z for i, z in enumerate(logits)}, **{f"after/{i}": z for i, z in enumerate(after)})
    arrays.update({f"weights/{i}": w for i, w in enumerate(weights)}, **{f"adam_v/{n}": m for n, m in opt.v.items()})
    return arrays, [loss for loss, _ in losses], norm


def test_two_layer_model_with_an_adam_step_on_device1_ends_where_numpy_does():
    strict = pytest.importorskip("array_api_strict")
    device1 = strict.Device("device1")
    with mhattn.use_backend("numpy"):
        ref, ref_losses, ref_norm = _one_adam_step(np.asarray)
    with mhattn.use_backend("array_api_strict", "device1"):
        got, losses, norm = _one_adam_step(lambda a: strict.asarray(a, device=device1))
    assert sorted(got) == sorted(ref) and len(ref) > 60
    for n, a in got.items():
        xp_assert_close(a, ref[n], xp=strict, device=device1, rtol=1e-12, atol=1e-12, err_msg=n)
    assert losses == pytest.approx(ref_losses, rel=1e-12) and norm == pytest.approx(ref_norm, rel=1e-12)
    assert ref_norm > 0.5  # the clip acted, so the clipped path is the one compared
    with mhattn.use_backend("numpy"):
        init = TransformerModel(CFG, seed=7, dtype="float64").params
    # every parameter moved by about lr, but b_k: its gradient is 0 (softmax ignores a shift shared by a row)
    moved = {n: float(np.abs(ref[f"param/{n}"] - p).max()) for n, p in init.items()}
    assert min(d for n, d in moved.items() if not n.endswith("attn.b_k")) > 1e-3
