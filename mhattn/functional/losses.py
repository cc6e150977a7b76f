"""Softmax cross-entropy with an ignore index (torch's ``F.cross_entropy`` convention).

``L = -(1/N) sum_n log softmax(z_n)[y_n]`` over the N targets that are not
``ignore_index``. Its gradient is ``(softmax(z_n) - onehot(y_n)) / N``.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import get_array_module


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
        targets: ``(...)`` integers in ``[0, C)`` or ``ignore_index``.
        ignore_index: targets equal to it add nothing to the loss or the gradient, whatever
            their row of logits holds (NaN and ±inf included).

    Returns:
        ``(loss, cache)``: ``loss`` a Python float (0.0 when every target is ignored).

    Raises:
        ValueError: shapes disagree or a target is outside ``[0, C)``.
    """
    xp = get_array_module(logits, targets)
    C = logits.shape[-1]
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets {targets.shape} must match logits {logits.shape} without the class axis")
    z = logits.reshape(-1, C)  # (N, C)
    y = targets.reshape(-1)  # (N,)
    valid = y != ignore_index
    safe = xp.where(valid, y, 0)
    if y.size and (int(safe.min()) < 0 or int(safe.max()) >= C):
        raise ValueError(f"cross_entropy: targets must be in [0, {C}) or {ignore_index}")
    # 0. ignored rows are replaced by zeros: whatever they hold (NaN, -inf) cannot reach the loss or the gradient
    if not bool(valid.all()):
        z = xp.where(valid[:, None], z, 0)  # (N, C)
    # 1. log-softmax, shifted by the row maximum for stability
    shifted = z - z.max(axis=1, keepdims=True)  # (N, C)
    logsumexp = xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))  # (N, 1)
    # 2. pick the target's log-probability (log-softmax at the target only) and average over the valid targets
    count = int(valid.sum())
    picked = (shifted[xp.arange(y.size), safe] - logsumexp[:, 0]) * valid  # (N,)
    loss = -float(picked.sum()) / max(count, 1)
    return loss, CrossEntropyCache(shifted, logsumexp, safe, valid, count, logits.shape)


def cross_entropy_backward(dloss, cache: CrossEntropyCache):
    """Gradient of :func:`cross_entropy_forward` for an upstream scalar ``dloss`` (1.0 for the loss itself).

    Returns:
        ``dlogits`` with the logits' shape.
    """
    xp = get_array_module(cache.shifted)
    # step 2 was: mean over valid targets of -logp[y]
    # step 1 was: log-softmax -> d/dz = softmax - onehot
    # step 0 was: ignored rows replaced by zeros -> their gradient is zero (the valid factor below)
    grad = cache.shifted - cache.logsumexp  # (N, C) log-softmax, formed here so an evaluation-only forward skips it
    xp.exp(grad, out=grad)  # (N, C) softmax
    grad[xp.arange(grad.shape[0]), cache.targets] -= 1.0
    grad *= (cache.valid * (float(dloss) / max(cache.count, 1)))[:, None].astype(grad.dtype)
    return grad.reshape(cache.shape)
