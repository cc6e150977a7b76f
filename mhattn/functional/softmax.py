"""Step 3b (numbered as in :mod:`~mhattn.functional.mha`): the row-wise softmax that turns scores into weights.

Vaswani et al. 2017, eq. (1): ``softmax(Q K^T / sqrt(d_k))``. Stable: the row
maximum is subtracted first, so ``exp`` never overflows. A masked entry is
*replaced* (its weight is exactly 0, bit for bit). A row
with no allowed entry gets all-zero weights and zero gradients, where torch's
eager path gives NaN (pytorch/pytorch#41508).
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, broadcasts_to, read_only


class SoftmaxCache(NamedTuple):
    probs: object  # (..., S) the forward output; the backward needs only this


def check_softmax_inputs(scores, mask):
    """The namespace of ``scores`` and ``mask``, once the mask is checked (see :func:`softmax_forward`'s Raises)."""
    xp = array_namespace(scores, mask)
    if mask is not None and mask.dtype != xp.bool:
        raise TypeError(f"softmax: mask must be boolean (True = not allowed), got dtype {mask.dtype}")
    if mask is not None and not broadcasts_to(mask.shape, scores.shape):
        raise ValueError(f"softmax: mask of shape {mask.shape} does not broadcast to scores {scores.shape}")
    return xp


def softmax_forward(scores, mask=None):
    """Softmax over the last axis with an optional boolean mask.

    Args:
        scores: ``(..., S)`` float32/float64 logits, any array-API array (NumPy, CuPy, torch,
            array-api-strict); ``-inf`` entries count as masked.
        mask: bool, broadcastable to ``scores``, of ``scores``' namespace and device; True = not allowed
            (torch's convention).

    Returns:
        ``(probs, cache)``; ``probs`` has the shape, dtype, namespace and device of ``scores``, rows sum
        to 1 (or to 0 for a row with nothing allowed). ``probs`` is read-only (a view
        of the cached array on NumPy, a copy elsewhere), so writing into it cannot change
        what :func:`softmax_backward` returns. ``scores`` is not written.

    Raises:
        TypeError: ``mask`` is not boolean; ``scores`` and ``mask`` from two libraries.
        ValueError: ``mask`` does not broadcast to ``scores``' shape; the two on two devices.
    """
    xp = check_softmax_inputs(scores, mask)
    # 1. masked entries are replaced by -inf, so exp gives exactly 0
    z = scores if mask is None else xp.where(mask, -xp.inf, scores)  # (..., S); a Python float keeps the dtype
    # 2. subtract the row maximum (a row that is all -inf uses 0 instead)
    m = xp.max(z, axis=-1, keepdims=True)  # (..., 1)
    z = z - xp.where(xp.isfinite(m), m, 0.0)  # (..., S), a fresh array
    # 3. exponentiate
    z = xp.exp(z)  # (..., S)
    # 4. normalise; an all-masked row has sum 0 and stays all 0
    s = xp.sum(z, axis=-1, keepdims=True)  # (..., 1)
    probs = z / xp.where(s == 0, 1.0, s)  # (..., S)
    return read_only(probs), SoftmaxCache(probs)


def softmax_backward(dprobs, cache: SoftmaxCache):
    """Jacobian-vector product of the softmax: ``dz = p * (dp - sum(dp * p))``.

    Args:
        dprobs: ``(..., S)`` upstream gradient, of the forward's namespace and device.
        cache: from :func:`softmax_forward`.

    Returns:
        ``dscores``, ``(..., S)``, dtype of ``dprobs``; 0 at masked entries.
    """
    p = cache.probs
    xp = array_namespace(dprobs, p)
    # steps 4-1 together: the full Jacobian diag(p) - p p^T applied to dprobs
    dot = xp.sum(dprobs * p, axis=-1, keepdims=True)  # (..., 1)
    return p * (dprobs - dot)  # (..., S)
