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
# # 08 · GPU and performance
#
# **Learning objectives.** After this notebook you can
#
# 1. count how time and memory of attention grow with the sequence length $T$, and point to the one tensor that grows like $T^2$;
# 2. read recorded timings, and reproduce them on your machine with `python -m mhattn.course.scaling`;
# 3. show that h heads of width $d_{model}/h$ cost about what one head of full width costs, in multiply-adds and in measured time;
# 4. time NumPy against CuPy correctly (warm-up, and synchronising the GPU before reading the clock), and read a GPU record.

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
# The projections grow linearly in $T$; the attention part grows like $T^2$. In multiply-adds the two are equal where $4 B T d^2 = 2 B T^2 d$, at $T = 2d$:

# %%
import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import mhattn
from mhattn.course.display import show
from mhattn.course.lessons import time_attention, weights_bytes
from mhattn.functional import linear_forward, scaled_dot_product_attention_forward, split_heads_forward
from mhattn.plots.performance import heads_cost_figure, scaling_figure


def madds(B, T, d, h):
    """Multiply-adds of one forward: (projections, attention), h heads of d_k = d / h."""
    d_k = d // h
    return 4 * B * T * d * d, 2 * B * h * T * T * d_k


for T in (64, 256, 1024):
    proj, att = madds(2, T, 128, 8)
    print(f"d_model=128, T={T:5d}:  projections {proj / 1e6:7.1f} M   attention {att / 1e6:7.1f} M")
assert madds(2, 256, 128, 8)[0] == madds(2, 256, 128, 8)[1]  # equal at T = 2 d_model

# %% [markdown]
# The weights `(B, h, T, T)` are kept for the backward pass, so their memory is paid once per layer per batch:

# %%

print(f"{'T':>7} {'(B, h, T, T) float32, B=8, h=8':>34}")
for T in (128, 512, 2048, 8192, 32768):
    print(f"{T:>7} {weights_bytes(8, 8, T, T, 'float32') / 2**20:>30,.0f} MiB")
assert weights_bytes(8, 8, 32768, 32768, "float32") == 256 * 2**30

# %% [markdown]
# At $T = 32768$ the weights of one layer for a batch of 8 need 256 GiB: more than any single GPU holds. This is the memory that FlashAttention-style kernels avoid by never storing the full weight matrix (they recompute it blockwise in the backward pass). mhattn's plain path keeps it, because a learner should be able to look at it; notebook 09 builds the tiled path, which does not.
#
# ## Recorded figures
#
# `python -m mhattn.course.scaling` (also `benchmarks/attention_scaling.py` in a clone of the repository) times `MultiHeadAttention(128, 8)` forward and backward, float32, `B = 2`, best of 3, for $T = 64 \ldots 2048$, and writes a JSON record. The records shipped in `mhattn/data/` are:

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
show(scaling_figure(records, title="recorded: MultiHeadAttention(128, 8), B = 2"))

# %% [markdown]
# **What the NumPy record shows.** The record was made on the 2-core CPU machine this course is developed on, shared with other jobs, so single numbers are noisy (the best of 3 helps, but does not remove it). Read the growth per doubling of $T$: linear work gives $\times 2$, quadratic work $\times 4$. The multiply-add count above says the projections dominate below $T = 2d = 256$, so one might expect about $\times 2$ at the start. The record does not show that: from $T = 64$ on, time grows at close to the quadratic rate (checked below).

# %%
cpu = next(rec for rec in records if rec["backend"] == "numpy")
for key in ("forward_s", "backward_s"):
    times = np.array([r[key] for r in cpu["rows"]])
    Ts = np.array([r["T"] for r in cpu["rows"]])
    per_doubling = (times[-1] / times[0]) ** (1 / np.log2(Ts[-1] / Ts[0]))
    print(f"{key[:-2]:>8}: growth per doubling {np.round(times[1:] / times[:-1], 1)}, geometric mean {per_doubling:.2f}")
    assert per_doubling > 3  # closer to T^2 (x4) than to linear (x2), over the whole record

# %% [markdown]
# **Why multiply-adds mislead here.** The quadratic part is not only the two matrix products: the softmax makes several elementwise passes over the `(B, h, T, T)` scores (maximum, subtract, `exp`, sum, divide; the backward more), and each pass costs far more per entry than a multiply-add inside a matrix product, which runs near the machine's peak. The $h$ per-head products are also small matrices, which run below peak. So the $T^2$ part costs more than its multiply-adds say, and takes a larger share of the time than its share of multiply-adds, already at small $T$ (both asserted below). Measured: the share of one forward spent in the attention step (scores, softmax, weighted sum) against the projections, at a small and a larger $T$.

# %%
# NBVAL_IGNORE_OUTPUT
rng = np.random.default_rng(0)


def cpu_seconds(f, repeats=5):
    """Best-of-``repeats`` CPU seconds of ``f()`` in this thread (call it with BLAS held to one thread).

    CPU time, not wall-clock time: other jobs sharing the machine then barely change it.
    """
    f()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        f()
        best = min(best, time.thread_time() - t0)
    return best


def attention_share(T, B=2, d=128, h=8):
    """CPU seconds of the four projections and of the attention step, and the attention step's share."""
    x = rng.standard_normal((B, T, d)).astype(np.float32)
    W = rng.standard_normal((d, d)).astype(np.float32)
    q = split_heads_forward(x, h)[0]  # (B, h, T, d_k)
    proj = cpu_seconds(lambda: [linear_forward(x, W) for _ in range(4)])
    att = cpu_seconds(lambda: scaled_dot_product_attention_forward(q, q, q))
    return proj, att, att / (proj + att)


with threadpool_limits(1, "blas"):
    shares = {T: attention_share(T) for T in (64, 512)}
for T, (proj, att, share) in shares.items():
    print(f"T={T:4d}: projections {proj * 1e3:6.2f} ms   attention step {att * 1e3:6.2f} ms   attention share {share:.0%}")
assert shares[512][2] > shares[64][2]  # the quadratic part takes a growing share of the time
proj_madds, att_madds = madds(2, 64, 128, 8)
assert shares[64][2] > att_madds / (proj_madds + att_madds)  # more time than its share of multiply-adds

# %% [markdown]
# ## h heads cost about what one wide head costs
#
# At fixed $d_{model}$, more heads make each head narrower ($d_k = d_{model}/h$): the projections are the same four $d_{model} \times d_{model}$ products whatever $h$ is, and the attention products cost $h \cdot T^2 d_k = T^2 d_{model}$. The multiply-adds do not depend on $h$ at all:

# %%
hs = (1, 2, 4, 8, 16)
counts = [sum(madds(4, 64, 512, h)) for h in hs]
print("multiply-adds of one forward, d_model = 512, T = 64, B = 4:", [f"{c / 1e6:.1f} M" for c in counts])
assert len(set(counts)) == 1

# %% [markdown]
# What does depend on $h$: the weights `(B, h, T, T)` and the softmax's elementwise work grow $\times h$, and the per-head matrix products get smaller. Here $T = 64 \ll 2 d_{model} = 1024$, so almost all the multiply-adds are in the projections, which do not change with $h$, and measured time should stay close to flat (checked below: the slowest $h$ takes less than twice the time of the fastest). Each row below is the best of 5 forward + backward runs, in CPU seconds with BLAS on one thread:

# %%
# NBVAL_IGNORE_OUTPUT
heads_rows = []
x = rng.standard_normal((4, 64, 512)).astype(np.float32)
for h, c in zip(hs, counts, strict=True):
    mod = mhattn.MultiHeadAttention(512, h, seed=0)
    with threadpool_limits(1, "blas"):
        seconds = cpu_seconds(lambda mod=mod: (mod.forward(x, need_weights=False), mod.backward(np.ones_like(x))))
    heads_rows.append({"h": h, "time_s": seconds, "madds": c})
    print(f"h={h:2d} (d_k={512 // h:3d}): forward + backward {seconds * 1e3:7.2f} ms")
spread = max(r["time_s"] for r in heads_rows) / min(r["time_s"] for r in heads_rows)
print(f"slowest / fastest: {spread:.2f}")
assert spread < 2  # about the same cost: well under the x16 that h full-width heads would cost
show(heads_cost_figure(heads_rows))

# %% [markdown]
# ## GPU records
#
# In a clone of the repository, `benchmarks/gpu_check.sh` (on a machine with CuPy, a CUDA build of torch and pytest) runs the test suite on CuPy, then times forward + backward of the plain and tiled paths (notebook 09) against `torch.nn.MultiheadAttention` on CUDA, and writes `mhattn/data/gpu_check.json` and `mhattn/data/attention_scaling_cupy.json` (which the figure above then plots beside the CPU record). With only the wheel, `python -m mhattn.course.scaling --backend cupy` times the same model on your GPU. This cell shows the GPU record where one is shipped:

# %%
gpu_record = data / "gpu_check.json"
if gpu_record.is_file():
    rec = json.loads(gpu_record.read_text())
    print(f"{rec['device']}: mhattn on {rec['backend']}, torch {rec['torch']}, {rec['dtype']}")
    for r in rec["rows"]:
        ratios = [f"{r[k]:.2f}" if r[k] is not None else "-" for k in ("tiled_over_torch", "plain_over_torch")]
        print(
            f"B {r['B']:2d}, T {r['T']:5d}, d_model {r['d_model']}, h {r['num_heads']}:  tiled/torch {ratios[0]}   plain/torch {ratios[1]}"
        )
else:
    print("no GPU record shipped yet: on a machine with a CUDA GPU, run python -m mhattn.course.scaling --backend cupy")

# %% [markdown]
# ## Timing it yourself
#
# Two rules make timings honest. **Warm up**: the first call pays for memory allocation (and on CuPy for compiling kernels). **Synchronise**: CuPy launches kernels asynchronously, so the clock must be read only after `cupy.cuda.Device().synchronize()`; `mhattn.course.lessons.time_attention` does both. Timings change from run to run, so the test run ignores the output of the next cells.

# %%
# NBVAL_IGNORE_OUTPUT
mha = mhattn.MultiHeadAttention(128, 8, seed=0)
for T in (64, 128, 256, 512):
    x = rng.standard_normal((2, T, 128)).astype(np.float32)
    mha.forward(x)  # warm-up
    t = time_attention(mha, x, repeats=3)
    print(f"T={T:4d}  forward {t['forward_s'] * 1e3:7.2f} ms   backward {t['backward_s'] * 1e3:7.2f} ms")

# %% [markdown]
# ### Memory, measured
#
# NumPy reports its allocations to Python's `tracemalloc`, so the peak of one forward pass can be measured and set beside the size of the weights. The weights are only part of the peak (the scores, the $Q, K, V$ projections and the cache are there too), but their share grows with $T$ (checked below). Notebook 09 removes them altogether with a tiled pass.

# %%
# NBVAL_IGNORE_OUTPUT
weight_share = []
for T in (128, 256, 512, 1024):
    x = rng.standard_normal((2, T, 128)).astype(np.float32)
    tracemalloc.start()
    mha.forward(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    w = weights_bytes(2, 8, T, T, "float32")
    weight_share.append(w / peak)
    print(f"T={T:5d}  peak {peak / 2**20:7.1f} MiB   weights {w / 2**20:7.1f} MiB   ({w / peak:.0%} of the peak)")
assert weight_share[-1] > weight_share[0]

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
# * **Exercise 11** (`ex11_online_softmax.py`, with notebook 09): attention without the `(B, h, T, S)` weights.
#
# To try: run `python -m mhattn.course.scaling --dtype float64` and compare with the float32 record; then halve `d_model` (`--d-model 64`) and watch where the $T^2$ part takes over.
