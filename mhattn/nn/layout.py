"""The layouts torch's ``MultiheadAttention`` takes, turned into mhattn's one layout ``(B, L, E)`` and back.

The functional steps are batch first and batched. torch also takes unbatched ``(L, E)`` inputs and, with
``batch_first=False`` (its default), sequence-first ``(L, B, E)`` ones. :class:`Layout` remembers which came in, so
the module's output and its backward's input gradients leave in that layout, and ``dout`` comes back through it:
a transpose is its own inverse, an added axis is dropped again. Nothing is copied on NumPy (views).
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, is_array


class Layout(NamedTuple):
    unbatched: bool  # the caller passed (L, E): a batch of one was added in front
    seq_first: bool  # the caller passed (L, B, E) (batch_first=False): batch and length were swapped

    def to_batch_first(self, x):
        """A caller's array ``(L, E)`` or ``(L, B, E)`` as ``(B, L, E)``; ``None`` stays ``None``."""
        if x is None or not (self.unbatched or self.seq_first):
            return x  # batch first already: nothing to do, nothing to look up (the course's every call)
        xp = array_namespace(x)
        if self.unbatched:
            return xp.expand_dims(x, axis=0)  # (1, L, E)
        return xp.permute_dims(x, (1, 0, 2))  # (B, L, E)

    def from_batch_first(self, x):
        """``(B, L, E)`` back in the caller's layout (the inverse of :meth:`to_batch_first`)."""
        if x is None or not (self.unbatched or self.seq_first):
            return x
        if self.unbatched:
            return x[0, ...]  # (L, E)
        return array_namespace(x).permute_dims(x, (1, 0, 2))  # (L, B, E)

    def weights(self, w):
        """The weights ``(B, [h,] T, S)`` as torch returns them: batch first in both batched layouts, no batch
        axis when unbatched."""
        return w if w is None or not self.unbatched else w[0, ...]


def layout_of(query, key, value, key_padding_mask, batch_first: bool) -> Layout:
    """The layout of one call, from ``query``'s rank; the other arrays must agree with it.

    Raises:
        ValueError: ``query`` is neither 2-D nor 3-D; an unbatched query with a batched key or value, or with a
            ``key_padding_mask`` that is not ``(S,)``; a batched query with an unbatched key or value.
    """
    if not is_array(query) or (key is not None and not is_array(key)) or (value is not None and not is_array(value)):
        return BATCH_FIRST  # not an array mhattn takes: the steps' checks say so (TypeError)
    ndim = query.ndim
    if ndim not in (2, 3):
        shape = tuple(query.shape)
        raise ValueError(f"query must be 3-D ({'B, T' if batch_first else 'T, B'}, E) or unbatched 2-D (T, E), got shape {shape}")
    for name, x in (("key", key), ("value", value)):
        if x is not None and getattr(x, "ndim", ndim) != ndim:
            raise ValueError(f"query is {ndim}-D but {name} has shape {tuple(x.shape)}: give all three batched or all unbatched")
    if ndim == 2 and key_padding_mask is not None and getattr(key_padding_mask, "ndim", 1) != 1:
        raise ValueError(f"unbatched inputs take a key_padding_mask of shape (S,), got {tuple(key_padding_mask.shape)}")
    return Layout(unbatched=ndim == 2, seq_first=ndim == 3 and not batch_first)


BATCH_FIRST = Layout(unbatched=False, seq_first=False)


def batch_first_call(query, key, value, key_padding_mask, batch_first: bool):
    """``(layout, query, key, value, key_padding_mask)`` of one call, the arrays batch first; ``key=None`` gives
    ``key = query`` and ``value=None`` ``value = key`` (one array each, so self-attention stays recognisable).
    Raises as :func:`layout_of`."""
    three = getattr(query, "ndim", 3) == 3 and getattr(key, "ndim", 3) == 3 and getattr(value, "ndim", 3) == 3
    if batch_first and three:  # the course's every call
        key = query if key is None else key
        return BATCH_FIRST, query, key, key if value is None else value, key_padding_mask
    layout = layout_of(query, key, value, key_padding_mask, batch_first)
    self_attention, same_kv = key is None or key is query, value is None or value is key
    query = layout.to_batch_first(query)
    key = query if self_attention else layout.to_batch_first(key)
    value = key if same_kv else layout.to_batch_first(value)
    key_padding_mask = layout.to_batch_first(key_padding_mask) if layout.unbatched else key_padding_mask
    return layout, query, key, value, key_padding_mask
