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
    static: tuple[bool, bool] = (False, False)  # whether static_k, static_v replaced the projected K, V
    num_heads: int = 1  # h, to give a static array's gradient its (B*h, S, d_k) shape


def check_static_kv(static_k, static_v, bias_k, B, h, S, d_k, dtype):
    """``static_k``/``static_v`` must be ``(B*h, S, d_k)`` of the parameters' dtype, and without ``bias_k``.

    Raises:
        TypeError: not a float array of ``dtype``. ValueError: another shape; given with ``bias_k`` (torch: "bias
        cannot be added to static key").
    """
    from mhattn.functional.validate import check_float_array  # validate imports nothing of this step

    for name, a in (("static_k", static_k), ("static_v", static_v)):
        if a is None:
            continue
        check_float_array(name, a, dtype)
        if tuple(a.shape) != (B * h, S, d_k):
            raise ValueError(f"{name} has shape {tuple(a.shape)}; expected (B*h, S, d_k)=({B * h}, {S}, {d_k})")
    if bias_k is not None and (static_k is not None or static_v is not None):
        raise ValueError("bias_k/bias_v (add_bias_kv) cannot be added to static_k/static_v, as in torch")


def _merged(a, B):
    """torch's per-head ``(B*h, S, d_k)`` as mhattn's ``(B, S, d_model)`` (head i in columns i*d_k:(i+1)*d_k)."""
    xp = array_namespace(a)
    h, S, d_k = a.shape[0] // B, a.shape[1], a.shape[2]
    return xp.reshape(xp.permute_dims(xp.reshape(a, (B, h, S, d_k)), (0, 2, 1, 3)), (B, S, h * d_k))  # (B, S, d_model)


def _per_head(a, h):
    """The inverse of :func:`_merged`: ``(B, S, d_model)`` -> ``(B*h, S, d_k)``."""
    xp = array_namespace(a)
    B, S, d = a.shape
    return xp.reshape(xp.permute_dims(xp.reshape(a, (B, S, h, d // h)), (0, 2, 1, 3)), (B * h, S, d // h))


def extra_keys_forward(K, V, bias_k=None, bias_v=None, add_zero_attn=False, static_k=None, static_v=None, num_heads=1):
    """Replace K, V by ``static_k``/``static_v`` (when given), then append ``bias_k``/``bias_v`` (when given) and a
    zero position (``add_zero_attn``) to every sequence.

    Args:
        K: ``(B, S, d_model)`` projected keys; V: ``(B, S, d_model)`` projected values; one dtype, library, device.
        bias_k, bias_v: ``(d_model,)`` each, both or neither (torch's ``(1, 1, d_model)`` parameters, flattened).
        add_zero_attn: append a zero key and a zero value last.
        static_k, static_v: ``(B*h, S, d_k)`` keys/values per head used instead of the projected ones (torch's
            ``multi_head_attention_forward``'s ``static_k``/``static_v``, e.g. cached from an earlier step).
        num_heads: h (used by the static arrays' gradients).

    Returns:
        ``((K', V'), cache)``: ``(B, S + n, d_model)`` each, n = number of rows appended (0, 1 or 2); with n = 0
        and no static array, the inputs themselves.
    """
    static = (static_k is not None, static_v is not None)
    K = _merged(static_k, K.shape[0]) if static[0] else K  # (B, S, d_model)
    V = _merged(static_v, V.shape[0]) if static[1] else V  # (B, S, d_model)
    S, bias = K.shape[1], bias_k is not None
    if not bias and not add_zero_attn:
        return (K, V), ExtraKeysCache(S, False, False, static, num_heads)
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
    return (xp.concat(rows_k, axis=1), xp.concat(rows_v, axis=1)), ExtraKeysCache(S, bias, add_zero_attn, static, num_heads)


def extra_keys_backward(dK, dV, cache: ExtraKeysCache):
    """Gradients of :func:`extra_keys_forward`: ``(dK, dV, extra)``: ``dK``, ``dV`` ``(B, S, d_model)`` for the
    projections (zeros where a static array replaced them), ``extra`` a dict with ``bias_k``, ``bias_v``
    ``(d_model,)`` and ``static_k``, ``static_v`` ``(B*h, S, d_k)`` for those the forward took."""
    S, bias, zero, static, h = cache
    extra = {}
    if bias or zero:
        xp = array_namespace(dK, dV)
        if bias:  # (d_model,): the row every batch element used
            extra.update(bias_k=xp.sum(dK[:, S, :], axis=0), bias_v=xp.sum(dV[:, S, :], axis=0))
        dK, dV = dK[:, :S, :], dV[:, :S, :]  # the zero row's gradient is dropped: it is a constant
    return (*_unstatic(dK, dV, static, h, extra), extra)


def _unstatic(dK, dV, static, h, extra):
    """``(dK, dV)`` for the projections: a replaced one's gradient goes to its static array (in ``extra``), and the
    projection it replaced gets zeros (it reached no output)."""
    if not any(static):
        return dK, dV
    xp = array_namespace(dK)
    out = []
    for name, d, used in (("static_k", dK, static[0]), ("static_v", dV, static[1])):
        if used:
            extra[name] = _per_head(d, h)
            d = xp.zeros_like(d)
        out.append(d)
    return tuple(out)


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
