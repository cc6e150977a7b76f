"""Optimisers on flat parameter dicts: SGD and Adam, with weight decay and gradient-norm clipping.

Adam: Kingma & Ba 2015, Algorithm 1 (bias-corrected moments). Its weight decay is
*decoupled* (AdamW, Loshchilov & Hutter 2019): ``p -= lr * wd * p`` beside the Adam
step, so decay does not pass through the adaptive scaling. SGD's weight decay is the
classic L2 term added to the gradient. Each step writes new arrays into ``params``;
the old arrays (held by caches) are left untouched.
"""

from __future__ import annotations

import math

from mhattn.backend import get_array_module


def clip_grad_norm(grads, max_norm):
    """Scale all gradients together so their global ℓ2 norm is at most ``max_norm``.

    Returns:
        ``(clipped, total_norm)``: a new dict and the norm before clipping (a float).
    """
    total = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    if max_norm is None or total <= max_norm:
        return dict(grads), total
    scale = max_norm / (total + 1e-12)
    return {n: g * scale for n, g in grads.items()}, total


def _check(params, grads):
    missing = set(params) - set(grads)
    if missing:
        raise KeyError(f"no gradient for parameter(s) {sorted(missing)[:5]}")


class SGD:
    """``v = momentum v + (g + wd p)``; ``p -= lr v``.

    Args:
        params: dict name -> array (updated by :meth:`step`).
        lr, momentum, weight_decay: the usual; clip: max global gradient norm or ``None``.
    """

    def __init__(self, params, lr=0.1, momentum=0.0, weight_decay=0.0, clip=None):
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.params, self.lr, self.momentum, self.weight_decay, self.clip = params, lr, momentum, weight_decay, clip
        self.velocity = {}

    def step(self, grads):
        """One update; returns the gradient norm before clipping."""
        _check(self.params, grads)
        grads, norm = clip_grad_norm(grads, self.clip)
        for n, p in self.params.items():
            g = grads[n] + self.weight_decay * p if self.weight_decay else grads[n]
            if self.momentum:
                g = self.momentum * self.velocity.get(n, 0.0) + g
                self.velocity[n] = g
            self.params[n] = p - self.lr * g
        return norm


class Adam:
    """Adam with decoupled weight decay (AdamW when ``weight_decay > 0``).

    Args:
        params: dict name -> array (updated by :meth:`step`).
        lr, betas, eps: Kingma & Ba's alpha, (beta1, beta2), epsilon.
        weight_decay: decoupled decay rate; skipped for 1-D parameters (biases, LayerNorm).
        clip: max global gradient norm, or ``None``.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, clip=None):
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.weight_decay, self.clip, self.t = weight_decay, clip, 0
        self.m = {n: get_array_module(p).zeros_like(p) for n, p in params.items()}
        self.v = {n: get_array_module(p).zeros_like(p) for n, p in params.items()}

    def step(self, grads):
        """One update (Algorithm 1); returns the gradient norm before clipping."""
        _check(self.params, grads)
        grads, norm = clip_grad_norm(grads, self.clip)
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1.0 - b1**self.t, 1.0 - b2**self.t
        for n, p in self.params.items():
            g = grads[n]
            self.m[n] = b1 * self.m[n] + (1.0 - b1) * g
            self.v[n] = b2 * self.v[n] + (1.0 - b2) * (g * g)
            xp = get_array_module(p)
            update = (self.m[n] / c1) / (xp.sqrt(self.v[n] / c2) + self.eps)
            if self.weight_decay and p.ndim > 1:
                update = update + self.weight_decay * p
            self.params[n] = p - self.lr * update
        return norm
