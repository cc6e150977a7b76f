"""The honest mistakes: each submission must lose exactly its own exercise's points, with its words in the reason.

``WRONG``: small edits of solutions/ (tests/grader/test_grade.py grades each; tests/grader/classroom_cases.py LOST names
the checks each one loses).
"""

from __future__ import annotations

from grader_attacks.edits import EX02, EX05, EX11, Case, Edit

WRONG = (
    Case("split_no_transpose", "ex01_split_heads", (Edit("ex01_split_heads.py",
         "    out = x.reshape(B, T, num_heads, d_k)  # (B, T, h, d_k)\n"
         "    return np.ascontiguousarray(out.transpose(0, 2, 1, 3))  # (B, h, T, d_k)\n",
         "    return x.reshape(B, num_heads, T, d_k)  # right shape, but positions mix into heads\n"),),
         "in the wrong places"),
    Case("softmax_query_axis", "ex02_softmax", (Edit(EX02, "    m = z.max(axis=-1, keepdims=True)  # (..., 1)\n",
         "    m = z.max(axis=-2, keepdims=True)\n"), Edit(EX02, "    s = e.sum(axis=-1, keepdims=True)  # (..., 1)\n",
         "    s = e.sum(axis=-2, keepdims=True)\n")), "softmax over axis"),
    Case("softmax_backward_diagonal", "ex02_softmax", (Edit(EX02,
         "    dot = (dprobs * probs).sum(axis=-1, keepdims=True)  # (..., 1)\n    return probs * (dprobs - dot)  # (..., S)\n",
         "    return probs * (1 - probs) * dprobs  # only the Jacobian's diagonal\n"),),
         "keeps only the diagonal of the softmax Jacobian"),
    Case("scale_sqrt_d_model", "ex03_attention_forward", (Edit("ex03_attention_forward.py",
         "/ math.sqrt(q.shape[-1])", "/ math.sqrt(q.shape[1] * q.shape[-1])"),), "by 1/sqrt(h * d_k) = 1/sqrt(d_model)"),
    Case("causal_hides_diagonal", "ex03_attention_forward", (Edit("ex03_attention_forward.py",
         "dtype=bool), k=1)", "dtype=bool), k=0)"),), "(tolerance 0.0e+00); it also hides the diagonal"),
    Case("attention_backward_unscaled", "ex04_attention_backward", (Edit("ex04_attention_backward.py",
         "    dscores = dscores / math.sqrt(q.shape[-1])\n", ""),), "the forward's 1/sqrt(d_k) is missing"),
    Case("mha_grad_first_example", "ex07_mha_backward", (Edit("ex07_mha_backward.py",
         '    dconcat, grads["W_o"], grads["b_o"] = linear_backward(dout, co)  # (B, T, d_model)\n',
         '    dconcat, _, _ = linear_backward(dout, co)  # (B, T, d_model)\n'
         '    grads["W_o"], grads["b_o"] = concat[0].T @ dout[0], dout[0].sum(axis=0)  # the first example only\n'),),
         "the gradient of the first example only"),
    Case("concat_wrong_order", "ex05_combine_heads", (Edit(EX05, "out = x.transpose(0, 2, 1, 3)",
         "out = x[:, ::-1].transpose(0, 2, 1, 3)"),), "in the wrong places"),
    Case("hardcoded_count", "ex08_count_parameters", (Edit("ex08_count_parameters.py",
         "    return int(num_heads * per_head + d_model * d_model + (4 * d_model if bias else 0))\n",
         "    return 1_050_624  # the answer for (512, 8) that the visible test checks\n"),),
         "hidden test failed: count_parameters("),
    *(Case(name, "ex11_online_softmax", (Edit(EX11, old, new),), words) for name, old, new, words in (
        ("online_no_rescale", "alpha = np.exp(m - m_safe)", "alpha = np.ones_like(m)",
         "the running sum and output are not rescaled by exp(m_old - m_new)"),
        ("online_lse_is_max", "lse[..., 0].astype(q.dtype)", "m[..., 0].astype(q.dtype)", "lse is each row's maximum"),
        ("online_nan_on_masked_row", "m_safe = np.where(np.isfinite(m_new), m_new, 0.0)", "m_safe = m_new",
         "contains NaN or inf; NaN where a row's keys so far are all masked"),
        ("online_scale_sqrt_S", "np.sqrt(q.shape[-1])", "np.sqrt(k.shape[-2])", "a scaling by 1/sqrt(S), S keys instead"),
    )),
)  # fmt: skip
