"""Direct effect, heads-only, total effect (McGrath et al. 2023): the evaluator's three levels of freezing after a
head removal, each checked against a reference built here from :mod:`mhattn.functional` forward calls.

The reference does not subtract contributions as the evaluator's direct effect does. It runs two residual streams
side by side: the full model's, which feeds every component's input, and the changed one, to which each layer adds
its *masked* attention output (``multi_head_attention_forward`` with ξ) and its full-model feed-forward output; the
final LayerNorm reads the changed stream with the full model's scale 1/σ.
"""

from __future__ import annotations

import numpy as np
import pytest

import mhattn
from mhattn.backend import array_namespace, device_of
from mhattn.functional.embedding import embedding_forward
from mhattn.functional.feedforward import feedforward_forward
from mhattn.functional.layernorm import layernorm_forward
from mhattn.functional.linear import linear_forward
from mhattn.functional.masks import causal_mask
from mhattn.functional.mha import PARAM_NAMES, multi_head_attention_forward
from mhattn.functional.positional import positional_encoding_forward
from mhattn.functional.transformer import block_params, transformer_forward
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.tasks import RolesTask

H = 4  # heads per layer in every test model


def _setup(num_layers, causal=False, dtype="float64", shake=0.3):
    """A small random model whose heads matter (parameters shaken), built on the current leg, and 23 sequences."""
    task = RolesTask(vocab_size=10, seq_len=7)
    cfg = ModelConfig(vocab_size=10, output_sizes=task.output_sizes, d_model=16, num_heads=H, num_layers=num_layers,
                      d_ff=24, causal=causal)  # fmt: skip
    with mhattn.use_backend("numpy"):
        host = TransformerModel(cfg, seed=3, dtype=dtype)
    rng = np.random.default_rng(7)
    for p in host.params.values():
        p += shake * rng.standard_normal(p.shape)
    model = TransformerModel(cfg, seed=3, dtype=dtype)  # on the current leg
    model.load_params(host.params)
    ids, targets = task.eval_set(23)
    return model, ids, targets


# ---- the reference ------------------------------------------------------------------------------------------------
def _reference_logits(model, ids, head_mask, level, params=None):
    """Logits of ``level`` ("total", "heads-only", "direct") from functional forward calls on the whole set at once.

    ``params``: other parameters for the masked attention outputs (a mean ablation's ``b_o``); the full-model stream
    always uses the model's own.
    """
    c, p = model.cfg, model.params
    q = p if params is None else params
    ids = model.place(ids)
    xi = model.place(head_mask, dtype="params")  # (L, h)
    if level == "total":
        return transformer_forward(ids, q, c.num_heads, c.num_layers, len(c.output_sizes), causal=c.causal, head_mask=xi)[0]
    xp = array_namespace(p["embed.W"])
    mask = causal_mask(ids.shape[1], xp=xp, device=device_of(ids)) if c.causal else None
    x, _ = positional_encoding_forward(embedding_forward(ids, p["embed.W"])[0])  # (N, T, d_model) full-model stream
    y = x  # (N, T, d_model) the stream that sees the removal
    for layer in range(c.num_layers):
        b, bq = block_params(p, layer), block_params(q, layer)
        a, _ = layernorm_forward(x, b["ln1.gamma"], b["ln1.beta"])  # every head reads the full-model stream
        attn = {n: bq[f"attn.{n}"] for n in PARAM_NAMES}
        m, _, _ = multi_head_attention_forward(a, a, a, attn, c.num_heads, attn_mask=mask, head_mask=xi[layer, ...])
        full = {n: b[f"attn.{n}"] for n in PARAM_NAMES}
        x1 = x + multi_head_attention_forward(a, a, a, full, c.num_heads, attn_mask=mask)[0]  # the full model's
        y = y + m
        f, _ = layernorm_forward(x1 if level == "direct" else y, b["ln2.gamma"], b["ln2.beta"])  # direct: the full input
        y = y + feedforward_forward(f, b["ff.W1"], b["ff.b1"], b["ff.W2"], b["ff.b2"])[0]
        f1, _ = layernorm_forward(x1, b["ln2.gamma"], b["ln2.beta"])
        x = x1 + feedforward_forward(f1, b["ff.W1"], b["ff.b1"], b["ff.W2"], b["ff.b2"])[0]  # the full model moves on
    if level == "direct":  # the final LayerNorm at the full model's scale: γ (y - mean y) / σ(x) + β
        inv_std = 1.0 / xp.sqrt(xp.var(x, axis=-1, keepdims=True) + 1e-5)
        z = (y - xp.mean(y, axis=-1, keepdims=True)) * inv_std * q["ln_f.gamma"] + q["ln_f.beta"]
    else:
        z, _ = layernorm_forward(y, q["ln_f.gamma"], q["ln_f.beta"])
    return tuple(linear_forward(z, q[f"out.{k}.W"], q[f"out.{k}.b"])[0] for k in range(len(c.output_sizes)))


def _score(logits, targets):
    """``loss``, ``acc`` and per classifier, as :func:`mhattn.training.loop.evaluate`, in NumPy float64."""
    out, losses, accs = {}, [], []
    for k, (z, y) in enumerate(zip(logits, targets, strict=True)):
        z = np.asarray(mhattn.to_numpy(z), dtype=np.float64)
        logp = z - z.max(axis=-1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(axis=-1, keepdims=True))
        losses.append(-np.take_along_axis(logp, y[..., None], axis=-1).mean())
        accs.append((z.argmax(axis=-1) == y).mean())
        out[f"loss/{k}"], out[f"acc/{k}"] = losses[-1], accs[-1]
    out.update(loss=np.mean(losses), acc=np.mean(accs), min_acc=np.min(accs))
    return out


def _assert_scores(got, want):
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def _random_masks(num_layers, rng, n=4):
    """Random 0/1 masks (at least one head removed) and one with fractional ξ."""
    masks = []
    while len(masks) < n:
        m = (rng.random((num_layers, H)) > 0.4).astype(float)
        if m.min() == 0.0:
            masks.append(m)
    masks.append(rng.choice([0.0, 0.3, 1.0], size=(num_layers, H)))
    return masks


# ---- the three levels against the reference -----------------------------------------------------------------------
@pytest.mark.parametrize("num_layers, causal", [(2, False), (3, True)])
def test_each_level_is_the_reference_forward_on_every_leg(backend, num_layers, causal):
    model, ids, targets = _setup(num_layers, causal)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)  # 23 sequences: batches of 8, 8, 7
    for mask in _random_masks(num_layers, np.random.default_rng(num_layers)):
        for level in ("total", "heads-only", "direct"):
            got = ev.evaluate(backend.floats(mask), effect=level)
            _assert_scores(got, _score(_reference_logits(model, ids, mask, level), targets))


def test_the_levels_differ_where_something_downstream_can_respond():
    model, ids, targets = _setup(3)
    ev = HeadMaskEvaluator(model, ids, targets)
    mask = np.ones((3, H))
    mask[0, [1, 2]] = 0.0  # first layer: later heads, LayerNorms and feed-forward layers all downstream
    loss = {level: ev.evaluate(mask, effect=level)["loss"] for level in ("total", "heads-only", "direct")}
    assert len({round(v, 9) for v in loss.values()}) == 3, loss


def test_one_layer_heads_only_is_the_total_effect_and_the_direct_effect_is_the_reference():
    """One layer: the heads read only the embeddings, so freezing the survivors changes nothing (the reference computes
    both from its own forward calls); the removed heads' own feed-forward layer and the final LayerNorm still respond,
    which the direct effect freezes."""
    model, ids, targets = _setup(1)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)
    for mask in _random_masks(1, np.random.default_rng(11)):
        total, heads_only = (_score(_reference_logits(model, ids, mask, lv), targets) for lv in ("total", "heads-only"))
        _assert_scores(total, heads_only)
        _assert_scores(ev.evaluate(mask, effect="heads-only"), total)
        direct = ev.evaluate(mask, effect="direct")
        _assert_scores(direct, _score(_reference_logits(model, ids, mask, "direct"), targets))
        assert abs(direct["loss"] - total["loss"]) > 1e-6


@pytest.mark.parametrize("mask", [None, np.ones((2, H))])
def test_direct_effect_of_removing_nothing_is_the_full_model(mask):
    model, ids, targets = _setup(2, causal=True)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)
    full = _score(transformer_forward(model.place(ids), model.params, H, 2, 3, causal=True)[0], targets)
    _assert_scores(ev.evaluate(mask, effect="direct"), full)


def test_last_layer_with_only_the_final_layernorm_downstream_direct_and_total_share_the_accuracy():
    """Removing heads of the last layer when its feed-forward output is zero and the readout has no bias: the total
    effect's logits are the direct effect's times σ_full/σ_removed > 0 at each position (only the final LayerNorm's
    scale responds), so the arg-max, and the accuracy, are the same, while the loss is not."""
    model, ids, targets = _setup(2)
    p = model.params
    for name in ("blocks.1.ff.W2", "blocks.1.ff.b2", "ln_f.beta", *(f"out.{k}.b" for k in range(3))):
        p[name][...] = 0.0
    ev = HeadMaskEvaluator(model, ids, targets)
    for heads in ([0], [1, 3], [0, 1, 2]):
        mask = np.ones((2, H))
        mask[1, heads] = 0.0
        total, direct = ev.evaluate(mask), ev.evaluate(mask, effect="direct")
        assert direct["acc"] == total["acc"] and direct["min_acc"] == total["min_acc"]
        assert abs(direct["loss"] - total["loss"]) > 1e-6
        assert total["acc"] != ev.evaluate()["acc"]  # the removal does change the predictions
    mask = np.ones((2, H))
    mask[0, 2] = 0.0  # an earlier layer: later heads and LN2 respond too, and the accuracies part
    assert ev.evaluate(mask, effect="direct")["acc"] != ev.evaluate(mask)["acc"]


def test_direct_loss_is_convex_in_the_head_mask():
    """With the final scale held, the direct logits are affine in ξ and cross-entropy is convex in the logits, so the
    loss along any segment between two masks lies on or below the chord (a free scale or free later layers break
    this; the total effect's loss need not be convex)."""
    model, ids, targets = _setup(3)
    ev = HeadMaskEvaluator(model, ids, targets)
    rng = np.random.default_rng(5)
    for _ in range(6):
        a, b = rng.random((3, H)), rng.random((3, H))
        ends = [ev.evaluate(m, effect="direct")["loss"] for m in (a, b)]
        for t in (0.25, 0.5, 0.75):
            mid = ev.evaluate((1 - t) * a + t * b, effect="direct")["loss"]
            assert mid <= (1 - t) * ends[0] + t * ends[1] + 1e-12


# ---- mean ablation, memo, errors ----------------------------------------------------------------------------------
def test_direct_effect_of_a_mean_ablation_uses_the_shifted_bias():
    from mhattn.heads.importance import ablation_deltas, mean_ablation_params, mean_head_outputs

    model, ids, targets = _setup(2)
    ev = HeadMaskEvaluator(model, ids, targets, batch_size=8)
    params = mean_ablation_params(model, 0, 2, mean_head_outputs(model, ids))
    mask = np.ones((2, H))
    mask[0, 2] = 0.0
    want = _score(_reference_logits(model, ids, mask, "direct", params), targets)
    _assert_scores(ev.evaluate(mask, params, effect="direct"), want)
    dloss, _ = ablation_deltas(model, ids, targets, mode="mean", evaluator=ev, effect="direct")
    assert dloss[0, 2] == pytest.approx(want["loss"] - ev.evaluate()["loss"], rel=1e-9)
    zero = ev.evaluate(mask, effect="direct")["loss"]
    assert abs(zero - want["loss"]) > 1e-6  # the mean is not zero: the shift matters


def test_levels_are_remembered_apart_and_frozen_is_heads_only():
    model, ids, targets = _setup(2)
    mask = np.ones((2, H))
    mask[0, [0, 3]] = 0.0
    ev = HeadMaskEvaluator(model, ids, targets)
    direct = ev.evaluate(mask, effect="direct")
    assert ev.evaluate(mask, frozen=True) == ev.evaluate(mask, effect="heads-only") != direct
    other = HeadMaskEvaluator(model, ids, targets)  # the other order gives the same numbers
    assert other.evaluate(mask, frozen=True) == ev.evaluate(mask, frozen=True) and other.evaluate(mask, effect="direct") == direct


@pytest.mark.parametrize("kwargs, match", [({"effect": "indirect"}, "effect must be one of"),
                                           ({"effect": "direct", "frozen": True}, "frozen=True means")])  # fmt: skip
def test_a_bad_level_is_refused(kwargs, match):
    model, ids, targets = _setup(2)
    with pytest.raises(ValueError, match=match):
        HeadMaskEvaluator(model, ids, targets).evaluate(np.ones((2, H)), **kwargs)


def test_direct_effect_refuses_parameters_it_holds_fixed():
    model, ids, targets = _setup(2)
    ev = HeadMaskEvaluator(model, ids, targets)
    stale = dict(model.params, **{"blocks.1.ff.W1": model.params["blocks.1.ff.W1"] * 2})
    with pytest.raises(ValueError, match=r"blocks\.1\.ff\.W1"):
        ev.evaluate(np.ones((2, H)), stale, effect="direct")
    assert ev._final is None  # refused before any work


# ---- the random removals of the prune experiment ------------------------------------------------------------------
def test_random_removals_carry_the_three_levels_in_loss_and_accuracy_only_when_asked():
    from mhattn.heads.prune import _mask, random_removals

    model, ids, targets = _setup(2)
    ev = HeadMaskEvaluator(model, ids, targets)
    base = ev.evaluate()
    plain = random_removals(model, None, base, 3, 4, np.random.default_rng(0), evaluator=ev)
    assert set(plain) == {"subsets", "dloss", "dacc", "frozen_dloss"}  # today's keys, unchanged
    r = random_removals(model, None, base, 3, 4, np.random.default_rng(0), evaluator=ev, direct=True)
    assert r["subsets"] == plain["subsets"] and r["dloss"] == plain["dloss"] and r["frozen_dloss"] == plain["frozen_dloss"]
    for i, removed in enumerate(r["subsets"]):
        for level, prefix in (("heads-only", "frozen_"), ("direct", "direct_")):
            want = ev.evaluate(_mask(2, H, removed), effect=level)
            assert r[prefix + "dloss"][i] == want["loss"] - base["loss"] and r[prefix + "dacc"][i] == want["acc"] - base["acc"]


def test_run_prune_adds_the_direct_effect_only_when_asked():
    from mhattn.heads.prune import PruneSettings, run_prune

    task = RolesTask(vocab_size=10, seq_len=7)
    model, _, _ = _setup(2, dtype="float32")
    s = PruneSettings(n_remove=3, n_random=3, eval_size=16, curve_orders=1, finetune_steps=0, gate_steps=0)
    plain, d = run_prune(model, task, s), run_prune(model, task, s, direct=True)
    assert set(d) - set(plain) == {"ablation_frozen_dacc", "ablation_direct_dloss", "ablation_direct_dacc"}
    assert set(d["random"]) - set(plain["random"]) == {"frozen_dacc", "direct_dloss", "direct_dacc"}
    assert all(d["random"][k] == plain["random"][k] for k in plain["random"])
    ids, targets = task.eval_set(16)
    mask = np.ones((2, H))
    mask[1, 2] = 0.0
    want = _score(_reference_logits(model, ids, mask, "direct"), targets)["loss"] - d["baseline"]["loss"]
    assert d["ablation_direct_dloss"][1][2] == pytest.approx(want, rel=1e-4, abs=1e-6)  # float32
    assert np.shape(d["ablation_direct_dacc"]) == np.shape(d["ablation_frozen_dacc"]) == (2, H)
