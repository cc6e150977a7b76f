"""Counting the parameters of multi-head attention, two ways.

Standard (Vaswani et al. 2017, §3.2.2): every head i has ``W^Q_i, W^K_i, W^V_i`` of
shape ``(d_model, d_k)``, reading *all* d_model input features; side by side they
form three ``(d_model, d_model)`` matrices, and ``W^O`` is ``(d_model, d_model)``:
``4 d_model^2`` weights (+ ``4 d_model`` biases), whatever h is.

A formula often quoted for this count, ``h * 3 * (d_model/h)^2 + d_model^2``, counts another
architecture: head i projects only its own d_k-wide slice of the input, with
``(d_k, d_k)`` matrices; side by side these are *block-diagonal* ``(d_model, d_model)``
matrices. That is ``3 d_model^2 / h + d_model^2``, which equals ``4 d_model^2`` only at h = 1.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import array_namespace, asarray, to_numpy
from mhattn.nn.attention import MultiHeadAttention


def standard_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    """``4 d_model^2 (+ 4 d_model)``: independent of ``num_heads``."""
    d_k = d_model // num_heads
    per_head = 3 * d_model * d_k  # W^Q_i, W^K_i, W^V_i, each (d_model, d_k)
    return num_heads * per_head + d_model * d_model + (4 * d_model if bias else 0)


def count_block_diagonal(d_model: int, num_heads: int, bias: bool = False) -> int:
    """The often-quoted ``h * 3 * (d_model/h)^2 + d_model^2``: it counts block-diagonal projections."""
    d_k = d_model // num_heads
    return num_heads * 3 * d_k * d_k + d_model * d_model + (4 * d_model if bias else 0)


def block_diagonal_mask(d_model: int, num_heads: int) -> np.ndarray:
    """Bool ``(d_model, d_model)``: True where head i's slice-to-slice weights may be non-zero."""
    head = np.arange(d_model) // (d_model // num_heads)  # (d_model,) head of each feature
    return head[:, None] == head[None, :]


def block_diagonal_mha(d_model: int, num_heads: int, seed=None, dtype="float32") -> MultiHeadAttention:
    """A ``MultiHeadAttention`` whose W_q, W_k, W_v are zero off the h diagonal blocks.

    This is the architecture that formula counts: head i's query, key
    and value depend only on input features ``i*d_k:(i+1)*d_k``.
    """
    mha = MultiHeadAttention(d_model, num_heads, dtype=dtype, seed=seed)
    xp = array_namespace(mha.params["W_q"])
    keep = asarray(block_diagonal_mask(d_model, num_heads), like=mha.params["W_q"])  # (d_model, d_model) bool, beside W_q
    for name in ("W_q", "W_k", "W_v"):
        mha.params[name] = xp.where(keep, mha.params[name], 0.0)
    return mha


def free_parameters(mha: MultiHeadAttention, structural_zeros: dict | None = None) -> int:
    """Number of trainable scalars, leaving out entries fixed at zero by ``structural_zeros``.

    Args:
        structural_zeros: name -> bool mask of the entries that *may* be non-zero (an array of any backend).
    """
    structural_zeros = structural_zeros or {}
    free = {n: int(np.count_nonzero(to_numpy(structural_zeros[n]))) for n in structural_zeros}  # masks of any backend
    return sum(free[n] if n in free else math.prod(p.shape) for n, p in mha.params.items())


def attention_flops(batch: int, T: int, S: int, d_model: int, num_heads: int) -> dict:
    """Multiply-adds x 2 of one multi-head attention forward (self- or cross-attention), step by step.

    The matrix products do the same arithmetic for every h that divides d_model: the projections are
    ``(B T, d_model) @ (d_model, d_model)`` whatever h is, and the h score products of width d_k add up to one
    of width d_model. Only the softmax grows with h (one row of S per query and head).

    Returns:
        ``{"projections", "scores", "weighted_sum", "softmax_entries"}`` as Python ints: FLOPs of the four
        ``d_model x d_model`` projections (Q, K, V, output), of ``q k^T`` and of ``weights @ v``, and the number of
        entries the softmax exponentiates, ``B h T S``.
    """
    d_k = d_model // num_heads
    return {
        "projections": 2 * batch * (2 * T + 2 * S) * d_model * d_model,  # Q and output over T rows, K and V over S
        "scores": 2 * batch * num_heads * T * S * d_k,
        "weighted_sum": 2 * batch * num_heads * T * S * d_k,
        "softmax_entries": batch * num_heads * T * S,
    }
