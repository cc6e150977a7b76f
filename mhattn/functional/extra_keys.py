"""Step 1b (numbered as in :mod:`~mhattn.functional.mha`): extra key positions, torch's ``add_bias_kv`` and
``add_zero_attn``.

Neither is in Vaswani et al. 2017. ``add_bias_kv`` (torch's ``bias_k``/``bias_v``, from fairseq) appends one
learned key and one learned value to every sequence after the projections, so each query always has a position
to attend to; ``add_zero_attn`` then appends one key and one value of zeros (score 0 for every query: a "no-op"
position that soaks up weight). Both come *after* the S given keys, in that order, and every mask gets an allowed
column for each (torch pads ``attn_mask`` and ``key_padding_mask`` with zeros the same way)::

    keys:  k_0 ... k_{S-1} | bias_k | 0        S -> S + add_bias_kv + add_zero_attn
    mask:  given columns   |   .    | .        (allowed)

Backward: the bias row was used by every batch element, so ``∂L/∂bias_k = Σ_b ∂L/∂K[b, S]``; the zero row is a
constant, so its gradient is dropped; the first S rows go back to the projections unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, device_of


class ExtraKeysCache(NamedTuple):
    S: int  # the number of given key positions (the rows that go back to the projections)
    bias: bool  # whether a learned bias_k/bias_v row was appended at position S
    zero: bool  # whether a zero row was appended after it


def extra_keys_forward(K, V, bias_k=None, bias_v=None, add_zero_attn=False):
    """Append ``bias_k``/``bias_v`` (when given) and then a zero position (``add_zero_attn``) to every sequence.

    Args:
        K: ``(B, S, d_model)`` projected keys; V: ``(B, S, d_model)`` projected values; one dtype, library, device.
        bias_k, bias_v: ``(d_model,)`` each, both or neither (torch's ``(1, 1, d_model)`` parameters, flattened).
        add_zero_attn: append a zero key and a zero value last.

    Returns:
        ``((K', V'), cache)``: ``(B, S + n, d_model)`` each, n = number of rows appended (0, 1 or 2); with n = 0
        the inputs themselves.
    """
    S, bias = K.shape[1], bias_k is not None
    if not bias and not add_zero_attn:
        return (K, V), ExtraKeysCache(S, False, False)
    xp = array_namespace(K, V)
    B, d = K.shape[0], K.shape[2]
    rows_k, rows_v = [K], [V]
    if bias:
        rows_k.append(xp.broadcast_to(xp.reshape(bias_k, (1, 1, d)), (B, 1, d)))  # (B, 1, d_model)
        rows_v.append(xp.broadcast_to(xp.reshape(bias_v, (1, 1, d)), (B, 1, d)))  # (B, 1, d_model)
    if add_zero_attn:
        zeros = xp.zeros((B, 1, d), dtype=K.dtype, device=device_of(K))  # (B, 1, d_model)
        rows_k.append(zeros)
        rows_v.append(zeros)
    return (xp.concat(rows_k, axis=1), xp.concat(rows_v, axis=1)), ExtraKeysCache(S, bias, add_zero_attn)


def extra_keys_backward(dK, dV, cache: ExtraKeysCache):
    """Gradients of :func:`extra_keys_forward`: ``(dK, dV, dbias_k, dbias_v)``, the first two ``(B, S, d_model)``,
    the biases' ``(d_model,)`` (``None`` without them)."""
    S, bias, zero = cache
    if not bias and not zero:
        return dK, dV, None, None
    xp = array_namespace(dK, dV)
    dbias_k = xp.sum(dK[:, S, :], axis=0) if bias else None  # (d_model,): the row every batch element used
    dbias_v = xp.sum(dV[:, S, :], axis=0) if bias else None
    return dK[:, :S, :], dV[:, :S, :], dbias_k, dbias_v  # the zero row's gradient is dropped: it is a constant


def pad_mask(mask, S: int, n: int):
    """``mask`` (broadcastable to ``(B, h, T, S)``) with ``n`` allowed key columns appended: ``(..., S + n)``.

    Bool masks get False, float masks 0 (as torch pads ``attn_mask`` and ``key_padding_mask``). ``None`` stays.
    """
    if mask is None or n == 0:
        return mask
    xp = array_namespace(mask)
    lead = tuple(mask.shape[:-1])
    mask = xp.broadcast_to(mask, (*lead, S))  # a last dimension of 1 stretched to S first
    return xp.concat([mask, xp.zeros((*lead, n), dtype=mask.dtype, device=device_of(mask))], axis=-1)
