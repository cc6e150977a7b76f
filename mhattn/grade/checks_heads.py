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
from mhattn.grade.harness import Call, array, checked, expect_raises, number, tol_for
from mhattn.grade.worker import Fn, make_callable
from mhattn.nn.attention import MultiHeadAttention

# The named checks (points in spec.EXERCISES): every call below counts for one of them.
COUNT, COUNT_KV, BLOCK = "count_parameters(d_model, h), and its error", "count_parameters with kdim, vdim, bias", \
    "count_block_diagonal"  # fmt: skip
GRAD, IMPORTANCE = "head_mask_gradient", "head_importance"
MASK, EXPECTED, CURVE = "removal_mask", "expected_loss_change, and its error", "removal_curve"


# ---- exercise 8: counting parameters ------------------------------------------------------
def visible_ex08():
    return [
        Call("count_parameters", (512, 8), number("count_parameters(512, 8)", 4 * 512**2 + 4 * 512, exact_int=True),
             check=COUNT),
        Call("count_block_diagonal", (512, 8),
             number("count_block_diagonal(512, 8)", 3 * 512**2 // 8 + 512**2, exact_int=True), check=BLOCK),
        *checked(COUNT, [expect_raises("ValueError", "count_parameters", 10, 3, what="count_parameters(10, 3)")]),
    ]  # fmt: skip


def hidden_ex08(rng):
    calls = []
    for _ in range(4):
        h = int(rng.integers(2, 9))
        d, kdim, vdim = h * int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 40))
        bias = bool(rng.integers(2))
        ref = MultiHeadAttention(d, h, kdim=kdim, vdim=vdim, bias=bias).num_parameters()
        what = f"count_parameters(d_model={d}, num_heads={h}, kdim={kdim}, vdim={vdim}, bias={bias})"
        calls += [
            Call("count_parameters", (d, h, kdim, vdim, bias), number(what, ref, exact_int=True), check=COUNT_KV),
            Call("count_parameters", (d, h),
                 number(f"count_parameters({d}, {h})", MultiHeadAttention(d, h).num_parameters(), exact_int=True),
                 check=COUNT),
            Call("count_block_diagonal", (d, h),
                 number(f"count_block_diagonal({d}, {h})", counting.count_block_diagonal(d, h), exact_int=True),
                 check=BLOCK),
        ]  # fmt: skip
    return calls


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


def visible_ex09():
    heads = np.zeros((1, 2, 1, 2))
    heads[0, 0, 0] = [1.0, 2.0]
    heads[0, 1, 0] = [3.0, 0.0]
    dconcat = np.array([[[1.0, 1.0, -1.0, 5.0]]])  # (1, 1, 4): head 0 gets [1, 1], head 1 gets [-1, 5]
    return [
        Call("head_mask_gradient", (heads, dconcat),
             array("head_mask_gradient (visible example)", np.array([[3.0, -3.0]]), 1e-12), check=GRAD),
        Call("head_importance", (heads, dconcat, False),
             array("head_importance(..., normalize=False) (visible example)", np.array([3.0, 3.0]), 1e-12), check=IMPORTANCE),
    ]  # fmt: skip


def hidden_ex09(rng):
    calls = []
    for (B, h, T, S, d_k), dtype in trials(rng):
        heads, dconcat, dxi = _mha_case(rng, B, h, T, S, d_k, dtype)
        what, tol = f"heads {heads.shape}, {np.dtype(dtype)}", tol_for(dtype)
        calls += [
            Call("head_mask_gradient", (heads, dconcat), array(f"head_mask_gradient({what})", dxi, tol, 1e-4), check=GRAD),
            Call("head_importance", (heads, dconcat),
                 array(f"head_importance({what})", _importance(dxi).astype(dtype), tol, 1e-4), check=IMPORTANCE),
        ]  # fmt: skip
    return calls


# ---- exercise 10: random removal ----------------------------------------------------------
def visible_ex10():
    loss = Fn("additive_loss", {"cost": np.array([1.0, 2.0, 3.0, 4.0])})  # removing head i costs cost[i]
    return [
        Call("removal_mask", (4, [1, 3]), array("removal_mask(4, [1, 3])", np.array([1.0, 0.0, 1.0, 0.0]), 0), check=MASK),
        Call("expected_loss_change", (loss, 4, 2), number("expected_loss_change(additive loss, 4, 2)", 5.0), check=EXPECTED),
        *checked(
            EXPECTED,
            [expect_raises("ValueError", "expected_loss_change", loss, 4, 5, what="expected_loss_change with k=5 > h=4")],
        ),
    ]


def _mha_loss(rng, B, h, T, d_k):
    """loss(ξ) = mean squared distance of MultiHeadAttention(x; head_mask=ξ) to a random target, as data."""
    d = h * d_k
    params = random_params(rng, d, np.float64)
    x, target = randn(rng, (B, T, d), np.float64), randn(rng, (B, T, d), np.float64)
    return Fn("mha_loss", {"x": x, "target": target, "params": params, "num_heads": h})


def hidden_ex10(rng):
    calls = []
    for (B, h, T, _S, d_k), _ in trials(rng, 2):
        removed = sorted(rng.choice(h, size=int(rng.integers(1, h)), replace=False).tolist())
        spec = _mha_loss(rng, B, h, T, d_k)
        loss = make_callable(spec.kind, spec.data)
        k = int(rng.integers(1, h + 1))
        ref = reference.expected_loss_change(loss, h, k)
        calls += [
            Call("removal_mask", (h, removed), array(f"removal_mask({h}, {removed})", reference.removal_mask(h, removed), 0),
                 check=MASK),
            Call("expected_loss_change", (spec, h, k), number(f"expected_loss_change(MHA loss, h={h}, k={k})", ref, 1e-9),
                 check=EXPECTED),
            Call("removal_curve", (spec, h),
                 array(f"removal_curve(MHA loss, h={h})", reference.removal_curve(loss, h), 1e-9), check=CURVE),
        ]  # fmt: skip
    return calls
