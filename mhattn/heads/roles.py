"""What each head attends to: maps, confidence (Voita et al. 2019, §4), positional and rare-token heads (§5).

Weights are ``(L, N, h, T, S)`` host arrays, as :func:`attention_maps` returns them.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import to_numpy

POSITIONAL_THRESHOLD = 0.9  # Voita: the maximum falls at one offset in at least 90% of positions


def attention_maps(model, ids, head_mask=None, batch_size=512):
    """Per-head attention weights of ``model`` on ``ids`` ``(N, T)``.

    The model runs where its parameters live; the weights come to the host (``to_numpy``) for statistics.

    Returns:
        ``(L, N, h, T, T)`` host array of the parameters' dtype.
    """
    hm = None if head_mask is None else model.place(head_mask, dtype="params")
    chunks = []
    for s in range(0, ids.shape[0], batch_size):
        _, weights = model.forward(model.place(ids[s : s + batch_size, ...]), head_mask=hm)
        chunks.append(np.stack([to_numpy(w) for w in weights]))  # (L, b, h, T, T)
    return np.concatenate(chunks, axis=1)


def head_confidence(weights):
    """Voita's confidence: the mean over queries of the head's largest weight. ``(L, N, h, T, S)`` -> ``(L, h)``."""
    return weights.max(axis=-1).mean(axis=(1, 3))


def positional_stats(weights):
    """For each head, the most frequent relative offset of its argmax and how often it is hit.

    Returns:
        ``(offset, fraction)``, both ``(L, h)``: ``offset`` = key position - query position.
    """
    L, N, h, T, S = weights.shape
    off = weights.argmax(axis=-1) - np.arange(T)[None, None, None, :]  # (L, N, h, T)
    offsets = np.arange(-(T - 1), S)  # every possible offset
    counts = (off[..., None] == offsets).sum(axis=(1, 3))  # (L, h, n_offsets)
    best = counts.argmax(axis=-1)
    return offsets[best], counts.max(axis=-1) / (N * T)


def rare_token_stats(weights, ids, rarity):
    """Fraction of queries whose largest weight falls on a key holding the sequence's rarest token.

    Args:
        weights: ``(L, N, h, T, S)``; ids: ``(N, S)``; rarity: ``(V,)``, larger = rarer.

    Returns:
        ``(L, h)`` fractions.
    """
    r = np.asarray(rarity)[ids]  # (N, S)
    is_rarest = r == r.max(axis=1, keepdims=True)  # (N, S) positions holding the rarest token
    arg = weights.argmax(axis=-1)  # (L, N, h, T)
    hit = is_rarest[np.arange(ids.shape[0])[None, :, None, None], arg]  # (L, N, h, T)
    return hit.mean(axis=(1, 3))


def detect_roles(weights, ids, rarity, threshold=POSITIONAL_THRESHOLD):
    """Label every head: ``"offset-1"``, ``"offset+1"`` (any offset), ``"rare"`` or ``"other"``.

    A head is positional when its argmax sits at one offset in ≥ ``threshold`` of the
    queries, rare-token when its argmax is on the rarest token in ≥ ``threshold`` of them.

    Returns:
        A list (one per head, layer-major) of dicts ``layer, head, role, offset,
        offset_fraction, rare_fraction, confidence``.
    """
    offset, frac = positional_stats(weights)
    rare = rare_token_stats(weights, ids, rarity)
    conf = head_confidence(weights)
    out = []
    for layer in range(weights.shape[0]):
        for head in range(weights.shape[2]):
            role = "other"
            if frac[layer, head] >= threshold:
                role = f"offset{int(offset[layer, head]):+d}"
            elif rare[layer, head] >= threshold:
                role = "rare"
            out.append({"layer": layer, "head": head, "role": role, "offset": int(offset[layer, head]),
                        "offset_fraction": float(frac[layer, head]), "rare_fraction": float(rare[layer, head]),
                        "confidence": float(conf[layer, head])})  # fmt: skip
    return out


def planted_match(roles):
    """For the roles task: which planted roles (offset -1, offset +1, rare) at least one head took on.

    Returns:
        dict ``planted -> list of "L<l>H<h>"`` heads with that role.
    """
    found = {"offset-1": [], "offset+1": [], "rare": []}
    for r in roles:
        if r["role"] in found:
            found[r["role"]].append(f"L{r['layer']}H{r['head']}")
    return found
