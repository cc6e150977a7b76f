"""mhattn: multi-head attention built by hand in NumPy (or CuPy), with manual backprop.

Vaswani et al. 2017, "Attention Is All You Need", §3.2.
"""

from mhattn.backend import asarray, get_array_module, get_backend, set_backend, to_numpy, use_backend
from mhattn.functional.masks import causal_mask
from mhattn.nn.attention import MultiHeadAttention

__version__ = "0.1.0"

__all__ = [
    "MultiHeadAttention",
    "asarray",
    "causal_mask",
    "get_array_module",
    "get_backend",
    "set_backend",
    "to_numpy",
    "use_backend",
]
