# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · Pruning heads in a deep model: Michel et al. on 4 layers × 8 heads
#
# **After this notebook you can**
# - say what the shipped deep character model is (layers, heads, data, training) and how far it is from a bigram
#   baseline, so that "removing a head costs little" is not a saturation effect;
# - read Michel et al.'s per-layer-normalised head importance and check it against single-head ablation with a rank
#   correlation;
# - read a global pruning curve by Michel et al.'s iterative pruning (10% of the heads at a time, importance
#   re-scored after each step) against random orders, with the spread over orders and over training seeds;
# - say which layers keep how many heads when half are pruned, and which heads Voita et al.'s trained gates close;
# - say what of the papers' findings this small model reproduces and what it cannot test.
#
# The measurements are heavy (minutes per training seed: the next cell prints them), so `benchmarks/deep_pruning.py`
# (in a clone of the repository; the wheel does not ship it) made them once and wrote
# `mhattn/data/text-deep-pruning.json`; this notebook reads that file, and `tests/lib/test_deep_model.py` re-computes a
# slice of it from the shipped checkpoint. `mhattn prune --task text-deep` measures the shipped seed on the same 256
# validation windows with the same importance, single-head ablations and gates, and adds random subsets and
# fine-tuning; its own pruning curve averages only 3 random orders and it has no bigram baseline, so the band over
# random orders and the other two seeds below come from the data file only.

# %%
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from mhattn.course.display import show
from mhattn.heads.expectation import bootstrap_interval
from mhattn.heads.prune import PruneSettings
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint
from mhattn.training.textdata import BLOCK, DOC_MODULES, N_CHARS

data = json.loads((DATA_DIR / "text-deep-pruning.json").read_text())
model, meta = load_checkpoint("text-deep")
cfg, seeds = model.cfg, data["seeds"]
n_params = sum(int(np.prod(p.shape)) for p in model.params.values())
print(f"model: {cfg.num_layers} layers x {cfg.num_heads} heads, d_model {cfg.d_model}, d_k {cfg.d_model // cfg.num_heads}, "
      f"d_ff {cfg.d_ff}, causal, {n_params:,} parameters")  # fmt: skip
print(f"text: {N_CHARS:,} characters (pydoc_data.topics, then the docstrings of {len(DOC_MODULES)} standard-library "
      f"modules); validation = every tenth block of {BLOCK:,}")  # fmt: skip
r = data["recipe"]
print(f"training: {r['steps']} Adam steps of {r['batch_size']} windows x {meta['task']['seq_len']} characters, lr {r['lr']}")
for s in seeds:
    print(
        f"  seed {s['seed']}: trained in {s['training_seconds']:.0f} s (2 shared cores), pruning measured in {s['measure_seconds']:.0f} s"
    )

# %% [markdown]
# ## Far from saturation
#
# A model whose loss is near zero hides what a head does: removing one barely moves the loss until a prediction
# crosses its margin (notebook 07's planted-roles models). Here the loss is compared with the bigram model
# counted on the same training text (add-one smoothing) and with a uniform guess over the model's character
# vocabulary, all on the same 256 validation windows of 64 characters.

# %%
losses = np.array([s["loss"] for s in seeds])
bigram = np.array([s["bigram_loss"] for s in seeds])
print(f"validation loss, nats per character: model {losses.min():.3f} to {losses.max():.3f} over {len(seeds)} seeds; "
      f"bigram {bigram[0]:.3f}; uniform {np.log(cfg.vocab_size):.3f}")  # fmt: skip
print(f"accuracy of the next character: {min(s['acc'] for s in seeds):.1%} to {max(s['acc'] for s in seeds):.1%}")
x = data["cross_eval"]
print(f"the 1-layer `text` model (1 x 12 heads, 2,500 steps on pydoc_data.topics only): on these windows "
      f"{x['deep_val']['text']:.3f} (text-deep seed 0: {x['deep_val']['text-deep']:.3f}); on its own validation windows "
      f"{x['text_val']['text']:.3f} (text-deep seed 0: {x['text_val']['text-deep']:.3f})")  # fmt: skip
probe = meta["training"]["probe_history"]  # (step, seconds, loss, accuracy) on 256 other validation windows
print("seed 0's probe loss during training:", [(st, round(lo, 3)) for st, _, lo, _ in probe])
assert np.all(losses < bigram - 0.9)  # far better than the bigram model on every seed
assert np.all(losses > 1.0)  # and far from zero
assert losses.max() - losses.min() < 0.05  # the seeds agree to a few hundredths
assert probe[-1][2] < probe[-2][2] - 0.02  # still improving over its last 250 steps
# each model wins on the text it was trained on: neither cross-evaluation is clean
assert x["deep_val"]["text"] < x["deep_val"]["text-deep"] and x["text_val"]["text-deep"] < x["text_val"]["text"]

# %% [markdown]
# Every seed beats the bigram model by a wide margin (close to a nat per character) and still pays more than a nat
# per character: the model uses context beyond one character and is far from saturated. Seed 0, the shipped
# checkpoint (the only seed whose training probes this notebook reads), is also not trained to convergence: its
# probe loss was still falling over the last 250 steps. The seeds agree to within a few hundredths of a nat.
#
# Against the 1-layer `text` model there is no clean comparison: that model was trained on the first nine tenths of
# `pydoc_data.topics`, which hold some of the validation blocks here, and validated on its last tenth, which lies in
# this model's training blocks. Each wins on the windows whose text it saw in training, so the printed numbers
# say nothing about depth; the bigram on the same windows is the like-for-like baseline.

# %% [markdown]
# ## Importance against ablation
#
# Michel et al. 2019 (§4.1) score head h by ``I_h = E_x |∂L(x)/∂ξ_h|`` at ξ = 1 and divide each layer's scores by
# their ℓ2 norm. The left panel shows these normalised scores for the shipped model (seed 0); the right panel shows
# the loss change when each head alone is removed (ξ_h = 0).

# %%
imp0, abl0 = np.array(seeds[0]["importance"]), np.array(seeds[0]["ablation_zero_dloss"])
fig, axes = plt.subplots(1, 2, figsize=(10, 3))
for ax, m, title in ((axes[0], imp0, "normalised importance"), (axes[1], abl0, "loss change when ablated alone (nats)")):
    im = ax.imshow(m, cmap="viridis")
    ax.set(title=title, xlabel="head", ylabel="layer", yticks=range(cfg.num_layers))
    fig.colorbar(im, ax=ax)
show(fig)
rho = np.array([s["spearman_importance_vs_ablation"] for s in seeds])
rho_raw = np.array([s["spearman_raw_importance_vs_ablation"] for s in seeds])
print(f"Spearman(normalised importance, ablation) per seed: {np.round(rho, 2).tolist()}")
print(f"Spearman(raw importance, ablation) per seed:        {np.round(rho_raw, 2).tolist()}")
print(f"costliest single ablation per seed: {[round(float(np.max(s['ablation_zero_dloss'])), 3) for s in seeds]} nats")
print(f"cheapest single ablation per seed:  {[round(float(np.min(s['ablation_zero_dloss'])), 4) for s in seeds]} nats")

# %% [markdown]
# - **No head is free.** Removing any single head raises the loss, in every seed; the costliest single head sits in
#   one of the first two layers in every seed, and the costliest head costs more than five times the cheapest.
# - **Raw importance predicts ablation; normalised importance much less.** The raw ``E|∂L/∂ξ_h|`` ranks the 32 heads
#   almost as single-head ablation does (rank correlation close to 1 in every seed). Divided by each layer's ℓ2
#   norm, the scores rank them only moderately (around one half). The normalisation puts every layer on the same
#   scale, and here the layers differ: the last layer's heads cost the least on average and have the smallest raw
#   scores, and normalising moves them up the ranking. Michel et al. normalise per layer (§4.1); on this model it
#   makes the score a worse predictor of what removing a single head costs.

# %%
abls = [np.array(s["ablation_zero_dloss"]) for s in seeds]
assert all(a.min() > 0 for a in abls)  # every head costs something alone
assert all(np.unravel_index(a.argmax(), a.shape)[0] <= 1 for a in abls)  # costliest head in layer 0 or 1
assert all(a.max() > 5 * a.min() for a in abls)
assert np.all(rho_raw > 0.85) and np.all(rho < 0.65) and np.all(rho_raw - rho > 0.3)
raws, imps = [np.array(s["importance_raw"]) for s in seeds], [np.array(s["importance"]) for s in seeds]
print("mean single-ablation cost per layer:", [np.round(a.mean(axis=1), 3).tolist() for a in abls])
print("mean raw importance per layer:      ", [np.round(r.mean(axis=1), 3).tolist() for r in raws])
assert all(np.argmin(a.mean(axis=1)) == cfg.num_layers - 1 for a in abls)  # the last layer: cheapest on average
assert all(np.argmin(r.mean(axis=1)) == cfg.num_layers - 1 for r in raws)  # and smallest raw scores


def last_layer_rank(score):
    """Mean rank (0 = least important) of the last layer's heads among all 32."""
    return float(np.argsort(np.argsort(score.ravel()))[-cfg.num_heads :].mean())


print(
    "mean rank of the last layer's heads, raw -> normalised:",
    [(last_layer_rank(r), last_layer_rank(i)) for r, i in zip(raws, imps, strict=True)],
)
assert all(last_layer_rank(i) > last_layer_rank(r) + 5 for r, i in zip(raws, imps, strict=True))

# %% [markdown]
# ## The pruning curve
#
# Heads are removed from all 32 at once (global pruning): by Michel et al.'s iterative pruning (§4.2: 10% of the
# heads at a time in order of increasing importance, the importance of the heads left re-scored after each step, as
# the public implementation, HuggingFace's `run_bertology.py`, does; the glossary tells it apart from one-at-a-time
# pruning), and along random orders. The band is the 10th to 90th percentile over the random orders,
# the line their median; one panel per training seed.

# %%
fig, axes = plt.subplots(1, len(seeds), figsize=(4 * len(seeds), 3), sharey=True)
for ax, s in zip(np.atleast_1d(axes), seeds, strict=True):
    c = s["curve"]
    f = 100 * np.array(c["fraction_removed"])
    ax.fill_between(f, c["random_loss_p10"], c["random_loss_p90"], alpha=0.3, label=f"random, 10-90% of {data['orders']} orders")
    ax.plot(f, c["random_loss_median"], label="random, median")
    ax.plot(f, c["importance_loss"], "o-", label="by importance (re-scored)")
    ax.axhline(s["bigram_loss"], color="grey", ls="--", lw=1, label="bigram")
    ax.set(title=f"seed {s['seed']}", xlabel="% of heads removed")
axes[0].set_ylabel("validation loss (nats)")
axes[0].legend(fontsize=7)
show(fig)
for s in seeds:
    c = s["curve"]
    print(f"seed {s['seed']}: % removed " + " ".join(f"{100 * x:5.0f}" for x in c["fraction_removed"]))
    print("  by importance   " + " ".join(f"{x:5.2f}" for x in c["importance_loss"]))
    print("  random median   " + " ".join(f"{x:5.2f}" for x in c["random_loss_median"]))
    print("  random 10%      " + " ".join(f"{x:5.2f}" for x in c["random_loss_p10"]))
    print("  random 90%      " + " ".join(f"{x:5.2f}" for x in c["random_loss_p90"]))

# %% [markdown]
# The median of 25 random orders is itself a sample, so the cell below compares the importance order with its 95%
# bootstrap interval (`bootstrap_interval`, resampling the orders), not with the median alone.
#
# - **Importance helps for the first heads.** Removing the first 10% and 20% of heads by importance costs less than
#   the random-order median, below its whole interval, in every seed.
# - **The advantage does not last.** At half the heads removed, the importance order is no better than the random
#   median in any seed, and worse than its whole interval in two of the three. Those two are the seeds in which the
#   importance order has emptied a whole layer by then (next section); the third keeps half of that layer and lies
#   inside the interval of the random median. Three seeds do not show that the emptied layer is the cause.
# - **There is no free 20–40%.** Removing a fifth of the heads, even by importance, gives up more than a tenth of
#   the model's advantage over the bigram baseline in every seed; removing two fifths gives up more than half of it.

# %%
base = np.array([s["loss"] for s in seeds])
imp_curve = np.array([s["curve"]["importance_loss"] for s in seeds])  # (seeds, points): 0, 10, ..., 90%
rand_med = np.array([s["curve"]["random_loss_median"] for s in seeds])
gain = bigram - base  # the model's advantage over the bigram, per seed
print("share of the advantage over the bigram given up at 10 / 20 / 30 / 40% by importance, per seed:")
print(np.round((imp_curve[:, 1:5] - base[:, None]) / gain[:, None], 2))
med_ci = np.array([[bootstrap_interval(np.array(s["curve"]["random_loss_all"])[:, i], np.median) for i in range(10)]
                   for s in seeds])  # (seeds, points, 2): 95% interval of the median over the random orders  # fmt: skip
for s, ci, ic in zip(seeds, med_ci, imp_curve, strict=True):
    print(f"seed {s['seed']}: by importance at 10 / 20 / 50%: "
          + ", ".join(f"{ic[i]:.3f} (random median's interval {ci[i, 0]:.3f} to {ci[i, 1]:.3f})" for i in (1, 2, 5)))  # fmt: skip
assert np.all(imp_curve[:, 1:3] < med_ci[:, 1:3, 0])  # 10% and 20%: below the random median's whole interval
assert np.all(imp_curve[:, 5] > med_ci[:, 5, 0])  # 50%: no better than the random median
worse = imp_curve[:, 5] > med_ci[:, 5, 1]  # worse than the random median's whole interval at 50%
emptied = np.array([min(s["curve"]["survivors_per_layer_at_50"]) == 0 for s in seeds])  # a layer with no head left
assert worse.sum() == 2 and np.array_equal(worse, emptied)
assert np.all((imp_curve[:, 2] - base) / gain > 0.1) and np.all((imp_curve[:, 4] - base) / gain > 0.5)

# %% [markdown]
# ## Which layers keep their heads
#
# When half of the heads are pruned by importance, how many of each layer's eight survive?

# %%
surv = np.array([s["curve"]["survivors_per_layer_at_50"] for s in seeds])  # (seeds, layers)
for s, row in zip(seeds, surv, strict=True):
    print(f"seed {s['seed']}: heads left per layer (layer 0 first): {row.tolist()}")

# %% [markdown]
# Pruning by importance does not take heads evenly: the last two layers keep most of their heads in every seed,
# the first keeps only a few, and layer 1 is emptied in two of the three seeds while keeping half in the third,
# so how far an early layer is thinned depends on the seed. In seed 0 the emptied layer holds the costliest
# single head of the whole model: a head's cost alone does not keep it.

# %%
assert np.all(surv[:, 2:] >= 5)  # the last two layers keep at least 5 of 8
assert np.all(surv[:, 0] <= 3)  # the first keeps at most 3
assert np.sum(surv[:, 1] == 0) == 2 and np.sum(surv[:, 1] >= 4) == 1  # layer 1: emptied in two seeds, half kept in one
assert np.unravel_index(abls[0].argmax(), abls[0].shape)[0] == 1 and surv[0, 1] == 0  # seed 0: the costliest head's layer emptied

# %% [markdown]
# ## Voita et al.'s gates
#
# Voita et al. 2019 (§6) prune by training: each head gets a hard-concrete gate, and an L0 penalty (weight λ) makes
# closing gates pay, while the model is fine-tuned with them (`mhattn.heads.gates`). The data file holds the gates
# trained exactly as `mhattn prune` trains them (its default steps and λ, printed below), one run per training seed;
# seed 0's are the ones `mhattn prune --task text-deep` reports. Which heads do they close, and do those agree with
# the scores above?


# %%
def agreement(closed, score):
    """Share of the k closed heads among the k heads with the lowest ``score``."""
    k = int(closed.sum())
    return float(closed.ravel()[np.argsort(score.ravel())[:k]].mean())


gates = [np.array(s["gates"]["values"]) for s in seeds]
print(f"gates trained for {seeds[0]['gates']['steps']} steps with λ = {seeds[0]['gates']['lambda']} in every seed")
assert all((s["gates"]["steps"], s["gates"]["lambda"]) == (PruneSettings().gate_steps, PruneSettings().l0_lambda) for s in seeds)
for s, g, a, r, i in zip(seeds, gates, abls, raws, imps, strict=True):
    closed = g == 0
    print(f"seed {s['seed']}: {int(closed.sum())} of {g.size} gates closed; open per layer {(~closed).sum(axis=1).tolist()}; "
          f"closed among the cheapest by ablation {agreement(closed, a):.0%}, by raw importance {agreement(closed, r):.0%}, "
          f"by normalised importance {agreement(closed, i):.0%}")  # fmt: skip

# %% [markdown]
# - The gates close between a third and a half of the heads, at this λ and step count (Voita et al., §6, vary λ to
#   keep more or fewer heads).
# - They take most of the last layer, which keeps at most two heads in every seed: the layer that pruning by
#   normalised importance leaves with at least five of its eight heads at 50% in every seed.
# - The heads they close are mostly those that cost least when ablated alone and have the smallest raw importance;
#   the normalised importance agrees with them much less. Two methods of pruning, trained gates and iterative
#   normalised scores, disagree here about *where* to prune.

# %%
closed = [g == 0 for g in gates]
assert all(1 / 3 <= c.mean() <= 1 / 2 for c in closed)
assert all((~c[-1]).sum() <= 2 for c in closed)  # the last layer keeps at most two heads
assert all(agreement(c, a) >= 0.75 and agreement(c, r) >= 0.8 for c, a, r in zip(closed, abls, raws, strict=True))
assert all(agreement(c, r) - agreement(c, i) > 0.2 for c, r, i in zip(closed, raws, imps, strict=True))

# %% [markdown]
# ## Against the papers
#
# | | heads | task, data | finding |
# |---|---|---|---|
# | Michel et al. 2019 (abstract; §3; §4) | Transformer-large (WMT 2014 English–French), BERT | translation (BLEU), natural-language inference (accuracy) | 20–40% of heads removed by importance at test time without a significant drop in the metric; some layers down to one head |
# | Voita et al. 2019 (abstract; §6) | Transformer-base encoder, 6 layers × 8 heads = 48 | WMT English–Russian | hard-concrete gates trained with the model prune 38 of 48 encoder heads for −0.15 BLEU |
# | this notebook | 4 layers × 8 heads, d_k 8 (parameters: the first cell) | next character of Python's documentation (loss in nats) | the numbers above, three training seeds |
#
# **What matches.** Heads differ in what they cost (the costliest more than five times the cheapest, in every seed),
# and the gradient importance finds
# cheap heads: the first tenth or fifth removed by importance cost less than a random choice. Pruning is uneven across layers: some layers keep only a
# few heads while others keep most, as Michel et al. saw layers that need only one head; Voita et al.'s gates
# likewise reduce one layer (here the last) to one or two heads.
#
# **What does not.** No 20–40% of the heads can be removed for free here: the loss rises from the first heads
# removed, and a fifth of the heads costs a clear share of what the model has learned beyond a bigram. Several
# differences could explain it, and these data do not separate them: the model is small (d_k 8) and, in the seed
# whose training probes we have, not trained to convergence, so it may use all of its capacity, where the papers'
# models are far larger; and the loss in nats registers every change in the predicted probabilities, where BLEU and
# accuracy change only when the decoded output or the top choice changes. Against Voita et al.'s numbers there is
# one more: they train the gates together with the model, so the rest of the model adapts to the heads it loses,
# where this curve removes heads with no retraining at all (as Michel et al. also remove them, at test time). The
# per-layer normalisation, which Michel et al. adopted, made the importance a worse predictor of single-head cost
# here than the raw score, and it points at other layers than the gates do. The gates here close fewer heads than
# Voita et al.'s 38 of 48, at a penalty and a training length chosen for a quick run, and the loss of the gated,
# fine-tuned model is not measured here, so nothing here tests their −0.15 BLEU.
#
# **Exercises.** Exercise 9 (`exercises/ex09_head_importance.py`) computes Michel's importance from head-mask
# gradients; run your solution on `load_checkpoint("text-deep")` and compare with the left panel above. Exercise 10
# (`exercises/ex10_random_removal.py`) gives the additive expectation of a random removal: compare it with the
# random-order median here. **Try it yourself.** `mhattn prune --task text-deep --remove 16 --out prune_deep` runs
# the experiment on the shipped seed (random subsets of 16 heads, fine-tuning and hard-concrete gates as well; it
# prints its wall time; without `--remove` it removes the default 6), and in a clone of the repository,
# `python benchmarks/deep_pruning.py --seeds 0 1 2` re-makes the data file this notebook reads (training seeds 1
# and 2 first).
