# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · A Transformer block by hand
#
# Multi-head attention (notebooks 01-03) is one sub-layer of a Transformer. The models of notebooks 06 and 07 wrap it in the rest of an encoder: token embedding, positions, LayerNorm, a feed-forward network, residual connections and a classifier trained with cross-entropy. This notebook takes those parts one at a time, each a forward/backward pair in `mhattn.functional`, and checks every backward against centred differences.
#
# **Learning objectives.** After this notebook you can
#
# 1. look up token embeddings and explain why their backward is a scatter-add (a token that occurs twice gets two gradients, summed);
# 2. build the sinusoidal position table of Vaswani et al. (2017, §3.5) and show that a fixed offset is a linear map of it;
# 3. normalise with LayerNorm and follow its backward, which couples all features of a position;
# 4. assemble a block from attention, feed-forward and residuals, and tell pre-LN from post-LN by what happens to the residual stream;
# 5. compute a cross-entropy loss and its gradient, `softmax - onehot`;
# 6. gradient-check a whole model, then train it for a few steps and watch the loss fall.
#
# Everything is called from `mhattn.functional` and `mhattn.nn`; the maths lives there (one module per step).

# %%
import inspect
import time

import numpy as np
from matplotlib.figure import Figure

from mhattn.course.display import show
from mhattn.course.postln import post_ln_block_backward, post_ln_block_forward
from mhattn.functional.embedding import embedding_backward, embedding_forward
from mhattn.functional.encoder import encoder_block_backward, encoder_block_forward
from mhattn.functional.feedforward import feedforward_backward, feedforward_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.functional.losses import cross_entropy_backward, cross_entropy_forward
from mhattn.functional.positional import positional_encoding_backward, positional_encoding_forward, sinusoidal_encoding
from mhattn.functional.transformer import block_params
from mhattn.gradcheck import check_backward, numerical_gradient, rel_error
from mhattn.nn import ModelConfig, MultiHeadAttention, TransformerModel
from mhattn.nn.transformer import init_params
from mhattn.optim import Adam
from mhattn.training.loop import lr_at, multi_loss
from mhattn.training.tasks import RolesTask

t_start = time.perf_counter()
rng = np.random.default_rng(0)
np.set_printoptions(precision=3, suppress=True)


def report(name, errors):
    """Print one gradient check; the assert makes a failing backward fail the notebook."""
    print(f"{name:<36} max rel error {max(errors):.1e}")
    assert max(errors) < 1e-7, name


# %% [markdown]
# ## 1. Embedding: a lookup forward, a scatter-add backward
#
# A token id selects a row of the table `W` of shape `(V, d_model)`: `e = W[ids]`, shape `(B, T, d_model)` (Vaswani et al. 2017, §3.4). The backward must send each position's gradient to the row it came from. When an id occurs twice, its row was used twice and must receive **both** gradients, summed. NumPy's `dW[ids] = dout` (or `dW[ids] += dout`) keeps only one of them; `np.add.at(dW, ids, dout)` adds them all. `embedding_backward` uses the scatter-add:

# %%
V, d = 5, 4
W = rng.standard_normal((V, d))
ids = np.array([[1, 3, 1]])  # token 1 occurs twice
e, cache = embedding_forward(ids, W)  # (1, 3, d)
dout = np.ones_like(e)
dW = embedding_backward(dout, cache)  # (V, d)
wrong = np.zeros_like(W)
wrong[ids[0]] += dout[0]  # fancy-index +=: the second occurrence overwrites the first
print("row 1 of dW, scatter-add:   ", dW[1])
print("row 1 of dW, dW[ids] += ...:", wrong[1])
assert np.allclose(dW[1], 2.0) and np.allclose(wrong[1], 1.0)  # two uses -> two gradients, summed

# %%
print(inspect.getsource(embedding_backward).split('"""')[-1])
report("embedding (dW), repeated ids", check_backward(lambda W: embedding_forward(ids, W), embedding_backward, [W]))

# %% [markdown]
# ## 2. Sinusoidal positions
#
# Attention by itself does not know the order of its inputs: permuting the tokens only permutes the outputs in the same way. One `MultiHeadAttention` with random weights, on five tokens and on the same five shuffled:

# %%
mha = MultiHeadAttention(8, 2, dtype="float64", seed=0)
x_tokens = np.random.default_rng(7).standard_normal((1, 5, 8))  # (B, T, d_model)
perm = np.array([3, 0, 4, 1, 2])
out_x, _ = mha(x_tokens)
out_perm, _ = mha(x_tokens[:, perm])
same = np.allclose(out_perm, out_x[:, perm], rtol=1e-12, atol=1e-12)
print("attention(x[perm]) equals attention(x)[perm] to 1e-12:", same)
assert same  # the order carries no information

# %% [markdown]
# So the order must be put into the input. Vaswani et al. (2017, §3.5) add a fixed table to the embeddings: $PE_{(pos, 2i)} = \sin(pos / 10000^{2i/d_{model}})$ and $PE_{(pos, 2i+1)} = \cos(\ldots)$, one frequency per pair of features, from one cycle every $2\pi$ positions down to one every $10000 \cdot 2\pi$.

# %%
T, d_model = 64, 32
pe = sinusoidal_encoding(T, d_model, np.zeros(1))  # (T, d_model), float64 like its last argument
fig = Figure(figsize=(7, 2.8), layout="constrained")
ax = fig.subplots()
im = ax.imshow(pe.T, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
ax.set(xlabel="position", ylabel="feature (sin, cos pairs)", title="sinusoidal position table")
fig.colorbar(im, ax=ax, label="value")
show(fig)

# %% [markdown]
# Vaswani et al. (§3.5) chose sinusoids because they hypothesised that the model could then easily learn to attend by relative position: for any fixed offset $k$, $PE_{pos+k}$ is a linear function of $PE_{pos}$ (a rotation of each (sin, cos) pair), so "attend $k$ places back" is the same linear map at every position. (Learned position embeddings gave nearly the same results in their Table 3, row (E); they kept sinusoids because these may extrapolate to sequences longer than those seen in training.) Fit one matrix $M$ by least squares from the rows $pos$ to the rows $pos + k$ and look at what is left over:

# %%
for k in (1, 5):
    M, *_ = np.linalg.lstsq(pe[:-k], pe[k:], rcond=None)  # (d_model, d_model)
    resid = np.abs(pe[:-k] @ M - pe[k:]).max()
    print(f"offset k = {k}: max |PE[pos] M - PE[pos + k]| = {resid:.1e}")
    assert resid < 1e-8
_, pos_cache = positional_encoding_forward(np.zeros((1, T, d_model)))
dout_pe = np.random.default_rng(8).standard_normal((1, T, d_model))
assert np.array_equal(positional_encoding_backward(dout_pe, pos_cache), dout_pe)
print("the table is constant, so positional_encoding_backward passes dout through unchanged (asserted)")

# %% [markdown]
# ## 3. LayerNorm
#
# For each position, LayerNorm (Ba et al. 2016) subtracts the mean over the `d_model` features, divides by the standard deviation (biased variance, `eps = 1e-5`, as torch), then scales and shifts with learned `gamma` and `beta`. After it, every position has mean 0 and variance 1 (before `gamma`, `beta`), whatever the scale of its input, as long as its variance is well above `eps`:

# %%
x = 5.0 + 3.0 * rng.standard_normal((2, 3, 8))  # (B, T, d_model) far from mean 0, variance 1
gamma, beta = np.ones(8), np.zeros(8)
y, ln_cache = layernorm_forward(x, gamma, beta)
print("per-position mean of x:", x.mean(-1).ravel().round(2))
print("per-position mean of y:", y.mean(-1).ravel().round(6), " variance:", y.var(-1).ravel().round(4))
assert np.allclose(y.mean(-1), 0) and np.allclose(y.var(-1), 1, atol=1e-4)

# %% [markdown]
# Unlike an elementwise step, LayerNorm's backward couples the features of a position: every output of a position depends on every input of that position through the mean and the variance. With $\hat x = (x - \mu)/\sigma$ and $g = \gamma \odot \mathrm{dout}$, the input gradient is $\frac{1}{\sigma}\big(g - \mathrm{mean}(g) - \hat x\,\mathrm{mean}(g \odot \hat x)\big)$ over the features: the two subtracted means are the paths through $\mu$ and through $\sigma$. The code, and its check:

# %%
print(inspect.getsource(layernorm_backward).split('"""')[-1])
gamma, beta = 1 + 0.1 * rng.standard_normal(8), 0.1 * rng.standard_normal(8)
report("layernorm (dx, dgamma, dbeta)", check_backward(layernorm_forward, layernorm_backward, [x, gamma, beta]))

# %% [markdown]
# ## 4. Feed-forward network
#
# Each position goes through the same two-layer network, $\max(0, xW_1 + b_1)W_2 + b_2$ (Vaswani et al. 2017, §3.3), widening to `d_ff` (four times `d_model` in the paper) and back. The ReLU's backward passes the gradient where the pre-activation was positive and blocks it elsewhere.

# %%
d_model, d_ff = 8, 32
W1, b1 = rng.standard_normal((d_model, d_ff)) / np.sqrt(d_model), 0.1 * rng.standard_normal(d_ff)
W2, b2 = rng.standard_normal((d_ff, d_model)) / np.sqrt(d_ff), 0.1 * rng.standard_normal(d_model)
out, ff_cache = feedforward_forward(x, W1, b1, W2, b2)
print("x", x.shape, "-> hidden", (*x.shape[:-1], d_ff), "-> out", out.shape)
report("feed-forward (dx, dW1, db1, dW2, db2)", check_backward(feedforward_forward, feedforward_backward, [x, W1, b1, W2, b2]))

# %% [markdown]
# ## 5. Residuals, and where the LayerNorm goes
#
# A block has two sub-layers, attention and feed-forward, each wrapped in a residual connection $x + \mathrm{Sublayer}(\cdot)$ (He et al. 2016). Where the LayerNorm sits is one of several design choices that differ between the paper and many models since (others: the feed-forward's activation, ReLU in the paper (§3.3) and in mhattn, GELU in BERT and GPT-2; and the position encoding, fixed sinusoids in the paper (§3.5) and in mhattn, learned position embeddings in BERT and GPT-2; sources: Devlin et al. 2019, appendix A.2 for BERT; Radford et al. 2018, §4.1 for GPT, whose choices GPT-2 keeps, Radford et al. 2019, §2.3). It is the one this notebook compares:
#
# * **post-LN** (Vaswani et al. 2017, §3.1): $x \leftarrow \mathrm{LN}(x + \mathrm{Sublayer}(x))$. Every block ends with a normalisation.
# * **pre-LN** (Xiong et al. 2020; GPT-2, Radford et al. 2019, §2.3): $x \leftarrow x + \mathrm{Sublayer}(\mathrm{LN}(x))$, plus one LayerNorm after the last block. The residual path is an identity from input to output.
#
# mhattn's models are pre-LN (`mhattn.functional.encoder`); `mhattn.course.postln` composes a post-LN block from the same parts so the two can be compared. First, both backward passes check out:

# %%
cfg6 = ModelConfig(vocab_size=16, output_sizes=(16,), d_model=32, num_heads=4, num_layers=6, d_ff=64)
P = init_params(cfg6, np.random.default_rng(0), dtype="float64")  # six blocks' parameters, one flat dict
xb = rng.standard_normal((2, 3, 32))  # (B, T, d_model)
bp = block_params(P, 0)
report(
    "pre-LN block (dx)",
    check_backward(lambda x: encoder_block_forward(x, bp, 4), lambda d, c: encoder_block_backward(d, c)[0], [xb]),
)
report(
    "post-LN block (dx)",
    check_backward(lambda x: post_ln_block_forward(x, bp, 4), lambda d, c: post_ln_block_backward(d, c)[0], [xb]),
)

# %% [markdown]
# Now push one input of scale 3 through six freshly initialised blocks of each kind, and after each block print the root-mean-square of the residual stream and its cosine similarity with the input:

# %%
x0 = 3.0 * np.random.default_rng(1).standard_normal((4, 8, 32))  # (B, T, d_model)
stream = {}
for kind, block in (("pre-LN", encoder_block_forward), ("post-LN", post_ln_block_forward)):
    x, rows = x0, []
    for layer in range(cfg6.num_layers):
        x, _, _ = block(x, block_params(P, layer), 4)
        rows.append((float(np.sqrt((x**2).mean())), float((x * x0).sum() / np.linalg.norm(x) / np.linalg.norm(x0))))
    stream[kind] = rows
    print(
        f"{kind:>7}: rms " + " ".join(f"{r:5.2f}" for r, _ in rows) + "   cos(x, input) " + " ".join(f"{c:4.2f}" for _, c in rows)
    )
pre, post = stream["pre-LN"], stream["post-LN"]
assert all(abs(r - 1) < 0.01 for r, _ in post)  # post-LN: every block output is renormalised
assert pre[-1][1] > 0.9 > post[-1][1] and post[-1][1] < post[0][1]  # pre-LN keeps the input; post-LN loses it step by step

# %% [markdown]
# Post-LN renormalises after every block, so the input's share of the stream shrinks block by block; pre-LN adds each sub-layer's output to an untouched copy of the input. The gradient sees the same picture in reverse: in pre-LN, the loss reaches every block's input through the identity path. Xiong et al. (2020, §3.3) prove that at initialisation a post-LN Transformer's gradients near the output are large, and hypothesise (§3.4) that this is one reason post-LN needs a learning-rate warm-up; in their experiments (§4), pre-LN Transformers trained without warm-up reach results comparable to post-LN with it. mhattn's training recipes still use a short linear warm-up (100 steps when a run is long enough, a tenth of the steps otherwise) before a cosine decay; whether they need it is not tested here:

# %%
print("learning rate of a 3000-step run at steps 0, 50, 99, 100, 2999 (peak 3e-3):")
print([f"{lr_at(s, 3000, 3e-3):.1e}" for s in (0, 50, 99, 100, 2999)])
assert lr_at(0, 3000, 3e-3) < lr_at(99, 3000, 3e-3) == 3e-3

# %% [markdown]
# ## 6. Cross-entropy
#
# Each position's classifier gives logits $z$ over $C$ classes; the loss is $-\log \mathrm{softmax}(z)_y$, averaged over positions, in **nats** (natural logarithm). Two facts to keep: a model that knows nothing (all logits equal) scores $\log C$, and the gradient with respect to the logits is $(\mathrm{softmax}(z) - \mathrm{onehot}(y)) / N$.

# %%
C = 10
loss, ce_cache = cross_entropy_forward(np.zeros((2, 3, C)), np.array([[0, 1, 2], [3, 4, 5]]))
print(f"uniform logits: loss = {loss:.4f} nats; log C = {np.log(C):.4f}")
assert abs(loss - np.log(C)) < 1e-12
logits, targets = rng.standard_normal((2, 3, C)), rng.integers(0, C, (2, 3))


def ce(z):
    loss, cache = cross_entropy_forward(z, targets)
    return np.array(loss), cache  # the loss as a 0-d array, so check_backward can weight it


report("cross-entropy (dlogits)", check_backward(ce, lambda d, c: cross_entropy_backward(float(d), c), [logits]))

# %% [markdown]
# ## 7. The whole model, checked, then trained
#
# `mhattn.nn.TransformerModel` stacks the parts: embedding, positions, pre-LN blocks, a final LayerNorm and one classifier per target (`mhattn.functional.transformer` numbers the steps). The task is the planted-roles task of notebook 06, small: at every position predict the previous token, the next token and the rarest token of the sequence. First a gradient check of the whole model, in float64, for a few of its parameters (the loss as a function of one parameter array at a time):

# %%
task = RolesTask(vocab_size=8, seq_len=6)
cfg = ModelConfig(vocab_size=8, output_sizes=task.output_sizes, d_model=16, num_heads=2, d_ff=32)
model = TransformerModel(cfg, seed=0, dtype="float64")
ids, tgts = task.sample(4, np.random.default_rng(2))
loss, dlogits = multi_loss(model.forward(ids)[0], tgts)
grads = model.backward(dlogits)
for name in ("embed.W", "blocks.0.ln1.gamma", "blocks.0.attn.W_q", "blocks.0.ff.b1", "out.2.W"):
    original = model.params[name]

    def loss_of(p, name=name):
        model.params[name] = p
        return np.array(multi_loss(model.forward(ids)[0], tgts)[0])

    numeric = numerical_gradient(loss_of, original.copy(), np.array(1.0))
    model.params[name] = original
    err = rel_error(grads[name], numeric)
    print(f"{name:<22} {str(original.shape):<10} rel error {err:.1e}")
    assert err < 1e-6, name

# %% [markdown]
# The loss at initialisation should be close to $\log C$ (the model knows nothing yet). Then a few Adam steps on fresh batches, in float32 as the shipped models are trained; the loss must fall well below its starting value:

# %%
model = TransformerModel(cfg, seed=0)
opt = Adam(model.params, lr=3e-3)
batch_rng, losses = np.random.default_rng(3), []
for _ in range(200):
    ids, tgts = task.sample(64, batch_rng)
    loss, dlogits = multi_loss(model.forward(ids)[0], tgts)
    opt.step(model.backward(dlogits))
    losses.append(loss)
print(f"log C = {np.log(cfg.output_sizes[0]):.3f} nats")
print("loss at steps 0, 50, 100, 150, 199:", [round(losses[s], 3) for s in (0, 50, 100, 150, 199)])
assert abs(losses[0] - np.log(cfg.output_sizes[0])) < 0.5 and losses[-1] < 0.5 * losses[0]

# %%
fig = Figure(figsize=(5, 2.8), layout="constrained")
ax = fig.subplots()
ax.plot(losses)
ax.axhline(np.log(cfg.output_sizes[0]), color="gray", ls=":", label="log C (uniform guess)")
ax.set(xlabel="Adam step", ylabel="training loss (nats)", title="a tiny pre-LN Transformer learning the roles task")
ax.legend()
show(fig)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")

# %% [markdown]
# ## Exercises
#
# The graded exercises stay with attention itself, which this block wraps:
#
# * **Exercise 6** (`exercises/ex06_mha_forward.py`) and **exercise 7** (`exercises/ex07_mha_backward.py`): the attention sub-layer's forward and backward, the part of the block this notebook took as given.
# * **Exercise 2** (`exercises/ex02_softmax.py`): the softmax whose Jacobian also gives the cross-entropy gradient above.
#
# To try (not graded): write your own `layernorm_backward` from the formula in section 3 and check it with `check_backward(layernorm_forward, your_backward, [x, gamma, beta])`; then set `num_layers=12` in `cfg6` (section 5) and see whether the post-LN cosine keeps falling.
