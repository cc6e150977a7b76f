"""Redundancy between heads: how alike their attention patterns and their outputs are."""

from __future__ import annotations

import numpy as np

from mhattn.backend import to_numpy


def _cosine_matrix(x):
    """``(n, D)`` -> ``(n, n)`` cosine similarities of the rows."""
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    unit = x / np.where(norm > 0, norm, 1.0)
    return unit @ unit.T


def head_contributions(model, ids):
    """Each head's contribution to the attention output, ``head_h @ W_o[rows of h]``: ``(L, h, N*T*d_model)``."""
    model.forward(model.place(ids))
    d_k = model.cfg.d_model // model.cfg.num_heads
    out = []
    for layer, c in enumerate(model._cache.blocks):
        heads = to_numpy(c.attn.heads)  # (N, h, T, d_k)
        W_o = to_numpy(model.params[f"blocks.{layer}.attn.W_o"])  # (d_model, d_model)
        contrib = [heads[:, j] @ W_o[j * d_k : (j + 1) * d_k] for j in range(heads.shape[1])]  # h x (N, T, d_model)
        out.append(np.stack([x.ravel() for x in contrib]))
    return np.stack(out)


def head_similarity(model, ids, weights):
    """Per layer: cosine similarity of heads' attention maps and of their (centred) output contributions.

    Args:
        ids: ``(N, T)``; weights: ``(L, N, h, T, T)`` from :func:`~mhattn.heads.roles.attention_maps` on ``ids``.

    Returns:
        dict with ``attention`` and ``output`` (lists of ``(h, h)`` matrices) and, per layer,
        ``max_offdiag_attention``/``max_offdiag_output`` for each head (its closest twin).
    """
    contrib = head_contributions(model, ids)
    res = {"attention": [], "output": [], "max_offdiag_attention": [], "max_offdiag_output": []}
    for layer in range(weights.shape[0]):
        att = _cosine_matrix(weights[layer].transpose(1, 0, 2, 3).reshape(weights.shape[2], -1))
        c = contrib[layer] - contrib[layer].mean(axis=1, keepdims=True)
        outm = _cosine_matrix(c)
        for key, m in (("attention", att), ("output", outm)):
            res[key].append(np.round(m, 4).tolist())
            off = m - 2.0 * np.eye(len(m))
            res[f"max_offdiag_{key}"].append(np.round(off.max(axis=1), 4).tolist())
    return res
