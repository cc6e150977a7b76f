"""mhattn: multi-head attention built by hand in NumPy, with manual backprop.

Vaswani et al. 2017, "Attention Is All You Need", §3.2. The same code runs on any array library of the
Python array API standard (CuPy, torch, array-api-strict): ops take their namespace from their inputs,
and ``set_backend``/``use_backend`` choose where new parameters and data go.
"""

from mhattn.backend import (
    array_namespace,
    asarray,
    get_backend,
    get_device,
    set_backend,
    to_numpy,
    use_backend,
)
from mhattn.functional.masks import causal_mask
from mhattn.nn.attention import MultiHeadAttention

__version__ = "0.1.0"  # the one place: pyproject.toml reads it (tool.setuptools.dynamic)

__all__ = [
    "MultiHeadAttention",
    "array_namespace",
    "asarray",
    "causal_mask",
    "get_backend",
    "get_device",
    "set_backend",
    "to_numpy",
    "use_backend",
]
