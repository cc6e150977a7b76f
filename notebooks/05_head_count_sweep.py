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
# # 06 · How many heads? A head-count sweep
#
# **Learning objectives.** After this notebook you can
#
# 1. state what Vaswani et al. (2017) varied in Table 3, rows (A), and what they found;
# 2. run the same experiment on a small synthetic task, where the answer can be explained;
# 3. explain why one head is too few for some tasks, and why many heads of tiny $d_k$ can be too many, at the same parameter count.

# %% [markdown]
# ## What Table 3 (A) varies
#
# Rows (A) of Table 3 keep $d_{model} = 512$ and the amount of computation fixed, and change the number of heads $h$ with $d_k = d_v = d_{model}/h$. The paper reports that single-head attention is 0.9 BLEU worse than the best setting, and that quality also drops off with too many heads. The parameter count does not change with $h$ (notebook 01 and exercise 8: $4 d_{model}^2 + 4 d_{model}$).
#
# ## A task that needs several heads
#
# Sequences of $T = 8$ random tokens from a vocabulary of $V = 8$. Each input vector is a one-hot token next to a one-hot position, so $d_{model} = V + T = 16$. At every position $t$ the model must name the tokens at positions $t-1, t-2, t-3$ and $t-4$ (cyclically). The model is **one** `MultiHeadAttention(16, h)` layer followed by a linear readout to $4 \times 8$ logits, trained with cross-entropy and Adam (all in `mhattn.course.sweep`, about 150 lines).
#
# Why $h$ matters here: a head outputs a *weighted average* of value vectors. One head that spreads its weight over four positions returns the sum of four tokens' values, and a sum forgets which token sat where. With four heads, each can look at one offset, and the concat keeps their answers apart. With sixteen heads $d_k = 1$: a head's score matrix $q_t k_s$ is then a product of two numbers, and such a head cannot single out position $t - o$ for every $t$.

# %%
import matplotlib.pyplot as plt
import numpy as np

from mhattn.course import sweep
from mhattn.course.display import show
from mhattn.plots.attention import attention_heatmaps

cfg = sweep.SweepConfig()
print(cfg, "d_model =", cfg.d_model)
x, y = sweep.make_batch(cfg, np.random.default_rng(0))
tokens = x[0, :, : cfg.vocab].argmax(-1)
print("tokens of sequence 0:       ", tokens)
print("targets at t = 5 (offsets 1-4):", y[0, 5], "= tokens at positions", [(5 - o) % cfg.seq_len for o in cfg.offsets])

# %% [markdown]
# ## The sweep
#
# $h \in \{1, 2, 4, 8, 16\}$ (all divide $d_{model} = 16$), three seeds each, 400 Adam steps of 64 sequences. Accuracy is the fraction of (position, offset) answers right on fresh sequences; chance is $1/8$. About 10 seconds on one CPU core.

# %%
# NBVAL_IGNORE_OUTPUT
# (the last digit can move with the CPU's floating-point kernels; the claims below are compared instead)
heads = (1, 2, 4, 8, 16)
results = sweep.sweep(cfg, heads=heads, seeds=(0, 1, 2))
by_h = {hh: [r["accuracy"] for r in results if r["num_heads"] == hh] for hh in heads}
print(f"{'h':>3} {'d_k':>4} {'accuracy (mean of 3 seeds)':>28} {'min':>6} {'max':>6}")
for hh in heads:
    a = by_h[hh]
    print(f"{hh:>3} {cfg.d_model // hh:>4} {np.mean(a):>28.2f} {min(a):>6.2f} {max(a):>6.2f}")

# %% [markdown]
# The claims this notebook makes about the table, checked (these outputs are compared on every test run):

# %%
mean = {hh: float(np.mean(a)) for hh, a in by_h.items()}
print("one head is far from solving it (mean < 0.6):      ", mean[1] < 0.6)
print("four heads solve it (mean > 0.95):                 ", mean[4] > 0.95)
print("more heads help up to four (h=1 < h=2 < h=4):       ", mean[1] < mean[2] < mean[4])
print("sixteen heads of d_k = 1 do worse than four (by > 0.2):", mean[16] < mean[4] - 0.2)

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.4))
for hh in heads:
    ax.scatter([hh] * len(by_h[hh]), by_h[hh], color="tab:blue", alpha=0.4, s=18)
ax.plot(heads, [np.mean(by_h[hh]) for hh in heads], "o-", color="tab:blue", label="mean of 3 seeds")
ax.axhline(1 / cfg.vocab, color="gray", ls=":", lw=0.8, label="chance")
ax.set(
    xscale="log",
    xticks=heads,
    xticklabels=[f"{hh}\nd_k={cfg.d_model // hh}" for hh in heads],
    ylim=(0, 1.05),
    xlabel="number of heads h (d_model = 16 fixed)",
    ylabel="accuracy",
    title="Table 3 (A) analogue: one attention layer",
)
ax.legend(loc="lower center")
fig.tight_layout()
show(fig)

# %% [markdown]
# The shape follows Table 3 (A): too few heads and too many both do worse than the middle, at the same parameter count. On this task the reasons can be named: one or two heads must blend offsets together, four heads can take one offset each, and heads of $d_k = 1$ cannot aim at a single position.
#
# ## Looking inside the four-head model
#
# Train one model with $h = 4$ and draw its weights on one sequence. Look for diagonal bands: a band $o$ places below the diagonal (cyclically) is a head that sends query $t$ to key $t - o$.

# %%
model, result = sweep.train_model(cfg, 4, seed=0)
print(f"h = 4: accuracy {result['accuracy']:.2f}; parameters in the attention layer: {model.mha.num_parameters()}")
print("same count for h = 1:", sweep.OffsetModel(cfg, 1, seed=0).mha.num_parameters())
_, w = model.mha.forward(x[:1], average_attn_weights=False)  # (1, 4, T, T)
show(attention_heatmaps(w[0], [str(t) for t in tokens], title="h = 4: one offset per head?"))

# %% [markdown]
# In this run three heads hold one sharp band each, while the fourth spreads its weight over two neighbouring offsets, and the model still answers every question. One offset per head is *a* solution, not the one training must find: a small case of the course text's warning that heads need not take tidy, nameable roles.
#
# ## Exercises
#
# * **Exercise 8** (`ex08_count_parameters.py`): prove with code that the count above does not depend on $h$, and count the block-diagonal variant the course text describes.
# * **Exercise 9** (`ex09_head_importance.py`): score heads by the gradient of the loss with respect to a head mask (Michel et al. 2019).
# * **Exercise 10** (`ex10_random_removal.py`): the expected loss change when $k$ of the $h$ heads are removed at random.
#
# To try: set `cfg = sweep.SweepConfig(offsets=(1, 2))` (two offsets instead of four) and rerun the sweep cell; where does the curve peak now?
