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
# # 07 · GPU and performance
#
# **Learning objectives.** After this notebook you can
#
# 1. count how time and memory of attention grow with the sequence length $T$, and point to the one tensor that grows like $T^2$;
# 2. read recorded timings, and reproduce them on your machine with `benchmarks/attention_scaling.py`;
# 3. time NumPy against CuPy correctly (warm-up, and synchronising the GPU before reading the clock).

# %% [markdown]
# ## Counting first
#
# For `B` sequences of length `T`, model width $d$ and $h$ heads of $d_k = d/h$:
#
# | part | multiply-adds | memory it creates |
# |---|---|---|
# | projections $Q, K, V$ and $W_o$ | $4 \cdot B T d^2$ | $B T d$ each |
# | scores $QK^\top$ | $B h T^2 d_k = B T^2 d$ | **$B h T^2$ weights** |
# | weighted sum with $V$ | $B T^2 d$ | $B T d$ |
#
# The projections grow linearly in $T$; the attention part grows like $T^2$ in both time and memory. The crossover is at about $T \approx 2d$. The weights `(B, h, T, T)` are kept for the backward pass, so their memory is paid once per layer per batch:

# %%
import json
import tracemalloc
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import mhattn
from mhattn.course.display import show
from mhattn.course.lessons import time_attention, weights_bytes

print(f"{'T':>7} {'(B, h, T, T) float32, B=8, h=8':>34}")
for T in (128, 512, 2048, 8192, 32768):
    print(f"{T:>7} {weights_bytes(8, 8, T, T, 'float32') / 2**20:>30,.0f} MiB")

# %% [markdown]
# At $T = 32768$ the weights of one layer for a batch of 8 need 256 GiB: more than any single GPU holds. This is the memory that FlashAttention-style kernels avoid by never storing the full weight matrix (they recompute it blockwise in the backward pass). mhattn keeps it, because a learner should be able to look at it.
#
# ## Recorded figures
#
# `benchmarks/attention_scaling.py` times `MultiHeadAttention(128, 8)` forward and backward, float32, `B = 2`, best of 3, for $T = 64 \ldots 2048$, and writes a JSON record. The records shipped in `mhattn/data/` are:

# %%
data = Path(mhattn.__file__).parent / "data"
records = [json.loads(p.read_text()) for p in sorted(data.glob("attention_scaling_*.json"))]
for rec in records:
    print(
        f"backend={rec['backend']}  device={rec['device']}  B={rec['B']}  d_model={rec['d_model']}  h={rec['num_heads']}  {rec['dtype']}"
    )
    print(f"{'T':>6} {'forward ms':>11} {'backward ms':>12} {'weights MiB':>12}")
    for r in rec["rows"]:
        print(f"{r['T']:>6} {r['forward_s'] * 1e3:>11.1f} {r['backward_s'] * 1e3:>12.1f} {r['weights_bytes'] / 2**20:>12.1f}")

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.6))
for rec in records:
    Ts = np.array([r["T"] for r in rec["rows"]])
    for key, style in (("forward_s", "o-"), ("backward_s", "s--")):
        ax.plot(Ts, [r[key] * 1e3 for r in rec["rows"]], style, label=f"{rec['backend']} {key.split('_')[0]}")
ref = Ts.astype(float) ** 2
ax.plot(Ts, ref / ref[-1] * rec["rows"][-1]["backward_s"] * 1e3, ":", color="gray", label="slope of T^2")
ax.set(
    xscale="log", yscale="log", xlabel="sequence length T", ylabel="milliseconds", title="recorded: MultiHeadAttention(128, 8)"
)
ax.legend(fontsize=8)
fig.tight_layout()
show(fig)

# %% [markdown]
# **About these figures.** The NumPy record was made on the 2-core CPU machine this course is developed on, shared with other jobs, so single numbers are noisy (the best of 3 helps, but does not remove it). What to read from them is the slope: at small $T$ the projections dominate; towards $T = 2048$ the curves bend up to the $T^2$ slope.
#
# **No GPU record is shipped yet**: the machine that made these figures has no GPU. To add one, on a machine with CUDA and CuPy (`pip install -e ".[gpu]"`):
#
# ```bash
# python benchmarks/attention_scaling.py --backend cupy --out mhattn/data/attention_scaling_cupy.json
# python benchmarks/attention_scaling.py --backend numpy --out mhattn/data/attention_scaling_numpy.json
# ```
#
# and rerun this notebook: every record in `mhattn/data/` is tabulated and plotted above.
#
# ## Timing it yourself
#
# Two rules make timings honest. **Warm up**: the first call pays for memory allocation (and on CuPy for compiling kernels). **Synchronise**: CuPy launches kernels asynchronously, so the clock must be read only after `cupy.cuda.Device().synchronize()`; `mhattn.course.lessons.time_attention` does both. Timings change from run to run, so the test run ignores the output of the next cells.

# %%
# NBVAL_IGNORE_OUTPUT
mha = mhattn.MultiHeadAttention(128, 8, seed=0)
rng = np.random.default_rng(0)
for T in (64, 128, 256, 512):
    x = rng.standard_normal((2, T, 128)).astype(np.float32)
    mha.forward(x)  # warm-up
    t = time_attention(mha, x, repeats=3)
    print(f"T={T:4d}  forward {t['forward_s'] * 1e3:7.2f} ms   backward {t['backward_s'] * 1e3:7.2f} ms")

# %% [markdown]
# ### Memory, measured
#
# NumPy reports its allocations to Python's `tracemalloc`, so the peak of one forward pass can be measured and set beside the size of the weights. The weights are only part of the peak (the scores, the $Q, K, V$ projections and the cache are there too), but their share grows with $T$.

# %%
# NBVAL_IGNORE_OUTPUT
for T in (128, 256, 512, 1024):
    x = rng.standard_normal((2, T, 128)).astype(np.float32)
    tracemalloc.start()
    mha.forward(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    w = weights_bytes(2, 8, T, T, "float32")
    print(f"T={T:5d}  peak {peak / 2**20:7.1f} MiB   weights {w / 2**20:7.1f} MiB   ({w / peak:.0%} of the peak)")

# %% [markdown]
# ### NumPy against CuPy, where a GPU exists
#
# The same `MultiHeadAttention`, built under `use_backend("cupy")`, runs every op on the GPU because its parameters and inputs live there. On a machine without CuPy the cell says so and skips.

# %%
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

# %% [markdown]
# ## Exercises
#
# * **Exercise 3** (`ex03_attention_forward.py`): your attention forward builds the `(B, h, T, S)` weights counted here.
# * **Exercise 6** (`ex06_mha_forward.py`): the output projection, one of the four $O(BTd^2)$ matrix products.
#
# To try: run `benchmarks/attention_scaling.py --dtype float64` and compare with the float32 record; then halve `d_model` and watch where the $T^2$ part takes over.
