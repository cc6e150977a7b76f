"""Stateful layers: parameters, gradients and the last cache around the functional ops."""

from mhattn.nn.attention import MultiHeadAttention

__all__ = ["MultiHeadAttention"]
