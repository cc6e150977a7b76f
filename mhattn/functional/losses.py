"""Softmax cross-entropy with an ignore index (torch's ``F.cross_entropy`` convention).

``L = -(1/N) sum_n log softmax(z_n)[y_n]`` over the N targets that are not
``ignore_index``. Its gradient is ``(softmax(z_n) - onehot(y_n)) / N``.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, one_hot, pick_last


class CrossEntropyCache(NamedTuple):
    shifted: object  # (N, C) the logits minus their row maximum
    logsumexp: object  # (N, 1) log of the row sums of exp(shifted); log-softmax = shifted - logsumexp
    targets: object  # (N,) targets with ignored ones replaced by 0
    valid: object  # (N,) bool, False where target == ignore_index
    count: int  # number of valid targets
    shape: tuple  # the logits' original shape (..., C)


def cross_entropy_forward(logits, targets, ignore_index=-100):
    """Mean negative log-likelihood of ``targets`` under ``softmax(logits)``.

    Args:
        logits: ``(..., C)`` float32/float64.
        targets: ``(...)`` integers in ``[0, C)`` or ``ignore_index``, on ``logits``' device; any integer dtype
            (compared as int64, so an unsigned target never equals a negative ``ignore_index``).
        ignore_index: targets equal to it add nothing to the loss or the gradient, whatever
            their row of logits holds (NaN and ±inf included).

    Returns:
        ``(loss, cache)``: ``loss`` a Python float; exactly 0.0 when no target counts (every target ignored,
        or no rows at all: an empty batch), and the gradient is then zero, not a division by zero.

    Raises:
        ValueError: shapes disagree, a target is outside ``[0, C)``, or the arrays are on two devices.
        TypeError: ``targets`` is not an integer array, or the arrays are of two libraries.
    """
    xp = array_namespace(logits, targets)
    C = logits.shape[-1]
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets {targets.shape} must match logits {logits.shape} without the class axis")
    if not xp.isdtype(targets.dtype, "integral"):
        raise TypeError(f"cross_entropy: targets must be an integer array, got {targets.dtype}")
    z = xp.reshape(logits, (-1, C))  # (N, C)
    # as int64: an unsigned dtype would wrap ignore_index (-100 is 156 in uint8 on torch) and match a class
    y = xp.astype(xp.reshape(targets, (-1,)), xp.int64)  # (N,)
    valid = y != ignore_index
    safe = xp.where(valid, y, 0)
    if y.shape[0] and (int(xp.min(safe)) < 0 or int(xp.max(safe)) >= C):
        raise ValueError(f"cross_entropy: targets must be in [0, {C}) or {ignore_index}")
    count = int(xp.count_nonzero(valid))
    # 0. ignored rows are replaced by zeros: whatever they hold (NaN, -inf) cannot reach the loss or the gradient
    if count < y.shape[0]:
        z = xp.where(valid[:, None], z, 0.0)  # (N, C)
    # 1. log-softmax, shifted by the row maximum for stability
    shifted = z - xp.max(z, axis=1, keepdims=True)  # (N, C)
    logsumexp = xp.log(xp.sum(xp.exp(shifted), axis=1, keepdims=True))  # (N, 1)
    # 2. pick the target's log-probability (log-softmax at the target only) and average over the valid targets
    picked = xp.where(valid, pick_last(xp, shifted, safe) - logsumexp[:, 0], 0.0)  # (N,)
    loss = -float(xp.sum(picked)) / count if count else 0.0
    return loss, CrossEntropyCache(shifted, logsumexp, safe, valid, count, logits.shape)


def cross_entropy_backward(dloss, cache: CrossEntropyCache):
    """Gradient of :func:`cross_entropy_forward` for an upstream scalar ``dloss`` (1.0 for the loss itself).

    Returns:
        ``dlogits`` with the logits' shape, namespace and device (zero when no target counts).
    """
    xp = array_namespace(cache.shifted)
    # step 2 was: mean over valid targets of -logp[y]
    # step 1 was: log-softmax -> d/dz = softmax - onehot
    # step 0 was: ignored rows replaced by zeros -> their gradient is zero (the valid factor below)
    grad = cache.shifted - cache.logsumexp  # (N, C) log-softmax, formed here so an evaluation-only forward skips it
    grad = xp.exp(grad)  # (N, C) softmax
    grad = grad - one_hot(xp, cache.targets, grad.shape[1], grad.dtype)  # (N, C) softmax - onehot(y)
    grad *= (xp.astype(cache.valid, grad.dtype) * (float(dloss) / max(cache.count, 1)))[:, None]  # (N, 1)
    return xp.reshape(grad, cache.shape)
