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
# # 00 · Setup and backends
#
# **Learning objectives.** After this notebook you can
#
# 1. install mhattn for the course (and, where you want them, with PyTorch or, on a machine with an NVIDIA GPU, with CuPy);
# 2. say which array library does the arithmetic (NumPy, CuPy, torch or array-api-strict), and choose where new arrays go;
# 3. move arrays between libraries and devices explicitly, and read the error you get when you mix two libraries or two devices.

# %% [markdown]
# ## Installing
#
# From the repository root, in a fresh virtual environment:
#
# ```bash
# python -m pip install -e ".[course]"      # NumPy, matplotlib, JupyterLab, array-api-strict
# python -m pip install torch               # optional: mhattn on torch tensors (CPU or CUDA)
# python -m pip install -e ".[gpu]"         # optional: CuPy for CUDA 12 (for CUDA 13: ".[gpu-cuda13]")
# python -m pip install -e ".[dev]"         # everything the tests need, plus ruff
# ```
#
# Then `jupyter lab notebooks/` opens this course. The only hard dependencies are NumPy (2.0 or newer) and array-api-compat; torch and CuPy are optional and imported only when you ask for them. Without a clone, `pip install "mhattn[course]"` and `mhattn course init my-course` give you the notebooks and the exercises in `my-course/`.
#
# Every term the course uses (nats, ablation, head mask, pre-LN, ...) is defined in the glossary: `docs/glossary.md` in the repository, `glossary.md` in a folder made by `mhattn course init`.

# %%
import os
import subprocess
import sys

import array_api_strict
import numpy as np

import mhattn

print("mhattn", mhattn.__version__)
print("current backend:", mhattn.get_backend(), " device:", mhattn.get_device())
print("its array module:", mhattn.backend.current_array_module().__name__)
assert mhattn.get_backend() == "numpy" and mhattn.backend.current_array_module() is np  # the default

# %% [markdown]
# ## Two rules decide where the arithmetic runs
#
# 1. **Ops follow their inputs.** Every function in `mhattn.functional` asks its arrays for their *namespace*, the module whose functions work on them: `xp = mhattn.array_namespace(x, W)` (the name scikit-learn and SciPy use; CuPy's CPU/GPU-agnostic pattern calls it `get_array_module`). This is the **Python array API standard** of the data-apis.org consortium: one set of function names (`xp.matmul`, `xp.sum`, `xp.concat`, `x.mT`, ...) that NumPy 2, CuPy, PyTorch and others all answer to, through the `array-api-compat` package where a library differs. NumPy arrays in, NumPy itself does the arithmetic; torch tensors in, torch does it; CuPy arrays in, the GPU does. New arrays an op makes go on its inputs' device.
# 2. **The backend only decides where new arrays go**: the parameters of a new `MultiHeadAttention`, and whatever `mhattn.asarray` makes. Choose it with `mhattn.set_backend(name, device=None)`, the context manager `mhattn.use_backend(name, device=None)`, or the environment variable `MHATTN_BACKEND` (read once, at import). The names are `"numpy"` (the default), `"torch"` (`device="cpu"` or `"cuda"`), `"cupy"` and `"array_api_strict"`.

# %%
x = mhattn.asarray(np.ones((2, 3, 8), dtype=np.float32))  # (B, T, d_model) on the current backend
print("x lives in:", mhattn.array_namespace(x).__name__)
assert mhattn.array_namespace(x).__name__ == "numpy"  # new arrays go to the current backend: NumPy here

mha = mhattn.MultiHeadAttention(d_model=8, num_heads=2, seed=0)
out, weights = mha(x)
print("out:", type(out).__module__, out.shape, out.dtype)
print("weights (averaged over heads):", weights.shape)

# %% [markdown]
# The environment variable is read when mhattn is imported, so it is set before Python starts (here for one child process; in a shell, `MHATTN_BACKEND=array_api_strict python ...`):

# %%
env = {**os.environ, "MHATTN_BACKEND": "array_api_strict"}
child = "import mhattn; print(mhattn.get_backend())"
chosen = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, check=True).stdout.strip()
print("a Python started with MHATTN_BACKEND=array_api_strict has backend", repr(chosen))
assert chosen == "array_api_strict"

# %% [markdown]
# ## A simulated GPU on every machine
#
# `array_api_strict` is a deliberately minimal library: it has the standard's functions and nothing else. Its second device, `"device1"`, behaves the way a GPU does for the mistakes that matter: an array there cannot be turned into a NumPy array behind your back, and it cannot be mixed with an array on another device. The same `MultiHeadAttention` built under `use_backend("array_api_strict", device="device1")` runs every op there, and gives NumPy's numbers (checked to float32 rounding):

# %%
with mhattn.use_backend("array_api_strict", device="device1"):
    print("inside the block:", mhattn.get_backend(), mhattn.get_device())
    mha1 = mhattn.MultiHeadAttention(d_model=8, num_heads=2, seed=0)  # same seed: the same weights, on device1
    x1 = mhattn.asarray(np.ones((2, 3, 8), dtype=np.float32))
    out1, _ = mha1(x1)
print("out1:", type(out1).__name__, "on", out1.device)
print("backend after the block:", mhattn.get_backend())
assert str(out1.device) == str(x1.device) == str(mha1.params["W_q"].device)  # the output stays on the inputs' device
assert mhattn.get_backend() == "numpy"  # use_backend restores the previous backend
assert np.allclose(mhattn.to_numpy(out1), out, rtol=1e-6, atol=1e-6)

# %% [markdown]
# ## torch tensors, and a GPU if there is one
#
# The same model on torch tensors: on the GPU when torch sees CUDA, else on the CPU. The output of the next cells depends on the machine (is torch installed? is there a GPU?), so the test run (nbval) ignores it; the checks inside hold on every machine where they run.

# %%
# NBVAL_IGNORE_OUTPUT
try:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    with mhattn.use_backend("torch", device=device):
        mha_t = mhattn.MultiHeadAttention(d_model=8, num_heads=2, seed=0)
        out_t, _ = mha_t(mhattn.asarray(np.ones((2, 3, 8), dtype=np.float32)))
    print("out_t:", type(out_t).__name__, out_t.dtype, "on", out_t.device)
    assert out_t.device.type == device and np.allclose(mhattn.to_numpy(out_t), out, rtol=1e-5, atol=1e-5)
except ImportError:
    print("torch is not installed here: pip install torch to run mhattn on torch tensors")

# %% [markdown]
# `set_backend("cupy")` raises an `ImportError` when CuPy is not installed and a `RuntimeError` when it is installed but finds no CUDA device:

# %%
# NBVAL_IGNORE_OUTPUT
try:
    with mhattn.use_backend("cupy"):
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        print("CuPy works here, on", name)
except (ImportError, RuntimeError) as err:
    print(f"no CuPy backend on this machine ({type(err).__name__}); everything runs on NumPy")
print("backend after the block:", mhattn.get_backend())
assert mhattn.get_backend() == "numpy"

# %% [markdown]
# ## Moving arrays, and what happens when you mix them
#
# Transfers are explicit: `mhattn.asarray(a)` puts `a` on the current backend and device, `mhattn.to_numpy(a)` brings an array of any library back to the host (by the library's own transfer, never by `np.asarray`, which a GPU array refuses, and so does `device1`):

# %%
host = mhattn.to_numpy(out1)
print(type(host).__name__, host.shape)
assert type(host) is np.ndarray
try:
    np.asarray(out1)  # an implicit conversion: refused, as a GPU array would refuse it
except RuntimeError as err:
    print("np.asarray on a device1 array is refused:", type(err).__name__)
else:
    raise AssertionError("device1 converted to NumPy silently")

# %% [markdown]
# Mixing two libraries in one call raises a `TypeError` naming both; two devices of one library raise a `ValueError` naming both. Either way nothing is copied silently: the message says how to move the arrays. A misspelt backend name is refused too:

# %%
errors = {}
for label, call in [
    ("NumPy input, device1 weights", lambda: mha1(np.ones((2, 3, 8), dtype=np.float32))),
    ("default-device input, device1 weights", lambda: mha1(array_api_strict.ones((2, 3, 8)))),
    ("misspelt backend", lambda: mhattn.set_backend("tpu")),
]:
    try:
        call()
    except (TypeError, ValueError) as err:
        errors[label] = err
        print(f"{label}: {type(err).__name__}: {err}")
assert isinstance(errors["NumPy input, device1 weights"], TypeError) and "numpy" in str(errors["NumPy input, device1 weights"])
assert type(errors["default-device input, device1 weights"]) is ValueError
assert all(d in str(errors["default-device input, device1 weights"]) for d in ("CPU_DEVICE", "device1"))
assert type(errors["misspelt backend"]) is ValueError and mhattn.get_backend() == "numpy"

# %% [markdown]
# ## Exercises, and where next
#
# * Notebook **01** walks one sentence through `MultiHeadAttention(512, 8)`, printing every shape; notebook **08** runs one model on NumPy, torch and the simulated device side by side, and shows a GPU bug the simulated device catches.
# * The graded exercises are in `exercises/` (read `exercises/README.md` first; exercise 1 is `exercises/ex01_split_heads.py`). This notebook has no exercise of its own; check your setup by running the visible tests of exercise 1, which fail with `NotImplementedError` until you write it:
#
# ```bash
# python -m pytest exercises/test_visible.py -m ex01   # the visible tests of one exercise
# mhattn grade                                         # points for every exercise, hidden tests included
# ```
#
# Installed from a wheel, without the repository? `mhattn course init my-course` copies the notebooks and exercises into `my-course/`.
