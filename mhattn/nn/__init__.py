"""Stateful layers: parameters, gradients and the last cache around the functional ops."""

from mhattn.nn.attention import MultiHeadAttention
from mhattn.nn.layers import Embedding, EncoderBlock, FeedForward, LayerNorm
from mhattn.nn.transformer import ModelConfig, TransformerModel

__all__ = ["Embedding", "EncoderBlock", "FeedForward", "LayerNorm", "ModelConfig", "MultiHeadAttention", "TransformerModel"]
