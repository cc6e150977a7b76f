"""The training loop: losses over several classifiers, evaluation, Adam steps, head dropout.

Head dropout (the ``roles-headdropout`` model): at every step each head of each
example is switched off with probability p through ``head_mask`` and the surviving
heads are rescaled by ``1/(1-p)`` (inverted dropout on whole heads, as in
Michel et al. 2019's ξ). No single head can then be relied on alone.

The model's parameters decide where the work runs: batches, targets and head masks drawn on the host
are moved to the parameters' namespace and device (:meth:`~mhattn.nn.transformer.TransformerModel.place`);
only scalars (the loss, the accuracy) come back.
"""

from __future__ import annotations

import math
import shutil
import sys
import time

import numpy as np

from mhattn.backend import array_namespace, asarray
from mhattn.backend.argtypes import as_real
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.nn.device import host_dtype
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.optim import Adam


def multi_loss(logits, targets):
    """Mean over the K classifiers of their cross-entropies.

    Returns:
        ``(loss, dlogits)``: a float and a tuple of K gradients ``(B, T, C_k)``.
    """
    K = len(logits)
    total, dlogits = 0.0, []
    for z, y in zip(logits, targets, strict=True):
        loss, cache = cross_entropy_forward(z, y)
        total += loss / K
        dlogits.append(cross_entropy_backward(1.0 / K, cache))
    return total, tuple(dlogits)


def correct_count(z, y, ignore_index=-100) -> int:
    """How many counted positions have ``argmax z == y``: ``z`` ``(..., C)`` logits, ``y`` integer targets of its
    shape less C; positions whose target is ``ignore_index`` are not counted (:func:`counted_positions`)."""
    xp = array_namespace(z, y)
    hit = (xp.argmax(z, axis=-1) == y) & (y != ignore_index)
    return int(xp.sum(xp.astype(hit, xp.int64)))


def counted_positions(y, ignore_index=-100) -> int:
    """How many targets of ``y`` count (are not ``ignore_index``): the denominator of the loss and the accuracy."""
    xp = array_namespace(y)
    return int(xp.count_nonzero(y != ignore_index))


def evaluate(model, ids, targets, head_mask=None, batch_size=512, names=None):
    """Loss and accuracy on a fixed set, in batches.

    Args:
        ids: ``(N, T)`` host ints; targets: K arrays ``(N, T)``; head_mask: ``(L, h)`` or ``None`` (host or
            on the parameters' device).

    Returns:
        dict ``loss`` (mean over classifiers, nats), ``acc`` (mean), ``min_acc``, and per
        classifier ``loss/<name>``, ``acc/<name>``: each classifier's loss and accuracy are means over its
        counted positions (targets other than -100), the same at every ``batch_size``.
    """
    hm = None if head_mask is None else model.place(head_mask, dtype="params")
    logits = (
        model.forward(model.place(ids[s : s + batch_size, ...]), head_mask=hm)[0] for s in range(0, ids.shape[0], batch_size)
    )
    return score_batches(logits, targets, batch_size, names)


def score_batches(logits, targets, batch_size=512, names=None):
    """The dict of :func:`evaluate` from the logits of consecutive batches of ``batch_size`` sequences.

    Each batch's mean loss is weighted by its number of counted targets (those not -100, the ignore index of
    :func:`~mhattn.functional.losses.cross_entropy_forward`), and accuracy divides by the counted targets, so
    both are the means over every counted position of the set, whatever the batch size (a batch of ignored
    targets weighs nothing; huggingface/transformers#24839 is this bug).

    Args:
        logits: an iterable over batches, each a tuple of K arrays ``(b, T, C_k)`` (any backend); targets: K host
            arrays ``(N, T)``, moved to the logits' device a batch at a time.

    Returns:
        See :func:`evaluate`; a classifier with no counted target has NaN loss and accuracy (a mean over
        nothing, as torch's ``cross_entropy`` gives).
    """
    names = names or [str(k) for k in range(len(targets))]
    K, N = len(targets), targets[0].shape[0]
    loss_sum, correct, counted = np.zeros(K), np.zeros(K), np.zeros(K)
    for s, batch in zip(range(0, N, batch_size), logits, strict=True):
        for k, (z, y) in enumerate(zip(batch, targets, strict=True)):
            yb = asarray(y[s : s + batch_size, ...], like=z)
            loss, cache = cross_entropy_forward(z, yb)
            loss_sum[k] += loss * cache.count  # the batch's mean times its counted targets: their sum
            correct[k] += correct_count(z, yb)
            counted[k] += cache.count
    with np.errstate(invalid="ignore", divide="ignore"):  # 0 / 0 for a classifier with nothing counted: NaN, as documented
        losses, accs = loss_sum / counted, correct / counted
    out = {"loss": float(losses.mean()), "acc": float(accs.mean()), "min_acc": float(accs.min())}
    for k, name in enumerate(names):
        out[f"loss/{name}"], out[f"acc/{name}"] = float(losses[k]), float(accs[k])
    return out


def head_dropout_mask(rng, num_layers, batch_size, num_heads, p, dtype):
    """``(L, B, h)`` keep-mask for head dropout: 0 with probability p, else ``1/(1-p)``.

    Raises:
        ValueError: ``p`` outside [0, 1) (at 1 every head would go and ``1/(1-p)`` is infinite), as the
            attention dropout does. TypeError: ``p`` is not a number.
    """
    p = as_real("head_dropout", p, 0.0, 1.0, high_open=True)
    return ((rng.random((num_layers, batch_size, num_heads)) >= p) / (1.0 - p)).astype(dtype)


def lr_at(step, steps, lr, warmup=100):
    """Linear warm-up, then cosine decay to 10% of ``lr``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * frac)))


def train(task, cfg: ModelConfig, *, steps=3000, batch_size=128, lr=3e-3, head_dropout=0.0, weight_decay=0.0,
          clip=1.0, seed=0, progress=True, log_every=100, model=None, head_mask=None, eval_data=None,
          eval_every=250):  # fmt: skip
    """Train (or fine-tune) a model on ``task`` with Adam.

    Args:
        task: a :class:`~mhattn.training.tasks.Task` (``RolesTask``, ``TextTask``).
        cfg: model configuration (ignored when ``model`` is given).
        head_dropout: probability of switching a head off per example and step, a number in [0, 1).
        model: continue training this model instead of a fresh one.
        head_mask: fixed ``(L, h)`` mask applied at every step (fine-tuning a pruned model).
        progress: a tqdm bar with loss and accuracy: True, False, or None (on a terminal only).
        eval_data: ``(ids, targets)`` scored every ``eval_every`` steps (for time-to-accuracy).

    Returns:
        ``(model, info)``: ``info`` has ``seconds``, ``steps``, ``history`` (list of
        ``(step, train loss, train acc)``) and ``val_history`` (``(step, seconds, loss, min_acc)``).

    Raises:
        ValueError: ``head_dropout`` outside [0, 1). TypeError: ``head_dropout`` is not a number.
    """
    head_dropout = as_real("head_dropout", head_dropout, 0.0, 1.0, high_open=True)  # before any work
    rng = np.random.default_rng(seed)
    model = model or TransformerModel(cfg, seed=seed)
    cfg = model.cfg
    dtype = host_dtype(model.params["embed.W"])  # the parameters' dtype, for masks drawn on the host
    opt = Adam(model.params, lr=lr, weight_decay=weight_decay, clip=clip)
    fixed = None if head_mask is None else model.place(head_mask, dtype="params")
    bar = progress_bar(steps, progress)
    history, val_history, t0 = [], [], time.perf_counter()
    for step in range(steps):
        ids, targets = task.sample(batch_size, rng)
        hm = fixed
        if head_dropout > 0:
            hm = model.place(head_dropout_mask(rng, cfg.num_layers, batch_size, cfg.num_heads, head_dropout, dtype))
            hm = hm if fixed is None else hm * fixed[:, None, :]
        targets = tuple(model.place(t) for t in targets)
        logits, _ = model.forward(model.place(ids), head_mask=hm, training=True)
        loss, dlogits = multi_loss(logits, targets)
        grads = model.backward(dlogits)
        opt.lr = lr_at(step, steps, lr, warmup=min(100, steps // 10))
        opt.step(grads)
        if step % log_every == 0 or step == steps - 1:
            accs = [correct_count(z, t) / max(counted_positions(t), 1) for z, t in zip(logits, targets, strict=True)]
            acc = float(np.mean(accs))
            history.append((step, loss, acc))
            bar.set_postfix(loss=f"{loss:.3f}", acc=f"{acc:.3f}")
        if eval_data is not None and ((step + 1) % eval_every == 0 or step == steps - 1):
            r = evaluate(model, *eval_data)
            val_history.append((step + 1, time.perf_counter() - t0, r["loss"], r["min_acc"]))
        bar.update(1)
    bar.close()
    return model, {"seconds": time.perf_counter() - t0, "steps": steps, "history": history, "val_history": val_history}


class _NoBar:
    def set_postfix(self, **kw):
        pass

    def update(self, n=1):
        pass

    def close(self):
        pass


BAR_POSITION = 0  # the terminal line of this process's bars (``mhattn prune --jobs`` gives each worker its own)


def progress_bar(total, enabled=True, desc="train", unit="step"):
    """A tqdm bar when asked for and installed (the ``course`` extra); otherwise one that does nothing.

    Args:
        enabled: True (tqdm.auto: a widget in notebooks, text elsewhere), False (no bar), None (a text bar on
            stderr only when stderr is a terminal: tqdm's ``disable=None``) or ``"text"`` (a text bar on stderr
            whether it is a terminal, a pipe or a file, for a long command whose output is piped).
    """
    if enabled is False:
        return _NoBar()
    try:
        if enabled is None or enabled == "text":
            from tqdm import tqdm

            # a terminal that reports no size (a bare pty: 0 x 0) gets no bar at all from tqdm, which then takes the
            # bar's line to be off the screen: 80 x 24 there
            size = shutil.get_terminal_size((80, 24))
            shape = {"ncols": min(size.columns or 80, 100), "nrows": size.lines or 24}
            return tqdm(
                total=total,
                desc=desc,
                unit=unit,
                file=sys.stderr,
                disable=None if enabled is None else False,
                leave=False,
                position=BAR_POSITION,
                mininterval=0.1 if enabled is None else 0.5,
                **shape,
            )
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit)
