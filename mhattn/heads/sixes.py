"""The course's question as asked, measured: k of one layer's h heads removed at random, layer by layer.

For each layer l of a model (every other layer keeps all its heads), on one fixed evaluation set:

* each head removed alone (ξ_lj = 0, Michel et al. 2019, §2), at the three levels of freezing of
  :mod:`mhattn.heads.effects` (total, heads-only, direct);
* the whole layer: all h heads removed, at the three levels, and all h replaced by their mean output (mean
  ablation, a softer "no attention in this layer" anchor);
* random k-subsets. When k = h/2 they are drawn as **complement pairs** (S, S'), so that Δ(S) + Δ(S') can be held
  against Δ(all h): every pair when ``n_subsets`` covers all C(h, k) subsets, else ``n_subsets / 2`` pairs drawn
  without replacement by the layer's own generator (``seed`` and the layer number: no two layers share draws).
  Each subset is evaluated once per level.

Every evaluation reuses :class:`~mhattn.heads.mask_eval.HeadMaskEvaluator`'s cache (the forward below layer l's head
mask is computed once) and runs only what the mask changes. Loss changes are in nats, accuracy changes are
fractions, both against the full model (positive dloss = worse, negative dacc = worse).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import numpy as np

from mhattn.heads.effects import EFFECTS
from mhattn.heads.importance import mean_ablation_params, mean_head_outputs
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.nn.device import host_dtype
from mhattn.training.textdata import bigram_logprobs

LEVELS = EFFECTS  # ("total", "heads-only", "direct")


@dataclass
class SixesSettings:
    n_remove: int = 6  # k heads of one layer removed at once (the question: six of twelve)
    n_subsets: int = 200  # random k-subsets per layer (complement pairs when k = h/2); all when it covers C(h, k)
    eval_size: int | None = None  # evaluation sequences; None: the task's (:func:`eval_size_for`)
    seed: int = 0  # the subsets' generator, one stream per layer


def draw_subsets(h: int, k: int, n: int, rng) -> tuple[list[list[int]], bool]:
    """``n`` random k-subsets of ``range(h)`` (all of them when ``n >= C(h, k)``), and whether they come in
    complement pairs (``subsets[2i]`` and ``subsets[2i + 1]`` together hold every head once).

    Pairs when ``2k == h``: ``n // 2`` of the ``C(h, k) / 2`` complement pairs, drawn without replacement.
    Otherwise ``n`` distinct subsets, drawn without replacement.

    Raises:
        ValueError: ``k`` outside ``1..h`` or ``n`` below 1 (2 when pairs are drawn).
    """
    if not 1 <= k <= h:
        raise ValueError(f"n_remove must be between 1 and the layer's {h} heads, got {k}")
    every = [list(s) for s in itertools.combinations(range(h), k)]
    if 2 * k == h:
        if n < 2:
            raise ValueError(f"n_subsets must be at least 2 (one complement pair), got {n}")
        firsts = [s for s in every if 0 in s]  # one subset of each pair: the one that holds head 0
        pick = range(len(firsts)) if n // 2 >= len(firsts) else sorted(rng.choice(len(firsts), n // 2, replace=False))
        pairs = [(firsts[i], sorted(set(range(h)) - set(firsts[i]))) for i in pick]
        return [s for pair in pairs for s in pair], True
    if n < 1:
        raise ValueError(f"n_subsets must be at least 1, got {n}")
    pick = range(len(every)) if n >= len(every) else sorted(rng.choice(len(every), n, replace=False))
    return [every[i] for i in pick], False


def eval_size_for(task, settings: SixesSettings) -> int:
    """``settings.eval_size``, else the task's default: 512 planted-roles sequences of 16 tokens (8,192 predictions per
    job), 64 text windows of 64 characters (4,096 predictions: what fits the main job's minute on 2 cores)."""
    return settings.eval_size or (512 if task.name == "roles" else 64)


def _change(result, base):
    return {"dloss": float(result["loss"] - base["loss"]), "dacc": float(result["acc"] - base["acc"])}


def _levels(ev, mask, base, last_layer):
    """``{level: {"dloss", "dacc"}}`` of one mask; heads-only is the total where no head reads the layer."""
    out = {}
    for level in LEVELS:
        if level == "heads-only" and last_layer:
            out[level] = dict(out["total"])
        else:
            out[level] = _change(ev.evaluate(mask, effect=level), base)
    return out


def measure_layer(model, ev, layer, settings: SixesSettings, means=None, tick=None) -> dict:
    """Every measurement of one layer (see the module's docstring), JSON-ready.

    Args:
        model: the :class:`~mhattn.nn.transformer.TransformerModel`; ev: its
            :class:`~mhattn.heads.mask_eval.HeadMaskEvaluator` on the evaluation set.
        layer: which layer's heads are removed; settings: :class:`SixesSettings`.
        means: ``(L, h, d_k)`` mean head outputs (:func:`~mhattn.heads.importance.mean_head_outputs`), for the mean
            ablation of the whole layer; tick: called once per subset evaluated (a progress bar's update).

    Returns:
        dict with ``layer``, ``num_heads``, ``n_remove``, ``paired``, ``subsets`` and per level
        (``total``, ``heads-only``, ``direct``) ``single[level]`` ``{"dloss": [h], "dacc": [h]}``,
        ``all[level]`` ``{"dloss", "dacc"}`` (plus ``all["mean"]``) and ``sixes[level]`` ``{"dloss": [n], "dacc": [n]}``.
    """
    L, h = model.cfg.num_layers, model.cfg.num_heads
    last = layer == L - 1
    base = ev.evaluate()
    rng = np.random.default_rng([settings.seed, layer])
    subsets, paired = draw_subsets(h, settings.n_remove, settings.n_subsets, rng)

    def mask_of(removed):
        m = np.ones((L, h))
        m[layer, removed] = 0.0
        return m

    single = [_levels(ev, mask_of([j]), base, last) for j in range(h)]
    whole = _levels(ev, mask_of(list(range(h))), base, last)
    if means is not None:
        whole["mean"] = _change(ev.evaluate(mask_of(list(range(h))), mean_ablation_params(model, layer, range(h), means)), base)
    sixes = []
    for s in subsets:
        sixes.append(_levels(ev, mask_of(s), base, last))
        if tick:
            tick()
    per = lambda rows, level, key: [r[level][key] for r in rows]  # noqa: E731
    return {
        "layer": layer, "num_heads": h, "n_remove": settings.n_remove, "paired": paired, "subsets": subsets,
        "single": {lv: {k: per(single, lv, k) for k in ("dloss", "dacc")} for lv in LEVELS}, "all": whole,
        "sixes": {lv: {k: per(sixes, lv, k) for k in ("dloss", "dacc")} for lv in LEVELS},
    }  # fmt: skip


def ngram_anchors(task, ids, targets) -> dict | None:
    """Loss (nats) and accuracy of the unigram and bigram models counted on the task's training text, on the same
    evaluation windows: no-attention baselines (a model that sees one character back at most). ``None`` for a task
    without a training text."""
    train = getattr(task, "train", None)
    if train is None:
        return None
    V = task.vocab_size
    uni = np.bincount(train, minlength=V) + 1.0  # add-one smoothed counts
    y = np.asarray(targets[0])
    out = {}
    for name, logp in (("unigram", np.log(uni / uni.sum())[None, :]), ("bigram", bigram_logprobs(train, V))):
        rows = logp[np.zeros_like(ids) if name == "unigram" else ids]  # (N, T, V)
        out[name] = {"loss": float(-np.take_along_axis(rows, y[..., None], -1).mean()),
                     "acc": float((rows.argmax(-1) == y).mean())}  # fmt: skip
    return out


def evaluator_for(model, task, settings: SixesSettings):
    """``(evaluator, means)`` on ``task.eval_set(settings.eval_size)``: the cache and the mean head outputs."""
    ids, targets = task.eval_set(eval_size_for(task, settings))
    return HeadMaskEvaluator(model, ids, targets), mean_head_outputs(model, ids)


def measure_model(model, task, settings: SixesSettings | None = None, layers=None, tick=None) -> dict:
    """:func:`measure_layer` for each of ``layers`` (default every layer) of one model, with its baseline and the
    no-attention anchors (:func:`ngram_anchors`), JSON-ready."""
    s = settings or SixesSettings()
    ev, means = evaluator_for(model, task, s)
    layers = range(model.cfg.num_layers) if layers is None else layers
    out = header(model, task, s, ev)
    out["layers"] = [measure_layer(model, ev, layer, s, means, tick) for layer in layers]
    return out


def header(model, task, settings: SixesSettings, ev) -> dict:
    """What a model's measurement records besides its layers: settings, shape, dtype, baseline and anchors."""
    ids, targets = task.eval_set(eval_size_for(task, settings))
    base = ev.evaluate()
    return {
        "settings": {**asdict(settings), "eval_size": eval_size_for(task, settings)},
        "num_layers": model.cfg.num_layers, "num_heads": model.cfg.num_heads,
        "dtype": str(host_dtype(model.params["embed.W"])), "predictions": int(np.size(targets[0])),
        "baseline": {"loss": base["loss"], "acc": base["acc"]}, "ngram": ngram_anchors(task, ids, targets),
    }  # fmt: skip


def subsets_count(h: int, k: int, n: int) -> int:
    """How many subsets :func:`draw_subsets` returns for these arguments."""
    total = math.comb(h, k)
    if 2 * k == h:
        return 2 * min(n // 2, total // 2)
    return min(n, total)


def measure_half(model, task, settings: SixesSettings, n_subsets: int = 100) -> dict:
    """The second question: half of *all* ``L*h`` heads removed at random, from any layers (total effect only), with
    every head removed (``all``), the full model's baseline and the no-attention anchors (:func:`ngram_anchors`).

    Returns:
        dict with ``n_remove`` (``L*h // 2``), ``subsets``, ``dloss``/``dacc`` per subset, ``all`` and the header.
    """
    ev, _ = evaluator_for(model, task, settings)
    L, h = model.cfg.num_layers, model.cfg.num_heads
    base, k = ev.evaluate(), L * h // 2
    rng = np.random.default_rng([settings.seed, L * h])
    subsets = [sorted(rng.choice(L * h, k, replace=False).tolist()) for _ in range(n_subsets)]
    rows = []
    for s in subsets:
        m = np.ones(L * h)
        m[s] = 0.0
        rows.append(_change(ev.evaluate(m.reshape(L, h)), base))
    out = header(model, task, settings, ev)
    out.update(n_remove=k, subsets=subsets, dloss=[r["dloss"] for r in rows], dacc=[r["dacc"] for r in rows],
               all=_change(ev.evaluate(np.zeros((L, h))), base))  # fmt: skip
    return out
