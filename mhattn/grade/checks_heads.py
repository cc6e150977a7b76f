"""Checks for exercises 8-10: counting parameters, head importance, random removal.

References: ``MultiHeadAttention.num_parameters`` and :mod:`mhattn.course.counting` (8), the head-mask
gradient of :func:`mhattn.functional.multi_head_attention_backward` (9), and
:mod:`mhattn.grade.reference` (10).
"""

from __future__ import annotations

import numpy as np

from mhattn.course import counting
from mhattn.functional import linear_backward, multi_head_attention_backward, multi_head_attention_forward
from mhattn.grade import reference
from mhattn.grade.checks_mha import random_params
from mhattn.grade.checks_steps import randn, trials
from mhattn.grade.harness import GradeFailure, check_array, check_number, expect_raises, tol_for
from mhattn.nn.attention import MultiHeadAttention


# ---- exercise 8: counting parameters ------------------------------------------------------
def visible_ex08(mod, box):
    check_number("count_parameters(512, 8)", box.call(mod.count_parameters, 512, 8), 4 * 512**2 + 4 * 512, exact_int=True)
    check_number("count_block_diagonal(512, 8)", box.call(mod.count_block_diagonal, 512, 8), 3 * 512**2 // 8 + 512**2,
                 exact_int=True)  # fmt: skip
    expect_raises(box, ValueError, mod.count_parameters, 10, 3, what="count_parameters(10, 3)")


def hidden_ex08(mod, box, rng):
    for _ in range(4):
        h = int(rng.integers(2, 9))
        d, kdim, vdim = h * int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 40))
        bias = bool(rng.integers(2))
        ref = MultiHeadAttention(d, h, kdim=kdim, vdim=vdim, bias=bias).num_parameters()
        got = box.call(mod.count_parameters, d, h, kdim, vdim, bias)
        what = f"count_parameters(d_model={d}, num_heads={h}, kdim={kdim}, vdim={vdim}, bias={bias})"
        check_number(what, got, ref, exact_int=True)
        ref = MultiHeadAttention(d, h).num_parameters()
        check_number(f"count_parameters({d}, {h})", box.call(mod.count_parameters, d, h), ref, exact_int=True)
        ref = counting.count_block_diagonal(d, h)
        check_number(f"count_block_diagonal({d}, {h})", box.call(mod.count_block_diagonal, d, h), ref, exact_int=True)


# ---- exercise 9: head importance ----------------------------------------------------------
def _mha_case(rng, B, h, T, S, d_k, dtype):
    """Forward/backward of a random MHA with head mask ξ = 1 (B, h): heads, dconcat and dL/dξ."""
    d = h * d_k
    params = random_params(rng, d, dtype)
    x, kv, dout = randn(rng, (B, T, d), dtype), randn(rng, (B, S, d), dtype), randn(rng, (B, T, d), dtype)
    xi = np.ones((B, h), dtype=dtype)
    _, _, cache = multi_head_attention_forward(x, kv, kv, params, h, head_mask=xi)
    dconcat = linear_backward(dout, cache.out_proj)[0]  # (B, T, d_model)
    dxi = multi_head_attention_backward(dout, cache)[4]  # (B, h)
    return cache.heads, dconcat, dxi


def _importance(dxi):
    imp = np.abs(dxi).mean(axis=0)
    return imp / np.linalg.norm(imp)


def visible_ex09(mod, box):
    heads = np.zeros((1, 2, 1, 2))
    heads[0, 0, 0] = [1.0, 2.0]
    heads[0, 1, 0] = [3.0, 0.0]
    dconcat = np.array([[[1.0, 1.0, -1.0, 5.0]]])  # (1, 1, 4): head 0 gets [1, 1], head 1 gets [-1, 5]
    got = box.call(mod.head_mask_gradient, heads, dconcat)
    check_array("head_mask_gradient (visible example)", got, np.array([[3.0, -3.0]]), 1e-12)
    got = box.call(mod.head_importance, heads, dconcat, False)
    check_array("head_importance(..., normalize=False) (visible example)", got, np.array([3.0, 3.0]), 1e-12)


def hidden_ex09(mod, box, rng):
    for (B, h, T, S, d_k), dtype in trials(rng):
        heads, dconcat, dxi = _mha_case(rng, B, h, T, S, d_k, dtype)
        what = f"heads {heads.shape}, {np.dtype(dtype)}"
        tol = tol_for(dtype)
        check_array(f"head_mask_gradient({what})", box.call(mod.head_mask_gradient, heads, dconcat), dxi, tol, 1e-4)
        got = box.call(mod.head_importance, heads, dconcat)
        check_array(f"head_importance({what})", got, _importance(dxi).astype(dtype), tol, 1e-4)


# ---- exercise 10: random removal ----------------------------------------------------------
def visible_ex10(mod, box):
    check_array("removal_mask(4, [1, 3])", box.call(mod.removal_mask, 4, [1, 3]), np.array([1.0, 0.0, 1.0, 0.0]), 0)
    cost = np.array([1.0, 2.0, 3.0, 4.0])  # an additive loss: removing head i costs cost[i]
    loss = lambda xi: float(cost @ (1.0 - xi))
    check_number("expected_loss_change(additive loss, 4, 2)", box.call(mod.expected_loss_change, loss, 4, 2), 5.0)
    expect_raises(box, ValueError, mod.expected_loss_change, loss, 4, 5, what="expected_loss_change with k=5 > h=4")


def _mha_loss(rng, B, h, T, d_k):
    """loss(ξ) = mean squared distance of MultiHeadAttention(x; head_mask=ξ) to a random target."""
    d = h * d_k
    params = random_params(rng, d, np.float64)
    x, target = randn(rng, (B, T, d), np.float64), randn(rng, (B, T, d), np.float64)

    def loss(xi):
        if not isinstance(xi, np.ndarray) or xi.shape != (h,):
            raise GradeFailure(f"loss_fn was given a head mask of shape {getattr(xi, 'shape', type(xi))}, expected ({h},)")
        out = multi_head_attention_forward(x, x, x, params, h, head_mask=xi.astype(np.float64))[0]
        return float(((out - target) ** 2).mean())

    return loss


def hidden_ex10(mod, box, rng):
    for (B, h, T, _S, d_k), _ in trials(rng, 2):
        removed = sorted(rng.choice(h, size=int(rng.integers(1, h)), replace=False).tolist())
        got = box.call(mod.removal_mask, h, removed)
        check_array(f"removal_mask({h}, {removed})", got, reference.removal_mask(h, removed), 0)
        loss = _mha_loss(rng, B, h, T, d_k)
        k = int(rng.integers(1, h + 1))
        ref = reference.expected_loss_change(loss, h, k)
        check_number(f"expected_loss_change(MHA loss, h={h}, k={k})", box.call(mod.expected_loss_change, loss, h, k), ref, 1e-9)
        curve = box.call(mod.removal_curve, loss, h)
        check_array(f"removal_curve(MHA loss, h={h})", curve, reference.removal_curve(loss, h), 1e-9)
