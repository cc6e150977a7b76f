"""The head-count sweep: Vaswani et al. 2017, Table 3 rows (A), on a tiny synthetic task.

Table 3 (A) varies the number of heads h at fixed d_model (so d_k = d_model / h shrinks as
h grows). Here the model is one ``MultiHeadAttention`` layer plus a linear readout, and the
task needs several positions at once: for every position t, name the tokens at positions
``t - o (mod T)`` for each offset ``o`` in ``OFFSETS``. One head can only blend positions,
so the tokens' order is lost; one head per offset keeps them apart in the concat. Many
heads of tiny d_k cannot pick a single position any more (with d_k = 1 the score matrix
has rank 1). The task and the readout live here; the loss and Adam are the package's own.

Batches are drawn on the host; the model moves them beside its parameters, which live on the current backend
and device (:func:`mhattn.set_backend`), so the same training runs on NumPy, torch or array-api-strict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mhattn.backend import array_namespace, asarray
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.nn.attention import MultiHeadAttention
from mhattn.optim import Adam

OFFSETS = (1, 2, 3, 4)


@dataclass(frozen=True)
class SweepConfig:
    vocab: int = 8  # V: token ids 0..V-1
    seq_len: int = 8  # T: positions, d_model = V + T (one-hot token | one-hot position)
    batch: int = 64  # sequences per step
    steps: int = 400  # Adam steps per model
    lr: float = 0.02  # Adam step size
    offsets: tuple = OFFSETS  # what each position must report

    @property
    def d_model(self) -> int:
        return self.vocab + self.seq_len


def make_batch(cfg: SweepConfig, rng: np.random.Generator):
    """Inputs ``x`` ``(B, T, d_model)`` float64 and targets ``(B, T, n_offsets)`` int64."""
    tokens = rng.integers(0, cfg.vocab, size=(cfg.batch, cfg.seq_len))  # (B, T)
    x = np.zeros((cfg.batch, cfg.seq_len, cfg.d_model))
    b, t = np.meshgrid(np.arange(cfg.batch), np.arange(cfg.seq_len), indexing="ij")
    x[b, t, tokens] = 1.0  # token one-hot
    x[b, t, cfg.vocab + t] = 1.0  # position one-hot
    src = (np.arange(cfg.seq_len)[:, None] - np.array(cfg.offsets)[None, :]) % cfg.seq_len  # (T, n_off)
    return x, tokens[:, src]  # (B, T, d_model), (B, T, n_off)


def cross_entropy(logits, targets):
    """Mean cross-entropy and its gradient, from :mod:`mhattn.functional.losses` (a log-softmax, no eps).

    Args:
        logits: ``(..., V)`` float, any backend; targets: ``(...)`` ints in ``[0, V)``, host or beside ``logits``.

    Returns:
        ``(loss, dlogits)``: a float (nats) and an array shaped like ``logits``, of its namespace and device.
    """
    loss, cache = cross_entropy_forward(logits, asarray(targets, like=logits))
    return loss, cross_entropy_backward(1.0, cache)


class OffsetModel:
    """``logits = MultiHeadAttention(x) @ W_r + b_r``, reshaped to ``(B, T, n_offsets, V)``.

    The readout is made beside the attention's parameters (the current backend and device); :meth:`forward`
    takes a host batch (from :func:`make_batch`) or one already there.
    """

    def __init__(self, cfg: SweepConfig, num_heads: int, seed: int):
        self.cfg = cfg
        self.mha = MultiHeadAttention(cfg.d_model, num_heads, dtype="float64", seed=seed)
        rng = np.random.default_rng(seed + 1_000)
        n_out = len(cfg.offsets) * cfg.vocab
        host = {"W_r": rng.standard_normal((cfg.d_model, n_out)) / np.sqrt(cfg.d_model), "b_r": np.zeros(n_out)}
        self.readout = {k: asarray(v, like=self.mha.params["W_q"]) for k, v in host.items()}

    def forward(self, x):
        xp = array_namespace(self.readout["W_r"])
        out, _ = self.mha.forward(asarray(x, like=self.readout["W_r"]), need_weights=False)  # (B, T, d_model)
        self._out = out
        logits = out @ self.readout["W_r"] + self.readout["b_r"]  # (B, T, n_off * V)
        return xp.reshape(logits, (*x.shape[:2], len(self.cfg.offsets), self.cfg.vocab))

    def backward(self, dlogits):
        xp = array_namespace(dlogits)
        d = xp.reshape(dlogits, (*dlogits.shape[:2], -1))  # (B, T, n_off * V)
        flat_out = xp.reshape(self._out, (-1, self._out.shape[-1]))  # (B T, d_model)
        grads = {"W_r": flat_out.mT @ xp.reshape(d, (-1, d.shape[-1]))}  # (d_model, n_off * V)
        grads["b_r"] = xp.sum(d, axis=(0, 1))
        self.mha.backward(d @ self.readout["W_r"].mT)  # fills mha.grads
        return grads


def _accuracy(logits, y) -> float:
    """The fraction of answers ``argmax logits == y`` (``y`` host targets, moved beside the logits)."""
    xp = array_namespace(logits)
    return float(xp.mean(xp.astype(xp.argmax(logits, axis=-1) == asarray(y, like=logits), logits.dtype)))


def train_model(cfg: SweepConfig, num_heads: int, seed: int = 0, eval_batches: int = 4):
    """Train one model; return ``(model, result)``, result ``{"num_heads", "d_k", "seed", "final_loss", "accuracy"}``.

    Accuracy is the fraction of (position, offset) answers right on fresh sequences. The model trains on the
    current backend and device; batches come from a seeded host generator, so every backend sees the same data.
    """
    rng = np.random.default_rng(seed)
    model = OffsetModel(cfg, num_heads, seed)
    opt_mha, opt_r = Adam(model.mha.params, lr=cfg.lr), Adam(model.readout, lr=cfg.lr)  # both update in place
    loss = float("nan")
    for _ in range(cfg.steps):
        x, y = make_batch(cfg, rng)
        loss, dlogits = cross_entropy(model.forward(x), y)
        grads_r = model.backward(dlogits)
        opt_mha.step({k: v for k, v in model.mha.grads.items() if k in model.mha.params})
        opt_r.step(grads_r)
    hits = [_accuracy(model.forward(x), y) for x, y in (make_batch(cfg, rng) for _ in range(eval_batches))]
    result = {"num_heads": num_heads, "d_k": cfg.d_model // num_heads, "seed": seed, "final_loss": loss,
              "accuracy": float(np.mean(hits))}  # fmt: skip
    return model, result


def train(cfg: SweepConfig, num_heads: int, seed: int = 0) -> dict:
    """The result dict of :func:`train_model`."""
    return train_model(cfg, num_heads, seed)[1]


def sweep(cfg: SweepConfig, heads=(1, 2, 4, 8, 16), seeds=(0, 1), progress=None) -> list[dict]:
    """:func:`train` for every h in ``heads`` and every seed; ``progress`` wraps the loop (e.g. tqdm)."""
    jobs = [(h, s) for h in heads for s in seeds]
    return [train(cfg, h, s) for h, s in (progress(jobs) if progress else jobs)]
