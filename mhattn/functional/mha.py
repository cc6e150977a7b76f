"""Multi-head attention: the textbook steps composed, with nested caches.

Vaswani et al. 2017, §3.2.2:
``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O`` with
``head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)``. Storing all W^Q_i side by side
as one ``(d_model, d_model)`` matrix turns h small projections into one GEMM
followed by a split. The head mask ξ (Michel et al. 2019, §2) scales each
head's output before the concat.

Forward steps (numbered; the backward undoes them in reverse)::

    1. Q, K, V = query W_q + b_q, key W_k + b_k, value W_v + b_v   (B, T|S, d_model)
       1b. optional extra keys: bias_k/bias_v, then a zero row      (B, S+n, d_model)  (extra_keys.py)
    2. split:   q, k, v                                              (B, h, T|S, d_k)
    3. per-head attention: 3a scores q k^T / sqrt(d_k), 3b softmax,  (B, h, T, d_k)
       3c weights @ v (attention.py, softmax.py)
    4. head mask: head_i *= ξ_i                                      (B, h, T, d_k)
    5. concat                                                        (B, T, d_model)
    6. out = concat W_o + b_o                                        (B, T, d_model)
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, device_of, read_only
from mhattn.functional.attention import (
    AttentionCache,
    scaled_dot_product_attention_backward,
    scaled_dot_product_attention_forward,
)
from mhattn.functional.attention_tiled import TiledAttentionCache, tiled_attention_backward, tiled_attention_forward
from mhattn.functional.extra_keys import (
    ExtraKeysCache,
    check_static_kv,
    extra_keys_backward,
    extra_keys_forward,
    pad_mask,
)
from mhattn.functional.linear import LinearCache, linear_backward, linear_forward
from mhattn.functional.masks import cast_mask, causal_mask, dead_keys, merge_masks
from mhattn.functional.split_heads import (
    HeadsCache,
    combine_heads_backward,
    combine_heads_forward,
    split_heads_backward,
    split_heads_forward,
)
from mhattn.functional.validate import check_dropout, check_mha_inputs

PARAM_NAMES = ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")
# options only the reference steps have: the speed twins refuse them, and nn/ falls back to the reference
REFERENCE_ONLY_PARAMS = ("bias_k", "bias_v")


class MHACache(NamedTuple):
    proj: tuple[LinearCache, LinearCache, LinearCache]  # step 1, for Q, K, V
    split: HeadsCache  # step 2
    attention: AttentionCache | TiledAttentionCache  # step 3 (plain, or tiled: see attention_tiled.py)
    heads: object  # (B, h, T, d_k) step-3 output, kept for d(head_mask)
    head_mask: object  # (h,) or (B, h), or None
    out_proj: LinearCache  # step 6
    extra: ExtraKeysCache | None = None  # step 1b (None: no extra keys, as the engine's caches)


def check_mha_call(query, key, value, params, num_heads, head_mask, dropout_p, rng, tiled) -> int:
    """Every check of :func:`multi_head_attention_forward` (see its Raises), done once; returns ``num_heads`` as an
    ``int``. The speed engine's twin runs the same."""
    num_heads = check_mha_inputs(query, key, value, params, num_heads, head_mask)
    check_dropout(dropout_p, rng)
    if tiled and dropout_p > 0:
        raise ValueError(f"tiled attention has no dropout (it never forms the weights); got dropout_p={dropout_p}")
    return num_heads


def merge_mha_masks(query, key, value, num_heads, attn_mask, key_padding_mask, is_causal, tiled):
    """Step 0: ``(key, value, mask)``: one mask broadcastable to ``(B, h, T, S)`` (or None) from ``attn_mask``,
    ``key_padding_mask`` and, on the plain path, ``is_causal`` (the tiled path skips the tiles above the diagonal
    instead); ``key``/``value`` with the positions hidden from every head and query set to 0 (fresh arrays, so
    NaN there cannot leak) when ``key`` is a separate array."""
    B, T, S = query.shape[0], query.shape[1], key.shape[1]
    mask = merge_masks(attn_mask, key_padding_mask, B, num_heads, T, S, query.dtype)
    xp = array_namespace(query, mask)  # the masks' library and device must be the inputs'
    if mask is not None and key is not query:
        dead = xp.all(xp.broadcast_to(dead_keys(mask), (B, num_heads, S)), axis=1)[..., None]  # (B, S, 1)
        zeroed = xp.where(dead, 0.0, key)  # (B, S, kdim)
        key, value = zeroed, (zeroed if value is key else xp.where(dead, 0.0, value))  # (B, S, vdim)
    if is_causal and not tiled:
        causal = causal_mask(T, S, xp, device=device_of(query))  # (T, S)
        if mask is None or mask.dtype == causal.dtype:
            mask = causal if mask is None else mask | causal
        else:
            mask = mask + cast_mask(causal, query.dtype)  # a fresh array: the caller's mask is not written
    return key, value, mask


def _project_qkv(query, key, value, params):
    """Step 1: the three projections, one GEMM each."""
    Q, q_cache = linear_forward(query, params["W_q"], params.get("b_q"))  # (B, T, d_model)
    K, k_cache = linear_forward(key, params["W_k"], params.get("b_k"))  # (B, S, d_model)
    V, v_cache = linear_forward(value, params["W_v"], params.get("b_v"))  # (B, S, d_model)
    return (Q, K, V), (q_cache, k_cache, v_cache)


def _split_qkv(Q, K, V, num_heads):
    """Step 2: ``(B, T|S, d_model)`` -> ``(B, h, T|S, d_k)`` each."""
    q, split = split_heads_forward(Q, num_heads)  # (B, h, T, d_k)
    k, _ = split_heads_forward(K, num_heads)  # (B, h, S, d_k)
    v, _ = split_heads_forward(V, num_heads)  # (B, h, S, d_k)
    return (q, k, v), split


def _per_head(head_mask):
    """The head mask ξ ``(h,)`` or ``(B, h)`` as ``(1|B, h, 1, 1)``, to scale ``(B, h, T, d_k)`` head outputs."""
    return array_namespace(head_mask).reshape(head_mask, (*head_mask.shape, 1, 1))


def multi_head_attention_forward(
    query,
    key,
    value,
    params,
    num_heads,
    *,
    attn_mask=None,
    key_padding_mask=None,
    head_mask=None,
    dropout_p=0.0,
    rng=None,
    tiled=False,
    is_causal=False,
    add_zero_attn=False,
    static_k=None,
    static_v=None,
):
    """Multi-head attention forward pass, batch first.

    Args:
        query: ``(B, T, d_model)`` float32/float64, any array-API array (NumPy, CuPy, torch,
            array-api-strict); every other array of the call must share its library and device.
        key: ``(B, S, kdim)``; value: ``(B, S, vdim)``; pass ``query`` itself for self-attention.
        params: mapping with ``W_q (d_model, d_model)``, ``W_k (kdim, d_model)``,
            ``W_v (vdim, d_model)``, ``W_o (d_model, d_model)`` and optionally
            ``b_q, b_k, b_v, b_o (d_model,)``, and optionally ``bias_k, bias_v (d_model,)`` (torch's
            ``add_bias_kv``: one learned key/value position appended, step 1b); all of the inputs' dtype.
        num_heads: h; ``d_k = d_model // h``.
        attn_mask: see :mod:`mhattn.functional.masks`; key_padding_mask: ``(B, S)``. Masks are constants: the
            backward returns no gradient for them (as torch, pytorch/pytorch#148476).
        head_mask: ``(h,)`` or ``(B, h)`` multipliers ξ on each head's output.
        dropout_p, rng: dropout on the attention weights (see attention.py).
        tiled: step 3 by :mod:`mhattn.functional.attention_tiled` (no weights stored; no dropout).
        is_causal: also mask key s > query t (the tiled path skips the tiles above the diagonal). mhattn's own
            meaning, kept on purpose: torch's ``MultiheadAttention`` takes ``is_causal`` as a hint that needs the
            causal ``attn_mask`` itself (docs/torch_parity.md).
        add_zero_attn: append a zero key/value position after the others (torch's ``add_zero_attn``, step 1b).
        static_k, static_v: ``(B*h, S, d_k)`` keys/values per head used in place of the projected ones (torch's
            ``static_k``/``static_v``; step 1b); not with ``bias_k``. Their gradients come back in ``grads``.

    Returns:
        ``(out, weights, cache)``, of ``query``'s namespace and device: ``out`` ``(B, T, d_model)``;
        ``weights`` ``(B, h, T, S + n)`` per head (n extra positions of step 1b, last), before dropout, read-only
        (a view of the cached weights on NumPy, a copy elsewhere); ``None`` when ``tiled``. An empty batch (B = 0) gives
        empty arrays of these shapes.

    A key position that the masks hide from every query of every head has no influence
    on the output or any gradient, whatever ``key`` and ``value`` hold there (NaN, inf),
    when ``key`` is a separate array. In self-attention that position is also a query,
    so its own output row (and, through it, the weight gradients) still sees what it holds.

    Raises:
        TypeError, ValueError: see :func:`mhattn.functional.validate.check_mha_inputs`,
        :func:`mhattn.functional.validate.check_dropout` and :func:`mhattn.functional.masks.merge_masks`;
        ValueError for ``tiled`` with dropout, for ``static_k``/``static_v`` of a shape other than ``(B*h, S, d_k)``
        or given with ``bias_k`` (TypeError for one of another dtype). Arrays of two libraries: TypeError; on two
        devices: ValueError.
    """
    num_heads = check_mha_call(query, key, value, params, num_heads, head_mask, dropout_p, rng, tiled)
    if static_k is not None or static_v is not None:
        d_model = params["W_q"].shape[1]
        B, S, d_k = query.shape[0], key.shape[1], d_model // num_heads
        check_static_kv(static_k, static_v, params.get("bias_k"), B, num_heads, S, d_k, query.dtype)
    n_extra = (params.get("bias_k") is not None) + bool(add_zero_attn)  # step 1b's positions
    skip_tiles = tiled and is_causal and not n_extra  # extra keys sit after the diagonal: their mask is explicit
    # 0. one mask; keys hidden from everything are zeroed (NaN there cannot leak)
    key, value, mask = merge_mha_masks(query, key, value, num_heads, attn_mask, key_padding_mask, is_causal, skip_tiles)
    # 1. the three projections
    (Q, K, V), proj = _project_qkv(query, key, value, params)  # (B, T|S, d_model)
    # 1b. static keys/values in place of K, V; extra key positions (add_bias_kv, add_zero_attn), mask columns allowed
    (K, V), extra = extra_keys_forward(
        K, V, params.get("bias_k"), params.get("bias_v"), add_zero_attn, static_k, static_v, num_heads
    )  # (B, S + n, d_model)
    mask = pad_mask(mask, key.shape[1], n_extra)  # (..., S + n)
    # 2. split d_model into h heads of d_k
    (q, k, v), split = _split_qkv(Q, K, V, num_heads)  # (B, h, T|S+n, d_k)
    # 3. scaled dot-product attention in every head at once
    if tiled:
        (heads, _, att), weights = tiled_attention_forward(q, k, v, mask, causal=skip_tiles), None  # (B, h, T, d_k)
    else:
        heads, weights, att = scaled_dot_product_attention_forward(q, k, v, mask, dropout_p, rng)  # (B, h, T, d_k)
    # 4. the head mask ξ scales each head's output
    masked = heads if head_mask is None else heads * _per_head(head_mask)  # (B, h, T, d_k)
    # 5. concat
    concat, _ = combine_heads_forward(masked)  # (B, T, d_model)
    # 6. output projection
    out, out_proj = linear_forward(concat, params["W_o"], params.get("b_o"))  # (B, T, d_model)
    weights = None if weights is None else read_only(weights)
    return out, weights, MHACache(proj, split, att, heads, head_mask, out_proj, extra)


def multi_head_attention_backward(dout, cache: MHACache):
    """Gradients of :func:`multi_head_attention_forward`.

    Args:
        dout: ``(B, T, d_model)`` upstream gradient, of the forward's namespace and device.

    Returns:
        ``(dquery, dkey, dvalue, grads, dhead_mask)``: input gradients with the
        inputs' shapes (for self-attention add the three); ``grads`` maps each
        name in ``params`` to its gradient (and ``static_k``/``static_v`` to theirs when the forward took them;
        the key/value projections they replaced get zeros, as in torch); ``dhead_mask`` has the head mask's
        shape, or is ``None`` without one. All of the forward's namespace and device.
    """
    grads = {}
    # step 6 was: out = concat W_o + b_o
    dconcat, grads["W_o"], db_o = linear_backward(dout, cache.out_proj)  # (B, T, d_model)
    # step 5 was: concat -> split the gradient back into heads
    dmasked = combine_heads_backward(dconcat, cache.split)  # (B, h, T, d_k)
    # step 4 was: heads * ξ -> dξ = <dmasked, heads> per head; dheads = dmasked * ξ
    dhead_mask, dheads = None, dmasked
    if cache.head_mask is not None:
        xp = array_namespace(dmasked)
        dhead_mask = xp.sum(dmasked * cache.heads, axis=(2, 3))  # (B, h)
        if cache.head_mask.ndim == 1:
            dhead_mask = xp.sum(dhead_mask, axis=0)  # (h,)
        dheads = dmasked * _per_head(cache.head_mask)
    # step 3 was: scaled dot-product attention
    tiled = isinstance(cache.attention, TiledAttentionCache)
    if tiled:
        dq, dk, dv = tiled_attention_backward(dheads, cache.attention)  # (B, h, T|S, d_k)
    else:
        dq, dk, dv = scaled_dot_product_attention_backward(dheads, cache.attention)  # (B, h, T|S, d_k)
    # step 2 was: split into heads -> concat the head gradients
    dQ, dK, dV = (split_heads_backward(d, cache.split) for d in (dq, dk, dv))  # (B, T|S+n, d_model)
    # step 1b was: extra key positions -> the bias rows' gradient summed over the batch, the zero row's dropped
    extra = {}
    if cache.extra is not None:
        dK, dV, extra = extra_keys_backward(dK, dV, cache.extra)  # (B, S, d_model); bias_k, static_k, ... grads
    # step 1 was: the three projections
    dquery, grads["W_q"], db_q = linear_backward(dQ, cache.proj[0])
    dkey, grads["W_k"], db_k = linear_backward(dK, cache.proj[1])
    dvalue, grads["W_v"], db_v = linear_backward(dV, cache.proj[2])
    for name, db in (("b_q", db_q), ("b_k", db_k), ("b_v", db_v), ("b_o", db_o)):
        if db is not None:
            grads[name] = db
    grads.update(extra)  # bias_k, bias_v (parameters) and static_k, static_v (inputs) where the forward had them
    return dquery, dkey, dvalue, grads, dhead_mask


# the reference pair of step 2 of an encoder block; the speed engine offers a drop-in twin
MHA_STEPS = (multi_head_attention_forward, multi_head_attention_backward)
