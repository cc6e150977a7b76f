"""The textbook steps of multi-head attention as pure forward/backward pairs.

Every ``*_forward`` returns ``(out, cache)`` (attention: ``(out, weights, cache)``);
every ``*_backward(dout, cache)`` returns the gradients of the forward's differentiable array
inputs, in order: the floats that carry data (queries, keys, values, weights, a head mask ξ). Masks are constants,
as in torch's ``scaled_dot_product_attention`` (whose additive float mask gets no gradient either,
pytorch/pytorch#148476): ``attn_mask``, ``key_padding_mask`` and a float mask of any kind are inputs without a
gradient, an integer ``ids`` or ``targets`` array likewise; ``dropout``'s generator is no array.
Arrays may be any array-API array (NumPy, CuPy, torch, array-api-strict):
each op takes its namespace from its inputs (:func:`mhattn.backend.array_namespace`), makes new
arrays on their device and returns arrays of that namespace and device.

No forward hands back an array its cache holds: outputs are fresh arrays, except the
softmax probabilities, the attention weights and ``dropout_forward(x, 0)``, which are
read-only views on NumPy and copies elsewhere (no read-only flag there). Each public
forward checks its inputs once; the inner steps it calls assume checked inputs.
"""

from mhattn.functional.attention import (
    attention_scale_gradient,
    scaled_dot_product_attention_backward,
    scaled_dot_product_attention_forward,
)
from mhattn.functional.extra_keys import extra_keys_backward, extra_keys_forward
from mhattn.functional.linear import linear_backward, linear_forward
from mhattn.functional.masks import causal_mask, merge_masks
from mhattn.functional.mha import PARAM_NAMES, multi_head_attention_backward, multi_head_attention_forward
from mhattn.functional.softmax import softmax_backward, softmax_forward
from mhattn.functional.split_heads import combine_heads_backward, combine_heads_forward, split_heads_backward, split_heads_forward

__all__ = [
    "PARAM_NAMES",
    "attention_scale_gradient",
    "causal_mask",
    "combine_heads_backward",
    "combine_heads_forward",
    "extra_keys_backward",
    "extra_keys_forward",
    "linear_backward",
    "linear_forward",
    "merge_masks",
    "multi_head_attention_backward",
    "multi_head_attention_forward",
    "scaled_dot_product_attention_backward",
    "scaled_dot_product_attention_forward",
    "softmax_backward",
    "softmax_forward",
    "split_heads_backward",
    "split_heads_forward",
]
