"""The 512 / 8 x 64 walkthrough: one real sentence through MultiHeadAttention(512, 8).

Each textbook step (Vaswani et al. 2017, §3.2) is called from mhattn.functional in
turn and its intermediate kept, so every shape can be printed and checked; the
result is compared with ``MultiHeadAttention.forward`` on the same weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mhattn import functional as F
from mhattn.backend import asarray, to_numpy
from mhattn.nn.attention import MultiHeadAttention

SENTENCE = "the animal did not cross the street because it was too tired"


def embed_sentence(sentence: str, d_model: int, seed: int = 0):
    """Whitespace tokens and a ``(1, T, d_model)`` float32 embedding from a seeded table.

    The table has one ``N(0, 1)`` row per distinct token (first-seen order), so a
    repeated word gets the same vector.
    """
    tokens = sentence.split()
    if not tokens:
        raise ValueError("sentence has no tokens")
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    table = np.random.default_rng(seed).standard_normal((len(vocab), d_model)).astype(np.float32)
    x = table[[vocab[t] for t in tokens]][None]  # (1, T, d_model)
    return tokens, asarray(x)


@dataclass
class Walkthrough:
    tokens: list
    steps: list = field(default_factory=list)  # (name, shape-string, array)
    weights: object = None  # (1, h, T, T)
    out: object = None  # (1, T, d_model)
    max_diff_vs_module: float = 0.0


def run(sentence: str = SENTENCE, d_model: int = 512, num_heads: int = 8, seed: int = 0) -> Walkthrough:
    """Run the steps one by one and record each intermediate with its shape."""
    tokens, x = embed_sentence(sentence, d_model, seed)
    mha = MultiHeadAttention(d_model, num_heads, seed=seed)
    p = mha.params
    wt = Walkthrough(tokens)
    add = lambda name, a: wt.steps.append((name, tuple(a.shape), a))
    add("input X", x)
    Q, _ = F.linear_forward(x, p["W_q"], p["b_q"])
    K, _ = F.linear_forward(x, p["W_k"], p["b_k"])
    V, _ = F.linear_forward(x, p["W_v"], p["b_v"])
    add("Q = X W_q + b_q", Q)
    add("K = X W_k + b_k", K)
    add("V = X W_v + b_v", V)
    q, _ = F.split_heads_forward(Q, num_heads)
    k, _ = F.split_heads_forward(K, num_heads)
    v, _ = F.split_heads_forward(V, num_heads)
    add("q split into heads", q)
    add("k split into heads", k)
    add("v split into heads", v)
    scores = (q @ k.mT) * (1.0 / math.sqrt(q.shape[-1]))  # (1, h, T, T) shown only; attention recomputes it
    add("scores q k^T / sqrt(d_k)", scores)
    heads, wt.weights, _ = F.scaled_dot_product_attention_forward(q, k, v)
    add("weights softmax(scores)", wt.weights)
    add("per-head outputs", heads)
    concat, _ = F.combine_heads_forward(heads)
    add("concat", concat)
    wt.out, _ = F.linear_forward(concat, p["W_o"], p["b_o"])
    add("output concat W_o + b_o", wt.out)
    ref, _ = mha.forward(x)
    wt.max_diff_vs_module = float(np.abs(to_numpy(ref) - to_numpy(wt.out)).max())
    return wt


def format_steps(wt: Walkthrough) -> str:
    """The steps as an aligned text table: name, shape."""
    lines = [f"{name:<28} {str(shape):>18}" for name, shape, _ in wt.steps]
    return "\n".join(lines)
