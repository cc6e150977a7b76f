"""Stateful modules: parameters, gradients and the last cache around the functional ops.

``MultiHeadAttention`` and ``TransformerModel`` (with its ``ModelConfig``); each layer's
initialiser is in :mod:`mhattn.nn.init`, torch state-dict I/O in :mod:`mhattn.nn.torch_io`, and
:mod:`mhattn.nn.device` puts data and loaded values where the parameters live (any array-API backend).
"""

from mhattn.nn.attention import MultiHeadAttention
from mhattn.nn.transformer import ModelConfig, TransformerModel

__all__ = ["ModelConfig", "MultiHeadAttention", "TransformerModel"]
