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
# # 00 · Setup and backends
#
# **Learning objectives.** After this notebook you can
#
# 1. install mhattn for the course (and, on a machine with an NVIDIA GPU, with CuPy);
# 2. say which array library, NumPy or CuPy, does the arithmetic, and switch between them;
# 3. move arrays between host and GPU explicitly, and read the error you get when you mix them.

# %% [markdown]
# ## Installing
#
# From the repository root, in a fresh virtual environment:
#
# ```bash
# python -m pip install -e ".[course]"      # NumPy, matplotlib, JupyterLab
# python -m pip install -e ".[gpu]"         # adds CuPy for CUDA 12 (for CUDA 13: ".[gpu-cuda13]")
# python -m pip install -e ".[dev]"         # everything the tests need, plus ruff
# ```
#
# Then `jupyter lab notebooks/` opens this course. The only hard dependency is NumPy; CuPy is optional and is imported only when you ask for it. Without a clone, `pip install "mhattn[course]"` and `mhattn course init my-course` give you the notebooks and the exercises in `my-course/`.
#
# Every term the course uses (nats, ablation, head mask, pre-LN, ...) is defined in the glossary: `docs/glossary.md` in the repository, `glossary.md` in a folder made by `mhattn course init`.

# %%
import numpy as np

import mhattn

print("mhattn", mhattn.__version__)
print("current backend:", mhattn.get_backend())
print("its array module:", mhattn.backend.current_array_module().__name__)

# %% [markdown]
# ## Two rules decide where the arithmetic runs
#
# 1. **Ops follow their inputs.** Every function in `mhattn.functional` asks its arrays which library they belong to (`get_array_module`, CuPy's CPU/GPU-agnostic pattern). NumPy arrays in, NumPy arithmetic; CuPy arrays in, GPU kernels.
# 2. **The backend only decides where new arrays go**: the parameters of a new `MultiHeadAttention`, and whatever `mhattn.asarray` makes. Choose it with `mhattn.set_backend("cupy")`, the context manager `mhattn.use_backend(...)`, or the environment variable `MHATTN_BACKEND=cupy` (read once, at import).

# %%
x = mhattn.asarray(np.ones((2, 3, 8), dtype=np.float32))  # (B, T, d_model) on the current backend
print("x lives in:", mhattn.get_array_module(x).__name__)
assert mhattn.get_array_module(x).__name__ == mhattn.get_backend()  # new arrays go to the current backend

mha = mhattn.MultiHeadAttention(d_model=8, num_heads=2, seed=0)
out, weights = mha(x)
print("out:", type(out).__module__, out.shape, out.dtype)
print("weights (averaged over heads):", weights.shape)

# %% [markdown]
# ## Is there a GPU here?
#
# `set_backend("cupy")` raises an `ImportError` when CuPy is not installed and a `RuntimeError` when it is installed but finds no CUDA device. The output of the next cell depends on the machine, so the test run (nbval) ignores it.

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

# %% [markdown]
# ## Moving arrays, and what happens when you mix them
#
# Transfers are explicit: `mhattn.asarray(a)` puts `a` on the current backend, `mhattn.to_numpy(a)` brings it back to the host. Mixing a NumPy and a CuPy array in one call raises a `TypeError` that says how to fix it, instead of a silent copy. A misspelt backend name is refused too:

# %%
host = mhattn.to_numpy(out)
print(type(host).__name__, host.shape)
try:
    mhattn.set_backend("tpu")
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# ## Exercises, and where next
#
# * Notebook **01** walks one sentence through `MultiHeadAttention(512, 8)`, printing every shape.
# * The graded exercises are in `exercises/` (read `exercises/README.md` first; exercise 1 is `exercises/ex01_split_heads.py`). This notebook has no exercise of its own; check your setup by running the visible tests of exercise 1, which fail with `NotImplementedError` until you write it:
#
# ```bash
# python -m pytest exercises/test_visible.py -m ex01   # the visible tests of one exercise
# mhattn grade                                         # points for every exercise, hidden tests included
# ```
#
# Installed from a wheel, without the repository? `mhattn course init my-course` copies the notebooks and exercises into `my-course/`.
