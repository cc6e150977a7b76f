"""Checks for exercises 6 and 7: the full multi-head forward and backward.

Compared with :func:`mhattn.functional.multi_head_attention_forward` / ``_backward``
on fresh random parameters (biases non-zero, so a forgotten bias shows).
"""

from __future__ import annotations

import numpy as np

from mhattn.functional import causal_mask, linear_forward, multi_head_attention_backward, multi_head_attention_forward
from mhattn.functional.mha import PARAM_NAMES
from mhattn.grade.checks_steps import randn, trials
from mhattn.grade.harness import Call, GradeFailure, array, check_array, tol_for, tuple_of

# The named checks (points in spec.EXERCISES): every call below counts for one of them.
PROJ, WEIGHTS, OUT = "output_projection", "mha_forward: attention weights", "mha_forward: output"
GRAD_GROUPS = (
    ("grads of W_o, b_o", ("b_o", "W_o")),
    ("grads of W_v, b_v", ("b_v", "W_v")),
    ("grads of W_k, b_k", ("b_k", "W_k")),
    ("grads of W_q, b_q", ("b_q", "W_q")),
)  # the order backprop reaches them
INPUT_GRADS = "dquery, dkey, dvalue"


def random_params(rng, d_model, dtype):
    """W_* ``(d_model, d_model)`` with variance 1/d_model, b_* ``(d_model,)`` small but non-zero."""
    params = {n: (rng.standard_normal((d_model, d_model)) / np.sqrt(d_model)).astype(dtype) for n in PARAM_NAMES[:4]}
    params.update({n: (0.1 * rng.standard_normal(d_model)).astype(dtype) for n in PARAM_NAMES[4:]})
    return params


def _rtol(dtype):
    return 1e-4 if np.dtype(dtype) == np.float32 else 1e-9


# ---- exercise 6: output projection + full forward -----------------------------------------
def visible_ex06():
    concat = np.arange(6, dtype=np.float64).reshape(1, 3, 2)
    W_o, b_o = np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([0.5, -0.5])
    what = "output_projection(concat (1, 3, 2), W_o, b_o)"
    rng = np.random.default_rng(0)
    x = randn(rng, (1, 3, 4), np.float64)
    return [
        Call("output_projection", (concat, W_o, b_o), array(what, linear_forward(concat, W_o, b_o)[0], 1e-12), check=PROJ),
        _forward_call(x, x, random_params(rng, 4, np.float64), 2, None, "self-attention, x (1, 3, 4), h=2"),
    ]


def _forward_call(query, kv, params, h, mask, what):
    out, w, _ = multi_head_attention_forward(query, kv, kv, params, h, attn_mask=mask)
    what, tol, rtol = f"mha_forward ({what})", tol_for(query.dtype), _rtol(query.dtype)

    def part(i, name):
        def judge(got):
            tuple_of(what, 2, "(out, weights)")(got)
            check_array(f"{what}: {name}", got[i], (out, w)[i], tol, rtol)

        return (OUT, WEIGHTS)[i], judge

    return Call("mha_forward", (query, kv, kv, params, h, mask), parts=(part(1, "weights"), part(0, "out")))


def hidden_ex06(rng):
    calls = []
    for (B, h, T, S, d_k), dtype in trials(rng):
        d = h * d_k
        params = random_params(rng, d, dtype)
        concat, W_o = randn(rng, (B, T, d), dtype), params["W_o"]
        expected = linear_forward(concat, W_o, params["b_o"])[0]
        judge = array(f"output_projection(concat {concat.shape} {np.dtype(dtype)})", expected, tol_for(dtype), _rtol(dtype))
        calls.append(Call("output_projection", (concat, W_o, params["b_o"]), judge, check=PROJ))
        query, kv = randn(rng, (B, T, d), dtype), randn(rng, (B, S, d), dtype)
        what = f"query {query.shape}, key/value {kv.shape}, h={h}, causal mask, {np.dtype(dtype)}"
        calls.append(_forward_call(query, kv, params, h, causal_mask(T, S, xp=np), what))
    return calls


# ---- exercise 7: full backward ------------------------------------------------------------
def _backward_call(query, kv, params, h, mask, dout, what):
    _, _, cache = multi_head_attention_forward(query, kv, kv, params, h, attn_mask=mask)
    dq, dk, dv, grads, _ = multi_head_attention_backward(dout, cache)
    tol, rtol, what = tol_for(query.dtype), _rtol(query.dtype), f"mha_backward ({what})"
    first = _first_example(query, kv, params, h, mask, dout) if query.shape[0] > 1 else None

    def shape(got):
        tuple_of(what, 4, "(dquery, dkey, dvalue, grads dict)")(got)
        if not isinstance(got[3], dict):
            raise GradeFailure(f"{what}: must return (dquery, dkey, dvalue, grads dict)")

    def grads_part(check, names):
        def judge(got):
            shape(got)
            for name in names:
                if name not in got[3]:
                    raise GradeFailure(f"{what}: grads has no {name}")
                hint = _first_hint(first[name]) if first is not None else None
                check_array(f"{what}: grads['{name}']", got[3][name], grads[name], tol, rtol, hint)

        return check, judge

    def inputs_part(got):
        shape(got)
        for name, i, exp in (("dvalue", 2, dv), ("dkey", 1, dk), ("dquery", 0, dq)):
            check_array(f"{what}: {name}", got[i], exp, tol, rtol)

    parts = tuple(grads_part(c, names) for c, names in GRAD_GROUPS) + ((INPUT_GRADS, inputs_part),)
    return Call("mha_backward", (dout, query, kv, kv, params, h, mask), parts=parts)


def _first_example(query, kv, params, h, mask, dout):
    """The parameter gradients of the first example alone (a hint: a gradient that forgot to sum over the batch)."""
    _, _, cache = multi_head_attention_forward(query[:1], kv[:1], kv[:1], params, h, attn_mask=mask)
    return multi_head_attention_backward(dout[:1], cache)[3]


def _first_hint(first):
    def hint(got):
        if got.shape == first.shape and np.allclose(got, first, rtol=1e-3, atol=1e-4):
            return "this is the gradient of the first example only: a parameter's gradient sums over every example"
        return None

    return hint


def visible_ex07():
    rng = np.random.default_rng(1)
    x = randn(rng, (1, 3, 4), np.float64)
    dout = randn(rng, (1, 3, 4), np.float64)
    return [_backward_call(x, x, random_params(rng, 4, np.float64), 2, None, dout, "self-attention, x (1, 3, 4), h=2")]


def hidden_ex07(rng):
    calls = []
    for i, ((B, h, T, S, d_k), dtype) in enumerate(trials(rng)):
        B = max(B, 2) if i == 0 else B  # one trial at least with two examples: a gradient of one example shows
        d = h * d_k
        params = random_params(rng, d, dtype)
        query, kv, dout = randn(rng, (B, T, d), dtype), randn(rng, (B, S, d), dtype), randn(rng, (B, T, d), dtype)
        what = f"query {query.shape}, key/value {kv.shape}, h={h}, causal mask, {np.dtype(dtype)}"
        calls.append(_backward_call(query, kv, params, h, causal_mask(T, S, xp=np), dout, what))
    return calls
