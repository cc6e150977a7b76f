"""The cells of notebooks 00, 01, 02, 03, 06 and 07: ("md" | "code", text) pairs, in order."""

# ruff: noqa: E501
# The cell text reads best as written, so the formatter leaves this file alone.
# fmt: off

NB00 = [
    ("md", """
# 00 · Setup and backends

**Learning objectives.** After this notebook you can

1. install mhattn for the course (and, on a machine with an NVIDIA GPU, with CuPy);
2. say which array library, NumPy or CuPy, does the arithmetic, and switch between them;
3. move arrays between host and GPU explicitly, and read the error you get when you mix them.
"""),
    ("md", """
## Installing

From the repository root, in a fresh virtual environment:

```bash
python -m pip install -e ".[course]"      # NumPy, matplotlib, JupyterLab
python -m pip install -e ".[gpu]"         # adds CuPy for CUDA 12 (for CUDA 13: pip install cupy-cuda13x)
python -m pip install -e ".[dev]"         # everything the tests need, plus ruff
```

Then `jupyter lab notebooks/` opens this course. The only hard dependency is NumPy; CuPy is optional and is imported only when you ask for it.
"""),
    ("code", """
import numpy as np

import mhattn

print("mhattn", mhattn.__version__)
print("current backend:", mhattn.get_backend())
print("its array module:", mhattn.backend.xp().__name__)
"""),
    ("md", """
## Two rules decide where the arithmetic runs

1. **Ops follow their inputs.** Every function in `mhattn.functional` asks its arrays which library they belong to (`get_array_module`, CuPy's CPU/GPU-agnostic pattern). NumPy arrays in, NumPy arithmetic; CuPy arrays in, GPU kernels.
2. **The backend only decides where new arrays go**: the parameters of a new `MultiHeadAttention`, and whatever `mhattn.asarray` makes. Choose it with `mhattn.set_backend("cupy")`, the context manager `mhattn.use_backend(...)`, or the environment variable `MHATTN_BACKEND=cupy` (read once, at import).
"""),
    ("code", """
x = mhattn.asarray(np.ones((2, 3, 8), dtype=np.float32))  # (B, T, d_model) on the current backend
print("x lives in:", mhattn.get_array_module(x).__name__)

mha = mhattn.MultiHeadAttention(d_model=8, num_heads=2, seed=0)
out, weights = mha(x)
print("out:", type(out).__module__, out.shape, out.dtype)
print("weights (averaged over heads):", weights.shape)
"""),
    ("md", """
## Is there a GPU here?

`set_backend("cupy")` raises an `ImportError` when CuPy is not installed and a `RuntimeError` when it is installed but finds no CUDA device. The output of the next cell depends on the machine, so the test run (nbval) ignores it.
"""),
    ("code", """
# NBVAL_IGNORE_OUTPUT
try:
    with mhattn.use_backend("cupy"):
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        print("CuPy works here, on", name)
except (ImportError, RuntimeError) as err:
    print(f"no CuPy backend on this machine ({type(err).__name__}); everything runs on NumPy")
print("backend after the block:", mhattn.get_backend())
"""),
    ("md", """
## Moving arrays, and what happens when you mix them

Transfers are explicit: `mhattn.asarray(a)` puts `a` on the current backend, `mhattn.to_numpy(a)` brings it back to the host. Mixing a NumPy and a CuPy array in one call raises a `TypeError` that says how to fix it, instead of a silent copy. A misspelt backend name is refused too:
"""),
    ("code", """
host = mhattn.to_numpy(out)
print(type(host).__name__, host.shape)
try:
    mhattn.set_backend("tpu")
except ValueError as err:
    print("ValueError:", err)
"""),
    ("md", """
## Where next

* Notebook **01** walks one sentence through `MultiHeadAttention(512, 8)`, printing every shape.
* The graded exercises are in `exercises/` (read `exercises/README.md`). Check your work with

```bash
python -m pytest exercises/test_visible.py -m ex01   # the visible tests of one exercise
mhattn grade                                         # points for all ten, hidden tests included
```
"""),
]

NB02 = [
    ("md", """
# 02 · Scaled dot-product attention

$$\\mathrm{Attention}(Q, K, V) = \\mathrm{softmax}\\!\\left(\\frac{QK^\\top}{\\sqrt{d_k}}\\right)V \\qquad \\text{(Vaswani et al. 2017, eq. 1)}$$

**Learning objectives.** After this notebook you can

1. show with numbers why the scores are divided by $\\sqrt{d_k}$: the variance of a dot product grows with $d_k$, and large scores saturate the softmax and starve it of gradient;
2. explain why a softmax subtracts the row maximum before `exp`, and see the overflow when it does not;
3. build and read causal and padding masks, including a query that may see no key at all;
4. draw attention weights as heatmaps.
"""),
    ("code", """
import numpy as np
import matplotlib.pyplot as plt

import mhattn
from mhattn import lessons
from mhattn.functional import causal_mask, scaled_dot_product_attention_forward, softmax_forward
from mhattn.notebook import show
from mhattn.plot import attention_heatmaps

np.set_printoptions(precision=3, suppress=True)
"""),
    ("md", """
## 1. The variance of a dot product grows like $d_k$

Take $q, k \\in \\mathbb{R}^{d_k}$ with independent entries of mean 0 and variance 1. Each product $q_i k_i$ has mean 0 and variance 1, and the $d_k$ products are independent, so
$\\mathrm{Var}(q \\cdot k) = d_k$ (the paper's footnote 4). Dividing by $\\sqrt{d_k}$ divides the variance by $d_k$, back to 1, whatever the head size. Sampled:
"""),
    ("code", """
rows = lessons.dot_product_variance([1, 4, 16, 64, 256, 1024], n=20_000, seed=0)
print(f"{'d_k':>6} {'Var(q.k)':>10} {'Var(q.k / sqrt(d_k))':>22}")
for r in rows:
    print(f"{r['d_k']:>6} {r['var_raw']:>10.1f} {r['var_scaled']:>22.2f}")
"""),
    ("md", """
## 2. Why a large variance hurts: a saturated softmax

Scores with standard deviation $\\sqrt{512} \\approx 23$ differ by tens, and `exp` turns a gap of 20 into a factor of about $5 \\cdot 10^8$: nearly all the weight goes to one key. Such a row is almost one-hot, and the softmax Jacobian $\\mathrm{diag}(p) - pp^\\top$ is then almost zero, so almost no gradient reaches $Q$ and $K$. Below: one query over 16 random keys, averaged over 2000 draws.
"""),
    ("code", """
d_ks = [4, 16, 64, 256, 1024]
stats = {s: [lessons.softmax_saturation(d, S=16, scaled=s, seed=1) for d in d_ks] for s in (True, False)}
print(f"{'d_k':>6} | {'largest weight':^23} | {'|Jacobian| (gradient size)':^27}")
print(f"{'':>6} | {'scaled':>10} {'unscaled':>12} | {'scaled':>10} {'unscaled':>16}")
for i, d in enumerate(d_ks):
    a, b = stats[True][i], stats[False][i]
    print(f"{d:>6} | {a['max_weight']:>10.2f} {b['max_weight']:>12.2f} | {a['grad_norm']:>10.3f} {b['grad_norm']:>16.3f}")
"""),
    ("code", """
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
for scaled, style in ((True, "o-"), (False, "s--")):
    label = "q.k / sqrt(d_k)" if scaled else "q.k (unscaled)"
    axes[0].plot(d_ks, [r["max_weight"] for r in stats[scaled]], style, label=label)
    axes[1].plot(d_ks, [r["grad_norm"] for r in stats[scaled]], style, label=label)
axes[0].axhline(1 / 16, color="gray", lw=0.8, ls=":")
axes[0].set(xscale="log", xlabel="d_k", ylabel="mean largest weight (1/16 = flat)", title="weights")
axes[1].set(xscale="log", xlabel="d_k", ylabel="mean |diag(p) - p p^T|", title="softmax gradient")
axes[0].legend()
fig.tight_layout()
show(fig)
"""),
    ("md", """
With the scaling, both curves stay flat as $d_k$ grows: a head of 64 behaves like a head of 4. Without it, wide heads start training with one-hot attention and vanishing gradients.

## 3. A softmax that does not overflow

`exp(1000)` is `inf` in float64, and `inf / inf` is NaN. Since $\\mathrm{softmax}(s) = \\mathrm{softmax}(s - c)$ for any constant $c$, mhattn subtracts each row's maximum first: the largest exponent becomes $e^0 = 1$, and nothing can overflow.
"""),
    ("code", """
s = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, 1002.0]])
print("naive exp(s) / sum exp(s):\\n", lessons.naive_softmax(s))
print("mhattn softmax_forward:\\n", softmax_forward(s)[0])
"""),
    ("md", """
## 4. Masks

mhattn follows torch's convention: a boolean mask is **True where attention is not allowed**. A masked score is replaced by $-\\infty$, so its weight is exactly 0.

* **Causal** (decoder self-attention): query $t$ may see keys $0..t$, its own position included. The mask is True strictly above the diagonal.
* **Padding**: sequences in a batch are padded to one length; a `key_padding_mask` of shape `(B, S)` hides the padding keys from every query.
"""),
    ("code", """
T = 5
print("causal_mask(5) as 0/1 (1 = hidden):\\n", causal_mask(T).astype(int))
key_padding = np.array([[False, False, False, True, True]])  # the last two keys are padding
combined = causal_mask(T)[None, None] | key_padding[:, None, None, :]  # (1, 1, T, S)
print("causal | padding:\\n", combined[0, 0].astype(int))
"""),
    ("code", """
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 1, T, 4)) for _ in range(3))  # (B, h, T, d_k)
_, w_causal, _ = scaled_dot_product_attention_forward(q, k, v, causal_mask(T))
_, w_both, _ = scaled_dot_product_attention_forward(q, k, v, combined)
print("weights, causal:\\n", w_causal[0, 0])
print("weights, causal + padding:\\n", w_both[0, 0])
print("row sums:", w_both[0, 0].sum(axis=-1))
"""),
    ("md", """
### A query that may see nothing

Rows 3 and 4 above still see keys 0..2. But if *every* key of a row is hidden (here: a sequence whose first keys are padding, under a causal mask, so queries 0 and 1 may see only keys 0 and 1, which are both padding), the softmax has nothing to normalise. Computing it naively gives $0/0$ = NaN, which then spreads to every gradient; torch's eager path returns NaN there (pytorch/pytorch#41508). mhattn's choice: such a row gets **all-zero weights**, its output is zero, and its gradients are zero.
"""),
    ("code", """
left_padded = np.array([[True, True, False, False, False]])  # keys 0 and 1 are padding
mask = causal_mask(T)[None, None] | left_padded[:, None, None, :]
out, w, _ = scaled_dot_product_attention_forward(q, k, v, mask)
print("weights:\\n", w[0, 0])
print("row sums:", w[0, 0].sum(axis=-1), "  any NaN in out:", bool(np.isnan(out).any()))
"""),
    ("md", """
## 5. Heatmaps

A `MultiHeadAttention(32, 4)` with random weights, on 8 tokens of which the last 2 are padding, with a causal mask. Each panel is one head: rows are queries, columns keys, brighter is more weight. The upper triangle and the padding columns are dark in every head; inside the allowed region each head has its own pattern, because each head has its own $W^Q_i$ and $W^K_i$.
"""),
    ("code", """
tokens = ["the", "cat", "sat", "on", "the", "mat", "<pad>", "<pad>"]
T = len(tokens)
mha = mhattn.MultiHeadAttention(32, 4, seed=0)
x = np.random.default_rng(1).standard_normal((1, T, 32)).astype(np.float32)
pad = np.array([[False] * 6 + [True] * 2])
_, w = mha(x, attn_mask=causal_mask(T), key_padding_mask=pad, average_attn_weights=False)
show(attention_heatmaps(w[0], tokens, title="4 heads, causal mask + padding"))
"""),
    ("md", """
## Exercises

* **Exercise 2** (`exercises/ex02_softmax.py`): a stable, masked softmax and its backward.
* **Exercise 3** (`exercises/ex03_attention_forward.py`): the causal mask and attention forward, with the $1/\\sqrt{d_k}$ scaling.

Read `exercises/README.md` (sections 2 and 3), then run `python -m pytest exercises/test_visible.py -m "ex02 or ex03"` and `mhattn grade --only ex02 ex03`.
"""),
]

NB03 = [
    ("md", """
# 03 · Manual backprop

**Learning objectives.** After this notebook you can

1. derive the backward pass of each step of multi-head attention, next to its forward step, in the order the code runs;
2. check a backward pass against centred differences, and read a relative error;
3. recognise a wrong backward from its gradient check, and say which term it lost.
"""),
    ("md", """
## The forward steps, and the plan

`mhattn.functional.mha` numbers the forward steps; its backward walks them in reverse and says which step it undoes:

| step | forward | shape |
|---|---|---|
| 1 | $Q = XW_q + b_q$, $K = \\ldots$, $V = \\ldots$ | `(B, T, d_model)` |
| 2 | split into heads | `(B, h, T, d_k)` |
| 3 | scaled dot-product attention (scores, scale, softmax, weighted sum) | `(B, h, T, d_k)` |
| 4 | head mask $\\xi$: head $i$ times $\\xi_i$ | `(B, h, T, d_k)` |
| 5 | concat | `(B, T, d_model)` |
| 6 | $\\mathrm{out} = \\mathrm{concat}\\,W_o + b_o$ | `(B, T, d_model)` |

For each step below: the forward, the backward derived from it, and a **gradient check**. `mhattn.gradcheck.check_backward` draws a random upstream gradient `dout`, runs the backward, and compares each input's gradient with centred differences
$\\frac{\\partial}{\\partial x_i}\\langle f(x), \\mathrm{dout}\\rangle \\approx \\frac{\\langle f(x + \\epsilon e_i) - f(x - \\epsilon e_i), \\mathrm{dout}\\rangle}{2\\epsilon}$,
reporting $\\|a - n\\| / (\\|a\\| + \\|n\\|)$. In float64, a correct backward gives about $10^{-8}$ or less; a wrong one gives $10^{-2}$ to $1$.
"""),
    ("code", """
import inspect

import numpy as np

from mhattn import functional as F
from mhattn import lessons
from mhattn.gradcheck import check_backward

rng = np.random.default_rng(0)
B, h, T, S, d_k = 2, 2, 3, 4, 3
d_model = h * d_k


def report(name, errors, inputs):
    ok = all(e < 1e-7 for e in errors)
    print(f"{name:<32} {'OK' if ok else 'WRONG'}   (" + ", ".join(f"d{n}" for n in inputs) + f": max rel error {'< 1e-7' if ok else f'{max(errors):.2f}'})")
"""),
    ("md", """
## Step 1 and step 6: the linear maps

Forward: $\\mathrm{out} = xW + b$ on the last axis, with `W` stored `(d_in, d_out)`.
Each output entry $\\mathrm{out}_{nj} = \\sum_i x_{ni} W_{ij} + b_j$, so

* $\\partial L/\\partial x = \\mathrm{dout}\\, W^\\top$ (each input feeds every output through $W_{ij}$),
* $\\partial L/\\partial W = x^\\top \\mathrm{dout}$ summed over all positions $n$,
* $\\partial L/\\partial b = \\sum_n \\mathrm{dout}_n$ (the bias is added at every position).
"""),
    ("code", """
x, W, b = rng.standard_normal((B, T, d_model)), rng.standard_normal((d_model, d_model)), rng.standard_normal(d_model)
report("linear (steps 1 and 6)", check_backward(F.linear_forward, F.linear_backward, [x, W, b]), ["x", "W", "b"])
"""),
    ("md", """
## Steps 2 and 5: split and concat

Both only move numbers: entry $(b, t, i d_k + j)$ of the input becomes entry $(b, i, t, j)$ of the output. A gradient flows back along the same move, reversed, so **the backward of split is concat, and the backward of concat is split**. No arithmetic at all.
"""),
    ("code", """
split = lambda x: F.split_heads_forward(x, h)
report("split heads (step 2)", check_backward(split, F.split_heads_backward, [x]), ["x"])
heads = rng.standard_normal((B, h, T, d_k))
report("combine heads (step 5)", check_backward(F.combine_heads_forward, F.combine_heads_backward, [heads]), ["heads"])
"""),
    ("md", """
## Step 3: scaled dot-product attention, four sub-steps

| forward (in code order) | backward (reverse order) |
|---|---|
| 3.1 `scores = q @ k^T` | `dq = dscores @ k`, `dk = dscores^T @ q` |
| 3.2 `scores *= 1/sqrt(d_k)` | `dscores *= 1/sqrt(d_k)` |
| 3.3 `weights = softmax(scores)` (masks inside) | `dscores = p * (dweights - sum(dweights * p))` |
| 3.4 `out = weights @ v` | `dweights = dout @ v^T`, `dv = weights^T @ dout` |

**The softmax row.** With $p_i = e^{s_i} / \\sum_j e^{s_j}$, the Jacobian is $\\partial p_i / \\partial s_j = p_i(\\delta_{ij} - p_j)$, i.e. $J = \\mathrm{diag}(p) - pp^\\top$. It is symmetric, so $\\mathrm{dscores} = J\\,\\mathrm{dp} = p \\odot (\\mathrm{dp} - \\langle \\mathrm{dp}, p\\rangle)$: one dot product per row, never the $S \\times S$ matrix. A masked entry has $p_i = 0$, so its gradient is 0, as it should be.

The two functions, forward then backward; the backward's comments name the step each line undoes:
"""),
    ("code", """
print(inspect.getsource(F.softmax_backward))
"""),
    ("code", """
scores = rng.standard_normal((B, h, T, S))
report("softmax (step 3.3)", check_backward(F.softmax_forward, F.softmax_backward, [scores]), ["scores"])
q, k, v = rng.standard_normal((B, h, T, d_k)), rng.standard_normal((B, h, S, d_k)), rng.standard_normal((B, h, S, d_k))
attention = lambda q, k, v: F.scaled_dot_product_attention_forward(q, k, v, F.causal_mask(T, S, xp=np))
report("attention, causal (step 3)", check_backward(attention, F.scaled_dot_product_attention_backward, [q, k, v]), "qkv")
"""),
    ("code", """
print(inspect.getsource(F.scaled_dot_product_attention_backward))
"""),
    ("md", """
## Step 4: the head mask

Forward: $\\tilde h_i = \\xi_i h_i$. Backward: $\\partial L/\\partial h_i = \\xi_i\\, \\partial L/\\partial \\tilde h_i$ and $\\partial L/\\partial \\xi_i = \\langle h_i, \\partial L/\\partial \\tilde h_i \\rangle$, summed over positions and features. That second number is what Michel et al. (2019) use to rank heads: exercise 9.

## All six steps together

`multi_head_attention_backward` chains the steps above in reverse. Checked against centred differences for the three inputs, with fixed random parameters (cross-attention: `T = 3` queries, `S = 4` keys):
"""),
    ("code", """
params = {n: rng.standard_normal((d_model, d_model)) / np.sqrt(d_model) for n in ("W_q", "W_k", "W_v", "W_o")}
params.update({n: 0.1 * rng.standard_normal(d_model) for n in ("b_q", "b_k", "b_v", "b_o")})
query, key, value = rng.standard_normal((B, T, d_model)), rng.standard_normal((B, S, d_model)), rng.standard_normal((B, S, d_model))
mha_fwd = lambda q, k, v: F.multi_head_attention_forward(q, k, v, params, h)
mha_bwd = lambda dout, cache: F.multi_head_attention_backward(dout, cache)[:3]
report("multi-head attention (all)", check_backward(mha_fwd, mha_bwd, [query, key, value]), ["query", "key", "value"])
"""),
    ("md", """
## A wrong backward, caught

A tempting shortcut treats each softmax output as if it depended only on its own score: it keeps the diagonal $p_i(1 - p_i)$ of the Jacobian and drops the off-diagonal $-p_i p_j$. Shapes still fit and nothing crashes; only the gradient check can tell.
"""),
    ("code", """
print(inspect.getsource(lessons.softmax_backward_diagonal_only))
report("softmax, diagonal-only backward", check_backward(F.softmax_forward, lessons.softmax_backward_diagonal_only, [scores]), ["scores"])
"""),
    ("md", """
The error is of order 1, not $10^{-8}$: the missing term $-p_i \\sum_j p_j \\mathrm{dp}_j$ is as large as the kept one. In a training run this bug would not crash; the model would just learn worse, which is why every backward in mhattn has a gradient check in the tests.

## Exercises

* **Exercise 2** (`ex02_softmax.py`): softmax forward and backward (the diagonal-only backward above loses all its points).
* **Exercise 4** (`ex04_attention_backward.py`): attention backward, steps 3.4 to 3.1.
* **Exercise 7** (`ex07_mha_backward.py`): the whole chain, every parameter's gradient.

Use `mhattn.gradcheck.check_backward` on your own functions before you run `mhattn grade`.
"""),
]

NB06 = [
    ("md", """
# 06 · How many heads? A head-count sweep

**Learning objectives.** After this notebook you can

1. state what Vaswani et al. (2017) varied in Table 3, rows (A), and what they found;
2. run the same experiment on a small synthetic task, where the answer can be explained;
3. explain why one head is too few for some tasks, and why many heads of tiny $d_k$ can be too many, at the same parameter count.
"""),
    ("md", """
## What Table 3 (A) varies

Rows (A) of Table 3 keep $d_{model} = 512$ and the amount of computation fixed, and change the number of heads $h$ with $d_k = d_v = d_{model}/h$. The paper reports that single-head attention is 0.9 BLEU worse than the best setting, and that quality also drops off with too many heads. The parameter count does not change with $h$ (notebook 01 and exercise 8: $4 d_{model}^2 + 4 d_{model}$).

## A task that needs several heads

Sequences of $T = 8$ random tokens from a vocabulary of $V = 8$. Each input vector is a one-hot token next to a one-hot position, so $d_{model} = V + T = 16$. At every position $t$ the model must name the tokens at positions $t-1, t-2, t-3$ and $t-4$ (cyclically). The model is **one** `MultiHeadAttention(16, h)` layer followed by a linear readout to $4 \\times 8$ logits, trained with cross-entropy and Adam (all in `mhattn.sweep`, about 150 lines).

Why $h$ matters here: a head outputs a *weighted average* of value vectors. One head that spreads its weight over four positions returns the sum of four tokens' values, and a sum forgets which token sat where. With four heads, each can look at one offset, and the concat keeps their answers apart. With sixteen heads $d_k = 1$: a head's score matrix $q_t k_s$ is then a product of two numbers, and such a head cannot single out position $t - o$ for every $t$.
"""),
    ("code", """
import numpy as np
import matplotlib.pyplot as plt

from mhattn import sweep
from mhattn.notebook import show
from mhattn.plot import attention_heatmaps

cfg = sweep.SweepConfig()
print(cfg, "d_model =", cfg.d_model)
x, y = sweep.make_batch(cfg, np.random.default_rng(0))
tokens = x[0, :, : cfg.vocab].argmax(-1)
print("tokens of sequence 0:       ", tokens)
print("targets at t = 5 (offsets 1-4):", y[0, 5], "= tokens at positions", [(5 - o) % cfg.seq_len for o in cfg.offsets])
"""),
    ("md", """
## The sweep

$h \\in \\{1, 2, 4, 8, 16\\}$ (all divide $d_{model} = 16$), three seeds each, 400 Adam steps of 64 sequences. Accuracy is the fraction of (position, offset) answers right on fresh sequences; chance is $1/8$. About 10 seconds on one CPU core.
"""),
    ("code", """
# NBVAL_IGNORE_OUTPUT
# (the last digit can move with the CPU's floating-point kernels; the claims below are compared instead)
heads = (1, 2, 4, 8, 16)
results = sweep.sweep(cfg, heads=heads, seeds=(0, 1, 2))
by_h = {hh: [r["accuracy"] for r in results if r["num_heads"] == hh] for hh in heads}
print(f"{'h':>3} {'d_k':>4} {'accuracy (mean of 3 seeds)':>28} {'min':>6} {'max':>6}")
for hh in heads:
    a = by_h[hh]
    print(f"{hh:>3} {cfg.d_model // hh:>4} {np.mean(a):>28.2f} {min(a):>6.2f} {max(a):>6.2f}")
"""),
    ("md", """
The claims this notebook makes about the table, checked (these outputs are compared on every test run):
"""),
    ("code", """
mean = {hh: float(np.mean(a)) for hh, a in by_h.items()}
print("one head is far from solving it (mean < 0.6):      ", mean[1] < 0.6)
print("four heads solve it (mean > 0.95):                 ", mean[4] > 0.95)
print("more heads help up to four (h=1 < h=2 < h=4):       ", mean[1] < mean[2] < mean[4])
print("sixteen heads of d_k = 1 do worse than four (by > 0.2):", mean[16] < mean[4] - 0.2)
"""),
    ("code", """
fig, ax = plt.subplots(figsize=(5.5, 3.4))
for hh in heads:
    ax.scatter([hh] * len(by_h[hh]), by_h[hh], color="tab:blue", alpha=0.4, s=18)
ax.plot(heads, [np.mean(by_h[hh]) for hh in heads], "o-", color="tab:blue", label="mean of 3 seeds")
ax.axhline(1 / cfg.vocab, color="gray", ls=":", lw=0.8, label="chance")
ax.set(xscale="log", xticks=heads, xticklabels=[f"{hh}\\nd_k={cfg.d_model // hh}" for hh in heads],
       ylim=(0, 1.05), xlabel="number of heads h (d_model = 16 fixed)", ylabel="accuracy",
       title="Table 3 (A) analogue: one attention layer")
ax.legend(loc="lower center")
fig.tight_layout()
show(fig)
"""),
    ("md", """
The shape follows Table 3 (A): too few heads and too many both do worse than the middle, at the same parameter count. On this task the reasons can be named: one or two heads must blend offsets together, four heads can take one offset each, and heads of $d_k = 1$ cannot aim at a single position.

## Looking inside the four-head model

Train one model with $h = 4$ and draw its weights on one sequence. Look for diagonal bands: a band $o$ places below the diagonal (cyclically) is a head that sends query $t$ to key $t - o$.
"""),
    ("code", """
model, result = sweep.train_model(cfg, 4, seed=0)
print(f"h = 4: accuracy {result['accuracy']:.2f}; parameters in the attention layer: {model.mha.num_parameters()}")
print("same count for h = 1:", sweep.OffsetModel(cfg, 1, seed=0).mha.num_parameters())
_, w = model.mha.forward(x[:1], average_attn_weights=False)  # (1, 4, T, T)
show(attention_heatmaps(w[0], [str(t) for t in tokens], title="h = 4: one offset per head?"))
"""),
    ("md", """
In this run three heads hold one sharp band each, while the fourth spreads its weight over two neighbouring offsets, and the model still answers every question. One offset per head is *a* solution, not the one training must find: a small case of the course text's warning that heads need not take tidy, nameable roles.

## Exercises

* **Exercise 8** (`ex08_count_parameters.py`): prove with code that the count above does not depend on $h$, and count the block-diagonal variant the course text describes.
* **Exercise 9** (`ex09_head_importance.py`): score heads by the gradient of the loss with respect to a head mask (Michel et al. 2019).
* **Exercise 10** (`ex10_random_removal.py`): the expected loss change when $k$ of the $h$ heads are removed at random.

To try: set `cfg = sweep.SweepConfig(offsets=(1, 2))` (two offsets instead of four) and rerun the sweep cell; where does the curve peak now?
"""),
]

NB07 = [
    ("md", """
# 07 · GPU and performance

**Learning objectives.** After this notebook you can

1. count how time and memory of attention grow with the sequence length $T$, and point to the one tensor that grows like $T^2$;
2. read recorded timings, and reproduce them on your machine with `benchmarks/attention_scaling.py`;
3. time NumPy against CuPy correctly (warm-up, and synchronising the GPU before reading the clock).
"""),
    ("md", """
## Counting first

For `B` sequences of length `T`, model width $d$ and $h$ heads of $d_k = d/h$:

| part | multiply-adds | memory it creates |
|---|---|---|
| projections $Q, K, V$ and $W_o$ | $4 \\cdot B T d^2$ | $B T d$ each |
| scores $QK^\\top$ | $B h T^2 d_k = B T^2 d$ | **$B h T^2$ weights** |
| weighted sum with $V$ | $B T^2 d$ | $B T d$ |

The projections grow linearly in $T$; the attention part grows like $T^2$ in both time and memory. The crossover is at about $T \\approx 2d$. The weights `(B, h, T, T)` are kept for the backward pass, so their memory is paid once per layer per batch:
"""),
    ("code", """
import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import matplotlib.pyplot as plt

import mhattn
from mhattn.lessons import time_attention, weights_bytes
from mhattn.notebook import show

print(f"{'T':>7} {'(B, h, T, T) float32, B=8, h=8':>34}")
for T in (128, 512, 2048, 8192, 32768):
    print(f"{T:>7} {weights_bytes(8, 8, T, T, 'float32') / 2**20:>30,.0f} MiB")
"""),
    ("md", """
At $T = 32768$ the weights of one layer for a batch of 8 need 256 GiB: more than any single GPU holds. This is the memory that FlashAttention-style kernels avoid by never storing the full weight matrix (they recompute it blockwise in the backward pass). mhattn keeps it, because a learner should be able to look at it.

## Recorded figures

`benchmarks/attention_scaling.py` times `MultiHeadAttention(128, 8)` forward and backward, float32, `B = 2`, best of 3, for $T = 64 \\ldots 2048$, and writes a JSON record. The records shipped in `mhattn/data/` are:
"""),
    ("code", """
data = Path(mhattn.__file__).parent / "data"
records = [json.loads(p.read_text()) for p in sorted(data.glob("attention_scaling_*.json"))]
for rec in records:
    print(f"backend={rec['backend']}  device={rec['device']}  B={rec['B']}  d_model={rec['d_model']}  h={rec['num_heads']}  {rec['dtype']}")
    print(f"{'T':>6} {'forward ms':>11} {'backward ms':>12} {'weights MiB':>12}")
    for r in rec["rows"]:
        print(f"{r['T']:>6} {r['forward_s'] * 1e3:>11.1f} {r['backward_s'] * 1e3:>12.1f} {r['weights_bytes'] / 2**20:>12.1f}")
"""),
    ("code", """
fig, ax = plt.subplots(figsize=(5.5, 3.6))
for rec in records:
    Ts = np.array([r["T"] for r in rec["rows"]])
    for key, style in (("forward_s", "o-"), ("backward_s", "s--")):
        ax.plot(Ts, [r[key] * 1e3 for r in rec["rows"]], style, label=f"{rec['backend']} {key.split('_')[0]}")
ref = Ts.astype(float) ** 2
ax.plot(Ts, ref / ref[-1] * rec["rows"][-1]["backward_s"] * 1e3, ":", color="gray", label="slope of T^2")
ax.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="milliseconds", title="recorded: MultiHeadAttention(128, 8)")
ax.legend(fontsize=8)
fig.tight_layout()
show(fig)
"""),
    ("md", """
**About these figures.** The NumPy record was made on the 2-core CPU machine this course is developed on, shared with other jobs, so single numbers are noisy (the best of 3 helps, but does not remove it). What to read from them is the slope: at small $T$ the projections dominate; towards $T = 2048$ the curves bend up to the $T^2$ slope.

**No GPU record is shipped yet**: the machine that made these figures has no GPU. To add one, on a machine with CUDA and CuPy (`pip install -e ".[gpu]"`):

```bash
python benchmarks/attention_scaling.py --backend cupy --out mhattn/data/attention_scaling_cupy.json
python benchmarks/attention_scaling.py --backend numpy --out mhattn/data/attention_scaling_numpy.json
```

and rerun this notebook: every record in `mhattn/data/` is tabulated and plotted above.

## Timing it yourself

Two rules make timings honest. **Warm up**: the first call pays for memory allocation (and on CuPy for compiling kernels). **Synchronise**: CuPy launches kernels asynchronously, so the clock must be read only after `cupy.cuda.Device().synchronize()`; `mhattn.lessons.time_attention` does both. Timings change from run to run, so the test run ignores the output of the next cells.
"""),
    ("code", """
# NBVAL_IGNORE_OUTPUT
mha = mhattn.MultiHeadAttention(128, 8, seed=0)
rng = np.random.default_rng(0)
for T in (64, 128, 256, 512):
    x = rng.standard_normal((2, T, 128)).astype(np.float32)
    mha.forward(x)  # warm-up
    t = time_attention(mha, x, repeats=3)
    print(f"T={T:4d}  forward {t['forward_s'] * 1e3:7.2f} ms   backward {t['backward_s'] * 1e3:7.2f} ms")
"""),
    ("md", """
### Memory, measured

NumPy reports its allocations to Python's `tracemalloc`, so the peak of one forward pass can be measured and set beside the size of the weights. The weights are only part of the peak (the scores, the $Q, K, V$ projections and the cache are there too), but their share grows with $T$.
"""),
    ("code", """
# NBVAL_IGNORE_OUTPUT
for T in (128, 256, 512, 1024):
    x = rng.standard_normal((2, T, 128)).astype(np.float32)
    tracemalloc.start()
    mha.forward(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    w = weights_bytes(2, 8, T, T, "float32")
    print(f"T={T:5d}  peak {peak / 2**20:7.1f} MiB   weights {w / 2**20:7.1f} MiB   ({w / peak:.0%} of the peak)")
"""),
    ("md", """
### NumPy against CuPy, where a GPU exists

The same `MultiHeadAttention`, built under `use_backend("cupy")`, runs every op on the GPU because its parameters and inputs live there. On a machine without CuPy the cell says so and skips.
"""),
    ("code", """
# NBVAL_IGNORE_OUTPUT
try:
    with mhattn.use_backend("cupy"):
        gpu_mha = mhattn.MultiHeadAttention(128, 8, seed=0)
        for T in (256, 1024, 2048):
            xg = mhattn.asarray(rng.standard_normal((2, T, 128)).astype(np.float32))
            gpu_mha.forward(xg)  # warm-up: kernels compile here
            tg = time_attention(gpu_mha, xg)
            tc = time_attention(mha, mhattn.to_numpy(xg))
            print(f"T={T:5d}  NumPy {tc['forward_s'] * 1e3:8.2f} ms   CuPy {tg['forward_s'] * 1e3:8.2f} ms   (forward)")
except (ImportError, RuntimeError) as err:
    print(f"no GPU comparison on this machine ({type(err).__name__}); see the recorded figures above")
"""),
    ("md", """
## Exercises

* **Exercise 3** (`ex03_attention_forward.py`): your attention forward builds the `(B, h, T, S)` weights counted here.
* **Exercise 6** (`ex06_mha_forward.py`): the output projection, one of the four $O(BTd^2)$ matrix products.

To try: run `benchmarks/attention_scaling.py --dtype float64` and compare with the float32 record; then halve `d_model` and watch where the $T^2$ part takes over.
"""),
]

NB01 = [
    ("md", """
# 01 · One sentence through multi-head attention: d_model = 512, h = 8, d_k = 64

**After this notebook you can**
- name every array in a multi-head attention layer and give its shape, from the input `(B, T, 512)` to the output `(B, T, 512)`;
- say where the split into 8 heads of 64 happens (after the projections, before the scores) and where the heads meet again (the concat, then `W_o`);
- read a per-head attention heatmap;
- count the layer's parameters, and explain why the count does not depend on h, and why the course text's formula counts a different layer.

Everything below calls `mhattn`; the maths lives in `mhattn/functional/` (Vaswani et al. 2017, §3.2).
"""),
    ("code", """
import numpy as np

import mhattn
from mhattn import counting, walkthrough
from mhattn.notebook import show
from mhattn.plot import attention_heatmaps

print("backend:", mhattn.get_backend())
"""),
    ("md", """
## The input

A real sentence, split on whitespace. Each distinct word gets a row of a seeded random table (a stand-in for a learned embedding), so the input is `X` of shape `(B, T, d_model) = (1, 12, 512)`.
"""),
    ("code", """
wt = walkthrough.run(walkthrough.SENTENCE, d_model=512, num_heads=8, seed=0)
print(len(wt.tokens), "tokens:", wt.tokens)
"""),
    ("md", """
## Every step and its shape

`walkthrough.run` calls the textbook steps from `mhattn.functional` one at a time and keeps each intermediate:

1. **Projections.** `Q = X W_q + b_q`, and the same for `K` and `V`. Each `W` is `(512, 512)`: it is the eight per-head matrices `W^Q_i` of shape `(512, 64)` stored side by side.
2. **Split.** The last axis of 512 is cut into 8 slices of 64 and the head axis is moved forward: `(1, 12, 512)` becomes `(1, 8, 12, 64)`. No numbers change; it is a reshape and a transpose.
3. **Scores.** In every head, every query is compared with every key: `q k^T / sqrt(64)`, shape `(1, 8, 12, 12)`.
4. **Weights.** A softmax over the key axis turns each row of scores into a distribution.
5. **Per-head outputs.** Each head takes a weighted sum of its values, `(1, 8, 12, 64)`.
6. **Concat.** The heads are put side by side again: `(1, 12, 512)`.
7. **Output projection.** `concat W_o + b_o`, `(1, 12, 512)`.
"""),
    ("code", """
print(walkthrough.format_steps(wt))
"""),
    ("md", """
The step-by-step result is the same as one call of `MultiHeadAttention.forward` with the same weights (the module fuses the three projections into one matrix product for self-attention):
"""),
    ("code", """
print(f"max |step-by-step - module| = {wt.max_diff_vs_module:.1e}")
"""),
    ("md", """
## What each head looks at

One heatmap per head: row t shows how query token t spreads its attention over the 12 keys. The weights are untrained, so the patterns are random, but they already differ from head to head because each head has its own slice of `W_q` and `W_k`. Notebook 04 shows heads after training.
"""),
    ("code", """
show(attention_heatmaps(wt.weights[0], wt.tokens, title="MultiHeadAttention(512, 8): weights per head (untrained)"))
"""),
    ("code", """
w = mhattn.to_numpy(wt.weights[0])  # (h, T, S)
print("each row sums to 1:", np.allclose(w.sum(-1), 1.0))
print("largest weight per head:", np.round(w.max(axis=(1, 2)), 3))
"""),
    ("md", """
## Counting parameters

In the standard layer, head i has `W^Q_i`, `W^K_i` and `W^V_i` of shape `(d_model, d_k)`: each head reads **all** 512 input features and writes its own 64. Three such matrices per head over 8 heads are `3 · 8 · 512 · 64 = 3 · 512²`; `W_o` adds `512²`. So the layer has `4 · d_model²` weights (plus `4 · d_model` biases) for any h that divides d_model. The module agrees:
"""),
    ("code", """
d = 512
for h in (1, 2, 8, 16):
    m = mhattn.MultiHeadAttention(d, h, seed=0)
    print(f"h={h:2d}  d_k={d // h:3d}  parameters={m.num_parameters():,}  (4*d^2 + 4*d = {4 * d * d + 4 * d:,})")
"""),
    ("md", """
Eight heads of 64 have exactly as many parameters as one head of 512.

### The course text's formula counts another layer

The course text this project follows gives the count as `h · 3 · (d_model/h)² + d_model²` and says it simplifies to `4 · d_model²`. It does not. With d_model = 512 and h = 8:
"""),
    ("code", """
d, h = 512, 8
print(f"h*3*(d/h)^2 + d^2 = {counting.explainer_count(d, h):,}")
print(f"4*d^2             = {4 * d * d:,}")
print(f"the formula at h=1: {counting.explainer_count(d, 1):,}; at h=8: {counting.explainer_count(d, h):,}")
"""),
    ("md", """
`h · 3 · (d/h)² + d² = 3d²/h + d²`, which equals `4d²` only when h = 1. The formula also contradicts the text's own claim that the count does not depend on h.

What it does count is a layer where head i's projections are `(d_k, d_k)` matrices that read only the head's own 64-feature slice of the input. Stored side by side, those are **block-diagonal** `(512, 512)` matrices. `mhattn.counting.block_diagonal_mha` builds that layer; count its free entries:
"""),
    ("code", """
block = counting.block_diagonal_mha(d, h, seed=0)
mask = counting.block_diagonal_mask(d, h)
free = counting.free_parameters(block, {"W_q": mask, "W_k": mask, "W_v": mask})
print(f"block-diagonal layer, weights only: {free - 4 * d:,}  (formula: {counting.explainer_count(d, h):,})")
print(f"standard layer, weights only:       {counting.standard_count(d, h, bias=False):,}")
"""),
    ("md", """
The difference is not just bookkeeping. In the block-diagonal layer, changing input features 0–63 can only change head 0's query; in the standard layer it changes every head's query:
"""),
    ("code", """
rng = np.random.default_rng(1)
x = rng.standard_normal((1, 4, d)).astype(np.float32)
x2 = x.copy()
x2[..., :64] += 1.0  # change only the first 64 input features
standard = mhattn.MultiHeadAttention(d, h, seed=0)
for name, layer in (("standard", standard), ("block-diagonal", block)):
    W = mhattn.to_numpy(layer.params["W_q"])
    dq = ((x2 - x) @ W).reshape(4, h, d // h)  # change in each head's query
    changed = [i for i in range(h) if np.abs(dq[:, i]).max() > 0]
    print(f"{name:15s}: heads whose query changed: {changed}")
"""),
    ("md", """
So the standard layer spends `4 d_model²` weights whatever h is, and each head sees the whole input; the block-diagonal layer is cheaper (`3 d_model²/h + d_model²`) but each head sees only its slice before attention.

## Exercises

- Exercise 1 (split heads), 5 (combine heads) and 6 (output projection and the full forward) rebuild the steps of this notebook.
- Exercise 8 asks you to count parameters for both layers.

Run `mhattn grade` to check your work (see the README).
"""),
]

NOTEBOOKS = {
    "00_setup_and_backends": NB00,
    "01_walkthrough_512_8x64": NB01,
    "02_scaled_dot_product_attention": NB02,
    "03_manual_backprop": NB03,
    "06_head_count_sweep": NB06,
    "07_gpu_and_performance": NB07,
}
