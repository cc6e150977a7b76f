"""Hard-concrete gates with an L0 penalty: prune heads by training (Voita et al. 2019, §6).

Each head gets a gate ``z_h ∈ [0, 1]`` that multiplies its output (through ``head_mask``).
The hard-concrete distribution (Louizos et al. 2018), with ``u ~ U(0, 1)``::

    s  = sigmoid((log u - log(1 - u) + log_alpha) / beta)     beta = 0.33 (temperature)
    z  = clip(s (r - l) + l, 0, 1)                             (l, r) = (-0.1, 1.1) (stretch)

``beta = 0.33`` is the default of Voita et al.'s released code (github.com/lena-voita/the-story-of-heads),
which these gates follow; Louizos et al. 2018 used ``beta = 2/3`` in their experiments. The stretch
(-0.1, 1.1) is the same in both.

The stretch lets z hit exactly 0 or 1. The expected number of open gates,
``L0 = sum_h sigmoid(log_alpha_h - beta log(-l / r))``, is differentiable in
``log_alpha``; the model minimises ``task loss + lambda * L0``, fine-tuned jointly with
the converged model's weights. At test time ``z = clip(sigmoid(log_alpha)(r - l) + l, 0, 1)``.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import to_numpy
from mhattn.optim import Adam
from mhattn.training.loop import multi_loss, progress_bar

BETA, LOW, HIGH = 0.33, -0.1, 1.1


def _sigmoid(x):
    """Logistic function without overflow: ``exp`` only ever sees ``-|x|`` (log α = ±800 is fine)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def sample_gates(log_alpha, batch_size, rng):
    """Training-time gates ``(L, B, h)`` and ``dz/dlog_alpha`` (same shape)."""
    u = rng.uniform(1e-6, 1.0 - 1e-6, size=(log_alpha.shape[0], batch_size, log_alpha.shape[1]))
    s = _sigmoid((np.log(u) - np.log1p(-u) + log_alpha[:, None, :]) / BETA)  # (L, B, h)
    stretched = s * (HIGH - LOW) + LOW
    z = np.clip(stretched, 0.0, 1.0)
    dz = ((stretched > 0) & (stretched < 1)) * (HIGH - LOW) * s * (1.0 - s) / BETA
    return z, dz


def expected_l0(log_alpha):
    """``(L0, dL0/dlog_alpha)``: the expected number of non-zero gates and its gradient."""
    p_open = _sigmoid(log_alpha - BETA * math.log(-LOW / HIGH))
    return float(p_open.sum()), p_open * (1.0 - p_open)


def deterministic_gates(log_alpha):
    """Test-time gates ``(L, h)`` in [0, 1] (Louizos et al. 2018's test-time estimator); 0 means the head is pruned."""
    return np.clip(_sigmoid(log_alpha) * (HIGH - LOW) + LOW, 0.0, 1.0)


def train_gates(model, task, *, l0_lambda=0.05, steps=200, batch_size=128, lr=1e-3, gate_lr=0.1, init=3.0, seed=0,
                progress=False):  # fmt: skip
    """Fine-tune ``model`` together with one gate per head; ``model.params`` are updated in place
    (pass a copy with its own arrays to keep the original).

    Args:
        l0_lambda: weight of the L0 penalty (per head, in nats).
        init: starting ``log_alpha`` (gates open).
        progress: a tqdm bar: True, False, or None (on a terminal only).

    Returns:
        dict with ``gates`` ``(L, h)`` test-time values, ``open`` (count), ``log_alpha``,
        ``history`` of ``(step, task loss, expected L0)`` and ``settled_at``: the number of steps
        after which the test-time gates no longer changed (0: never changed from their start).
    """
    rng = np.random.default_rng(seed)
    L, h = model.cfg.num_layers, model.cfg.num_heads
    log_alpha = np.full((L, h), float(init))
    opt = Adam(model.params, lr=lr, clip=1.0)
    gate_opt = Adam({"log_alpha": log_alpha}, lr=gate_lr)
    history, bar = [], progress_bar(steps, progress, desc="gates")
    test_time, settled_at = deterministic_gates(gate_opt.params["log_alpha"]), 0
    for step in range(steps):
        ids, targets = task.sample(batch_size, rng)
        z, dz = sample_gates(gate_opt.params["log_alpha"], batch_size, rng)
        logits, _ = model.forward(model.place(ids), head_mask=model.place(z, dtype="params"))
        loss, dlogits = multi_loss(logits, tuple(model.place(t) for t in targets))
        grads = model.backward(dlogits)
        l0, dl0 = expected_l0(gate_opt.params["log_alpha"])
        dalpha = (to_numpy(model.head_mask_grad) * dz).sum(axis=1) + l0_lambda * dl0  # (L, h)
        opt.step(grads)
        gate_opt.step({"log_alpha": dalpha})
        now = deterministic_gates(gate_opt.params["log_alpha"])
        if not np.array_equal(now, test_time):
            test_time, settled_at = now, step + 1
        if step % 50 == 0 or step == steps - 1:
            history.append((step, float(loss), l0))
        bar.update()
    bar.close()
    la = gate_opt.params["log_alpha"]
    gates = deterministic_gates(la)
    return {"gates": gates, "open": int((gates > 0).sum()), "log_alpha": la, "history": history, "settled_at": settled_at}
