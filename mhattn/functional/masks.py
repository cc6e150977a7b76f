"""Masks in torch's convention, and the checks that make them fit.

``attn_mask``: bool (True = not allowed) or float (added to the scores), shape
``(T, S)``, torch's ``(B*h, T, S)``, ``(1, T, S)``, or a 4-D shape broadcastable to
``(B, h, T, S)`` (other 3-D shapes are refused: ``(h, T, S)`` and ``(B, T, S)`` look alike).
``key_padding_mask``: ``(B, S)``, bool True = padding, or float (added). See :mod:`mhattn.functional.attention` for a picture.

Float masks are combined and cast without overflow: a sum or a cast that leaves the
dtype's finite range becomes ``-inf`` (or ``+inf``) explicitly, as IEEE overflow would,
but without the ``RuntimeWarning`` ("overflow in add", "overflow in cast").
"""

from __future__ import annotations

from mhattn.backend import (
    array_namespace,
    broadcast_shape,
    broadcasts_to,
    current_array_module,
    device_of,
    get_device,
    is_array,
)
from mhattn.functional.validate import ARRAY_KINDS


def causal_mask(T: int, S: int | None = None, xp=None, *, device=None, lower_right: bool = False):
    """Bool ``(T, S)`` mask, True above the diagonal: query t may see keys 0..t only.

    With ``lower_right`` the diagonal ends in the last key instead (torch's ``causal_lower_right``): query t
    may see keys 0..t + S - T, so the last query sees every key (a query with t + S - T < 0 sees none).
    For T = S the two are the same mask.

    Args:
        T: number of queries; S: number of keys (default ``T``).
        lower_right: align the diagonal at the bottom-right corner rather than the top-left.
        xp: array namespace for the result (default: the current backend's).
        device: where the result lives (default: the current backend's device when ``xp`` is not given
            or is the current backend's namespace, else ``xp``'s default device).

    Raises:
        ValueError: ``T`` or ``S`` is not a positive integer.
    """
    S = T if S is None else S
    for name, n in (("T", T), ("S", S)):
        if isinstance(n, bool) or not hasattr(n, "__index__") or n < 1:
            raise ValueError(f"causal_mask: {name} must be a positive int, got {n!r}")
    T, S = int(T), int(S)
    current = current_array_module()
    xp = xp or current
    if device is None and xp is current:
        device = get_device()
    return xp.triu(xp.ones((T, S), dtype=xp.bool, device=device), k=1 + (S - T if lower_right else 0))  # (T, S)


def check_mask_kind(name, m):
    """``m`` must be a bool or real floating array (NumPy, CuPy, torch, array-api-strict) without NaN or +inf.

    Raises:
        TypeError: not an array, or neither bool nor real floating.
        ValueError: a float mask holding NaN or +inf (it would turn weights into NaN).
    """
    if not is_array(m):
        raise TypeError(f"{name} must be {ARRAY_KINDS}, got {type(m).__name__}")
    xp = array_namespace(m)
    if m.dtype != xp.bool and not xp.isdtype(m.dtype, "real floating"):
        raise TypeError(f"{name} must be bool (True = not allowed) or float (added), got dtype {m.dtype}")
    if m.dtype != xp.bool and bool(xp.any(xp.isnan(m) | (m == xp.inf))):
        raise ValueError(f"{name} holds NaN or +inf; use -inf (or a bool mask) for positions that are not allowed")


def cast_mask(m, dtype):
    """Float mask ``m`` in ``dtype``; entries beyond ``dtype``'s finite range become ``∓inf`` (no overflow warning).

    A bool mask becomes ``-inf`` where True and 0 elsewhere. Namespace and device are ``m``'s.
    """
    xp = array_namespace(m)
    if m.dtype == xp.bool:
        return xp.where(m, -xp.inf, xp.zeros(m.shape, dtype=dtype, device=device_of(m)))
    fi = xp.finfo(dtype)
    if xp.finfo(m.dtype).bits <= fi.bits:
        return xp.astype(m, dtype, copy=False)
    lo, hi = float(fi.min), float(fi.max)  # Python floats: no NumPy scalar meets a device array
    inside = xp.astype(xp.clip(m, lo, hi), dtype)  # in range: the cast cannot overflow
    return xp.where(m < lo, -xp.inf, xp.where(m > hi, xp.inf, inside))


def add_mask(scores, mask):
    """``scores + mask`` without overflow; returns the sum, a fresh array.

    Where the exact sum leaves the finite range of ``scores.dtype`` (two ``finfo.min``
    entries, say) the result is ``-inf`` (``+inf``), as IEEE overflow gives, but no
    "overflow in add" is raised: the bounds ``finfo.min - min(mask, 0)`` and
    ``finfo.max - max(mask, 0)`` cannot themselves overflow, and the scores are clamped
    to them before the add. ``mask`` must broadcast to ``scores`` and share its dtype.
    """
    xp = array_namespace(scores, mask)
    fi = xp.finfo(scores.dtype)
    low, high = float(fi.min) - xp.minimum(mask, 0.0), float(fi.max) - xp.maximum(mask, 0.0)  # mask-shaped bounds
    low = xp.where(mask == -xp.inf, -xp.inf, low)  # a -inf entry gives -inf by itself: no bound, no flag
    below, above = scores < low, scores > high  # where the sum would leave the range (rarely anywhere)
    total = xp.minimum(xp.maximum(scores, low), high) + mask  # in range now
    return xp.where(below, -xp.inf, xp.where(above, xp.inf, total))


def dead_keys(mask):
    """Bool ``(..., S)``: the keys that ``mask`` (broadcastable to ``(..., T, S)``) hides from every query.

    Bool entries True and float entries ``-inf`` count as hidden.
    """
    xp = array_namespace(mask)
    hidden = mask if mask.dtype == xp.bool else mask == -xp.inf  # (..., T, S)
    return hidden if hidden.ndim < 2 else xp.all(hidden, axis=-2)  # (..., S)


def merge_masks(attn_mask, key_padding_mask, B: int, h: int, T: int, S: int, dtype):
    """One mask broadcastable to ``(B, h, T, S)`` from ``attn_mask`` and ``key_padding_mask``.

    Two bool masks are OR-ed (stays bool: masked scores are replaced). If either
    is float, the result is float: bool entries become ``-inf`` (weight exactly 0),
    and the sum is taken without overflow (:func:`add_mask`).

    Returns:
        ``None``, or a bool/``dtype`` array broadcastable to ``(B, h, T, S)``, of the masks' namespace and device.

    Raises:
        TypeError: a mask is not an array, or neither bool nor float; the masks are of two libraries.
        ValueError: a mask's shape does not fit ``(B, h, T, S)`` / ``(B, S)`` (a 1-D ``attn_mask`` is refused, as
            torch refuses it, rather than broadcast over the queries), a float mask holds NaN or +inf,
            or the masks are on two devices.
    """
    masks = []
    if attn_mask is not None:
        check_mask_kind("attn_mask", attn_mask)
        if attn_mask.ndim < 2:  # torch's MultiheadAttention takes 2-D and 3-D masks only; (S,) would broadcast silently
            raise ValueError(
                f"attn_mask must be 2-D (T, S)=({T}, {S}), 3-D or 4-D, got a {attn_mask.ndim}-D mask of shape "
                f"{tuple(attn_mask.shape)}; to hide keys from every query use key_padding_mask (B, S)=({B}, {S})"
            )
        if attn_mask.ndim == 3 and attn_mask.shape == (B * h, T, S):
            attn_mask = array_namespace(attn_mask).reshape(attn_mask, (B, h, T, S))  # torch's (B*h, T, S) layout
        three_d_ambiguous = attn_mask.ndim == 3 and attn_mask.shape[0] != 1  # (h, T, S) or (B, T, S)? refuse, as torch does
        if three_d_ambiguous or not broadcasts_to(attn_mask.shape, (B, h, T, S)):
            raise ValueError(
                f"attn_mask has shape {tuple(attn_mask.shape)}; expected (T, S)=({T}, {S}), "
                f"(B*h, T, S)=({B * h}, {T}, {S}), (1, T, S), or a 4-D shape broadcastable to (B, h, T, S)=({B}, {h}, {T}, {S})"
            )
        masks.append(attn_mask)
    if key_padding_mask is not None:
        check_mask_kind("key_padding_mask", key_padding_mask)
        if key_padding_mask.shape != (B, S):
            raise ValueError(f"key_padding_mask has shape {tuple(key_padding_mask.shape)}; expected (B, S)=({B}, {S})")
        masks.append(array_namespace(key_padding_mask).reshape(key_padding_mask, (B, 1, 1, S)))
    xp = array_namespace(*masks)
    if not masks:
        return None
    if all(m.dtype == xp.bool for m in masks):
        return masks[0] if len(masks) == 1 else masks[0] | masks[1]
    if len(masks) == 1:
        return cast_mask(masks[0], dtype)
    first = cast_mask(masks[0], dtype)
    out = xp.zeros(broadcast_shape(first.shape, masks[1].shape), dtype=dtype, device=device_of(first))
    out += first  # a fresh array of the joint shape, so the sum can be taken in place
    return add_mask(out, cast_mask(masks[1], dtype))
