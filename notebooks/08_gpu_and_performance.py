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
# 3. show that h heads of width $d_{model}/h$ cost about what one head of full width costs in multiply-adds, and in measured time only while $T \ll 2 d_{model}$;
# 4. time NumPy against CuPy or torch correctly (warm-up, and synchronising the GPU before reading the clock), and read a GPU record;
# 5. run one `MultiHeadAttention` on NumPy, on torch tensors and on a simulated GPU, and say why the simulated GPU catches bugs a CPU hides.

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
from mhattn.backend import device_of
from mhattn.course.display import show
from mhattn.course.lessons import time_attention, weights_bytes
from mhattn.functional import linear_forward, scaled_dot_product_attention_forward, softmax_forward, split_heads_forward
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
print(f"256 GiB = {256 * 2**30 / 1e9:.0f} GB")
assert 0.9 * 288e9 < 256 * 2**30 < 288e9  # about the whole of a 288 GB GPU

# %% [markdown]
# At $T = 32768$ the weights of one layer for a batch of 8 need the amount printed above: about the whole memory of a 288 GB GPU (AMD's Instinct MI355X and NVIDIA's Blackwell Ultra, both announced in 2025 with 288 GB: The Register, 12 June 2025, https://www.theregister.com/2025/06/12/amd_mi355x/), for one layer's weights alone. This is the memory that FlashAttention-style kernels avoid by never storing the full weight matrix: they recompute it blockwise in the backward pass (Dao et al. 2022, §3.1, "Recomputation"). mhattn's plain path keeps it, because a learner should be able to look at it; notebook 09 builds the tiled path, which does not.
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
# **What the NumPy record shows.** The record was made on the 2-core CPU machine this course is developed on, shared with other jobs, so single numbers are noisy (the best of 3 helps, but does not remove it). Read the growth per doubling of $T$: linear work gives $\times 2$, quadratic work $\times 4$. The multiply-add count above says the projections dominate below $T = 2d = 256$, so one might expect about $\times 2$ at the start. The record does not show a clean $\times 2$ either: it is noisy, single doublings range from close to linear to above quadratic, and over the whole record (from $T = 64$ to $2048$) the growth per doubling averages closer to $\times 4$ than to $\times 2$ (all checked below).

# %%
cpu = next(rec for rec in records if rec["backend"] == "numpy")
for key in ("forward_s", "backward_s"):
    times = np.array([r[key] for r in cpu["rows"]])
    Ts = np.array([r["T"] for r in cpu["rows"]])
    per_doubling = (times[-1] / times[0]) ** (1 / np.log2(Ts[-1] / Ts[0]))
    print(f"{key[:-2]:>8}: growth per doubling {np.round(times[1:] / times[:-1], 1)}, geometric mean {per_doubling:.2f}")
    assert 3 < per_doubling < 4  # closer to T^2 (x4) than to linear (x2), over the whole record
    steps = times[1:] / times[:-1]
    assert steps.min() < 2.5 and steps.max() > 4  # but single doublings scatter: some near linear, some above quadratic

# %% [markdown]
# **Why multiply-adds mislead here.** The quadratic part is not only the two matrix products: the softmax makes several elementwise passes over the `(B, h, T, T)` scores (maximum, subtract, `exp`, sum, divide; the backward more), and one softmax entry takes the time of many multiply-adds inside a matrix product (measured below at $T = 512$: the whole softmax per entry against the product $q k^\top$ per multiply-add). So the $T^2$ part costs more than its multiply-adds say, and takes a larger share of the time than its share of multiply-adds, already at small $T$ (asserted below). Measured: the share of one forward spent in the attention step (scores, softmax, weighted sum) against the projections, at a small and a larger $T$.

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


def softmax_against_product(T=512, B=2, d=128, h=8):
    """CPU seconds of the softmax over (B, h, T, T) per entry, and of the product q k^T per multiply-add."""
    q = split_heads_forward(np.random.default_rng(1).standard_normal((B, T, d)).astype(np.float32), h)[0]  # (B, h, T, d_k)
    kT = q.swapaxes(-1, -2)  # (B, h, d_k, T)
    scores = q @ kT  # (B, h, T, T)
    product = cpu_seconds(lambda: q @ kT)
    softmax = cpu_seconds(lambda: softmax_forward(scores))
    return softmax / scores.size, product / (scores.size * (d // h))


with threadpool_limits(1, "blas"):
    per_entry, per_madd = softmax_against_product()
print(f"T= 512: softmax {per_entry * 1e9:5.2f} ns per entry   q k^T {per_madd * 1e9:5.3f} ns per multiply-add")
assert per_entry > 5 * per_madd  # one softmax entry costs the time of many multiply-adds

# %% [markdown]
# ## h heads cost about what one wide head costs, while $T \ll 2 d_{model}$
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
# That flat line needs $T \ll 2 d_{model}$. When $T$ is large against $d_{model}$ the attention step dominates, and
# its softmax passes over `(B, h, T, T)` grow $\times h$ while the multiply-adds do not: one wide head and sixteen
# narrow ones at $d_{model} = 128$, $T = 1024$ (here $T = 8 d_{model}$; best of 3, CPU seconds, BLAS on one thread), on the plain path that stores the weights (`attention="plain"`; at this size the default would take the tiled path of notebook 09 for sixteen heads, whose worker threads this clock does not see):

# %%
# NBVAL_IGNORE_OUTPUT
x_long = rng.standard_normal((1, 1024, 128)).astype(np.float32)
long_rows = {}
for h in (1, 16):
    mod = mhattn.MultiHeadAttention(128, h, seed=0, attention="plain")
    with threadpool_limits(1, "blas"):
        long_rows[h] = cpu_seconds(
            lambda mod=mod: (mod.forward(x_long, need_weights=False), mod.backward(np.ones_like(x_long))), 3
        )
    print(f"d_model 128, T 1024, h={h:2d}: forward + backward {long_rows[h] * 1e3:7.1f} ms")
print(f"h=16 / h=1: {long_rows[16] / long_rows[1]:.1f}")
assert len({sum(madds(1, 1024, 128, h)) for h in (1, 16)}) == 1  # the same multiply-adds ...
assert long_rows[16] > 2 * long_rows[1]  # ... but far from the same time

# %% [markdown]
# ## GPU records
#
# In a clone of the repository, `benchmarks/gpu_check.sh` (on a machine with CuPy, a CUDA build of torch and pytest) runs the tests' GPU legs on CuPy and on torch CUDA (those it finds), then, when it has both, times forward + backward of the plain and tiled paths (notebook 09) against `torch.nn.MultiheadAttention` on CUDA and writes `mhattn/data/gpu_check.json` and `mhattn/data/attention_scaling_cupy.json` (which the figure above then plots beside the CPU record). With only the wheel, `python -m mhattn.course.scaling --backend cupy` times the same model on your GPU. This cell shows the GPU record where one is shipped:

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
# Two rules make timings honest. **Warm up**: the first call pays for memory allocation (and on CuPy for compiling kernels), so it is not timed. **Synchronise**: GPU libraries launch kernels asynchronously, so the clock must be read only after the device has finished: `cupy.cuda.Device().synchronize()` on CuPy, `torch.cuda.synchronize()` for CUDA tensors (CuPy's documentation gives both: its "Overview" on compiling kernels at first use, its "Performance Best Practices" on timing asynchronous work). `mhattn.course.lessons.time_attention` does both: one untimed forward and backward, then the best of `repeats`, synchronising whatever GPU its input lives on. Timings change from run to run, so the test run ignores the output of the next cells.

# %%
# NBVAL_IGNORE_OUTPUT
mha = mhattn.MultiHeadAttention(128, 8, seed=0)
for T in (64, 128, 256, 512):
    x = rng.standard_normal((2, T, 128)).astype(np.float32)
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
            tg = time_attention(gpu_mha, xg)  # its untimed first call compiles the kernels
            tc = time_attention(mha, mhattn.to_numpy(xg))
            print(f"T={T:5d}  NumPy {tc['forward_s'] * 1e3:8.2f} ms   CuPy {tg['forward_s'] * 1e3:8.2f} ms   (forward)")
except (ImportError, RuntimeError) as err:
    print(f"no GPU comparison on this machine ({type(err).__name__}); see the recorded figures above")

# %% [markdown]
# ## One model, three array libraries
#
# The **Python array API standard**, written by the Consortium for Python Data API Standards (data-apis.org), names one set of array functions and methods (`matmul`, `sum`, `concat`, `permute_dims`, `x.mT`, `asarray(..., device=)`, ...) that NumPy 2, CuPy, PyTorch, JAX and others answer to. **array-api-compat** supplies the standard's names where a library spells them differently (torch, CuPy), and **array-api-strict** is a library with the standard and nothing more, for tests. mhattn's ops ask their inputs for their namespace (`xp = mhattn.array_namespace(x, W)`) and call only the standard's functions, so one `MultiHeadAttention` runs on each library's arrays, on each one's device. Here it runs on NumPy in float64, as the reference:

# %%
rng_x = np.random.default_rng(1)
B_, T_, d_, h_ = 2, 6, 16, 4
x_host = rng_x.standard_normal((B_, T_, d_))  # (B, T, d_model) float64
mha_np = mhattn.MultiHeadAttention(d_, h_, dtype="float64", seed=0)
out_np, w_np = mha_np(x_host)  # (B, T, d_model), (B, T, T) averaged over heads
print("NumPy:", type(out_np).__name__, out_np.shape, out_np.dtype)

# %% [markdown]
# **On torch tensors.** Under `use_backend("torch")` the same seed gives the same weights as torch tensors (on the GPU when torch sees CUDA). `torch.nn.MultiheadAttention` gets those weights (`to_torch_state_dict`), and the two must agree to 1e-9 in float64: the outputs, the averaged weights, and mhattn's hand-written gradient of the input against torch's autograd. Whether torch is installed, and on which device it runs, depends on the machine, so the test run ignores this cell's output; the checks hold wherever it runs.

# %%
# NBVAL_IGNORE_OUTPUT
try:
    import torch
except ImportError:
    torch = None
    print("torch is not installed here: skipped (pip install torch to run this cell)")
if torch is not None:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    x_t = torch.as_tensor(x_host, device=dev)
    with mhattn.use_backend("torch", device=dev):
        mha_t = mhattn.MultiHeadAttention(d_, h_, dtype="float64", seed=0)  # seed 0: the NumPy model's weights
    out_t, w_t = mha_t(x_t)
    dq, dk, dv = mha_t.backward(torch.ones_like(out_t))  # self-attention: the input's gradient is their sum
    ref = torch.nn.MultiheadAttention(d_, h_, batch_first=True, dtype=torch.float64, device=dev)
    ref.load_state_dict({n: torch.as_tensor(a, device=dev) for n, a in mha_t.to_torch_state_dict().items()})
    x_ref = x_t.clone().requires_grad_(True)
    out_ref, w_ref = ref(x_ref, x_ref, x_ref)
    out_ref.backward(torch.ones_like(out_ref))
    pairs = {"output": (out_t, out_ref), "weights": (w_t, w_ref), "input gradient": (dq + dk + dv, x_ref.grad)}
    for name, (ours, theirs) in pairs.items():
        gap = float((ours - theirs.detach()).abs().max())
        print(f"{name:>15}: mhattn on torch ({ours.device}) against torch.nn.MultiheadAttention, max |difference| {gap:.1e}")
        assert gap < 1e-9
    assert type(out_t) is torch.Tensor and out_t.device.type == dev  # torch in, torch out, on the same device
    assert np.allclose(mhattn.to_numpy(out_t), out_np, rtol=1e-12, atol=1e-12)  # and NumPy's numbers

# %% [markdown]
# **On a simulated GPU.** Tests of GPU code often run on machines without a GPU (this course's CI does). One kind of mistake breaks only on a GPU: a host-only call, such as `np.asarray` on an input, or a new array made without `device=` (so it lands on the default device, the CPU, while the inputs are on the GPU). A GPU library refuses both: it will not turn a device array into a NumPy array behind your back, and it will not compute with arrays on two devices. array-api-strict has a second device, `Device("device1")`, that refuses exactly these two things, so such a mistake fails on a CPU-only test machine as it would on a GPU. Its default device is not enough: strict arrays there convert to NumPy silently (through `__array__` on Python 3.11, the buffer protocol on newer Pythons), so only `device1` proves the code clean. mhattn's tests run on `device1` for that reason. The same model there gives NumPy's numbers:

# %%
with mhattn.use_backend("array_api_strict", device="device1"):
    mha_d = mhattn.MultiHeadAttention(d_, h_, dtype="float64", seed=0)
    x_d = mhattn.asarray(x_host)  # (B, T, d_model) on device1
out_d, w_d = mha_d(x_d)
print("simulated device:", type(out_d).__name__, "on", out_d.device)
assert str(out_d.device) == str(x_d.device)  # the output stays on the inputs' device
assert np.allclose(mhattn.to_numpy(out_d), out_np, rtol=1e-12, atol=1e-12)
xp = mhattn.array_namespace(x_d)
np.asarray(xp.ones(3))  # the default device converts silently ...
try:
    np.asarray(out_d)  # ... device1 refuses, as a GPU array would
except RuntimeError as err:
    print("np.asarray on a device1 array:", type(err).__name__)
else:
    raise AssertionError("device1 converted to NumPy silently")

# %% [markdown]
# One such bug, caught. A causal mask made with the inputs' library but without `device=` lands on the default device. With inputs on the default device the call works (as the same line does with torch tensors on a CPU), so a CPU-only test never sees the bug; with `device1` inputs it fails at once with a `ValueError` naming both devices, as it would with CUDA tensors. Made with `device=device_of(x)`, the mask sits beside the inputs, and the result equals `is_causal=True`:

# %%
careless = mhattn.causal_mask(T_, xp=xp)  # BUG: no device=, so on the default device
with mhattn.use_backend("array_api_strict"):  # default device: the bug goes unnoticed
    mha_c = mhattn.MultiHeadAttention(d_, h_, dtype="float64", seed=0)
    mha_c(mhattn.asarray(x_host), attn_mask=careless)
try:
    mha_d(x_d, attn_mask=careless)  # device1: caught
except ValueError as err:
    print("ValueError:", err)
    assert "CPU_DEVICE" in str(err) and "device1" in str(err)
else:
    raise AssertionError("a mask on another device was accepted")
fixed = mhattn.causal_mask(T_, xp=xp, device=device_of(x_d))  # beside the inputs
out_fixed, _ = mha_d(x_d, attn_mask=fixed)
out_causal, _ = mha_d(x_d, is_causal=True)
assert np.allclose(mhattn.to_numpy(out_fixed), mhattn.to_numpy(out_causal), rtol=1e-12, atol=1e-12)

# %% [markdown]
# ## Exercises
#
# * **Exercise 3** (`ex03_attention_forward.py`): your attention forward builds the `(B, h, T, S)` weights counted here.
# * **Exercise 6** (`ex06_mha_forward.py`): the output projection, one of the four $O(BTd^2)$ matrix products.
# * **Exercise 11** (`ex11_online_softmax.py`, with notebook 09): attention without the `(B, h, T, S)` weights.
#
# To try: run `python -m mhattn.course.scaling --dtype float64` and compare with the float32 record; then halve `d_model` (`--d-model 64`) and watch where the $T^2$ part takes over.
