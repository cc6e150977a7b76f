"""The engine's multi-head attention: the reference pair (:mod:`mhattn.functional.mha`) on NumPy, fast.

Same arguments, checks, results (equal to rounding) and cache (:class:`~mhattn.functional.mha.MHACache`); what
differs is only how NumPy gets there:

- the whole call is one pooled call (:func:`mhattn.kernels.pool.pooled`): BLAS at one thread, the work on the
  engine's pool; its GEMMs are split into blocks (:func:`mhattn.kernels.pool.matmul`);
- self-attention (one array for query, key and value) projects with one fused ``(d_model, 3 d_model)`` GEMM;
- no layout copy on the plain path: step 3 reads each head as a strided view of ``Q``, ``K``, ``V`` and writes its
  result into the concat's view (and its gradients into ``dQ``, ``dK``, ``dV``'s), which BLAS takes in place; the
  copies cost more than the strided GEMMs lose (about 3% of a B16 T128 step, ``benchmarks/RESULTS.md``). The
  tiled path takes contiguous heads (one pooled copy each way);
- step 3 is the engine's attention (:mod:`.attention`, chunked by batch; :mod:`.tiled`, by (batch, head) pair);
- reshapes and transposes are the arrays' methods (NumPy's functions cost ~0.5 µs more each, a tenth of an
  exercise-size step).
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import read_only
from mhattn.functional.attention_tiled import TiledAttentionCache
from mhattn.functional.linear import LinearCache
from mhattn.functional.mha import REFERENCE_ONLY_PARAMS, MHACache, check_mha_call, merge_mha_masks
from mhattn.functional.split_heads import HeadsCache
from mhattn.kernels import attention, pool
from mhattn.kernels import tiled as tiled_attention


def work(query, key, d_model) -> int:
    """Multiply-adds of one forward: the four projections and the two attention products."""
    (B, T, _), S = query.shape, key.shape[1]
    return B * (2 * T + 2 * S) * d_model * d_model + 2 * B * T * S * d_model


def linear_forward(x, W, b=None):
    """:func:`mhattn.functional.linear.linear_forward` on checked NumPy arrays, the GEMM split over the pool."""
    out = pool.matmul(x.reshape(-1, x.shape[-1]), W, bias=b)  # (N, d_in) @ (d_in, d_out) + (d_out,) -> (N, d_out)
    return out.reshape(*x.shape[:-1], W.shape[1]), LinearCache(x, W, b is not None)  # (..., d_out)


def linear_backward(dout, cache: LinearCache):
    """:func:`mhattn.functional.linear.linear_backward` on NumPy: ``(dx, dW, db)``."""
    x, W, has_bias = cache
    dout2 = dout.reshape(-1, dout.shape[-1])  # (N, d_out)
    db = dout2.sum(axis=0) if has_bias else None  # (d_out,)
    dx = pool.matmul(dout2, W.T).reshape(x.shape)  # (N, d_out) @ (d_out, d_in) -> (..., d_in)
    dW = pool.matmul(x.reshape(-1, x.shape[-1]).T, dout2)  # (d_in, N) @ (N, d_out) -> (d_in, d_out)
    return dx, dW, db


def _heads(x, h):
    """``(B, L, h d)`` -> ``(B, h, L, d)``, a view: each head's rows strided by ``h d`` (BLAS reads and writes such a
    matrix in place: its rows evenly spaced, its columns adjacent)."""
    B, L, d_model = x.shape
    return x.reshape(B, L, h, d_model // h).transpose(0, 2, 1, 3)  # (B, h, L, d)


def _split(x, h):
    """``(B, L, d_model)`` -> ``(B, h, L, d_k)``, each head's rows contiguous (one copy, over the pool)."""
    return pool.contiguous(_heads(x, h))  # (B, h, L, d_k)


def _combine_into(out, x, head_mask=None):
    """Step 5 (and 4, with ``head_mask`` ``(h,)`` or ``(B, h)``): ``x`` ``(B, h, L, d_k)`` written into the heads' view
    of ``out`` ``(B, L, h d_k)`` (the concat, or a gradient of Q, K or V); returns ``out``."""
    if head_mask is None:
        pool.copyto(_heads(out, x.shape[1]), x)
    else:
        np.multiply(x, head_mask[..., None, None], out=_heads(out, x.shape[1]))  # (B, h, T, d_k), one pass
    return out


def _project_qkv(query, key, value, params):
    """Step 1; self-attention (one array for all three) takes one fused GEMM."""
    W_q, W_k, W_v = params["W_q"], params["W_k"], params["W_v"]
    b_q, b_k, b_v = params.get("b_q"), params.get("b_k"), params.get("b_v")
    if key is query and value is query:
        b_qkv = None if b_q is None else np.concatenate([b_q, b_k, b_v])
        qkv, _ = linear_forward(query, np.concatenate([W_q, W_k, W_v], axis=1), b_qkv)  # (B, T, 3 d_model)
        d = W_q.shape[1]
        Q, K, V = qkv[..., :d], qkv[..., d : 2 * d], qkv[..., 2 * d :]
    else:
        Q, K, V = (linear_forward(x, W, b)[0] for x, W, b in ((query, W_q, b_q), (key, W_k, b_k), (value, W_v, b_v)))
    caches = tuple(LinearCache(x, W, b is not None) for x, W, b in ((query, W_q, b_q), (key, W_k, b_k), (value, W_v, b_v)))
    return (Q, K, V), caches


def multi_head_attention_forward(
    query, key, value, params, num_heads, *, attn_mask=None, key_padding_mask=None, head_mask=None,
    dropout_p=0.0, rng=None, tiled=False, is_causal=False,
):  # fmt: skip
    """:func:`mhattn.functional.mha.multi_head_attention_forward` on NumPy float32/float64 arrays: the same
    arguments, checks (Raises) and results ``(out, weights, cache)``, as one pooled call."""
    num_heads = check_mha_call(query, key, value, params, num_heads, head_mask, dropout_p, rng, tiled)
    if params.get("bias_k") is not None or params.get("bias_v") is not None:  # REFERENCE_ONLY_PARAMS
        raise ValueError(f"the engine has no add_bias_kv ({REFERENCE_ONLY_PARAMS}): run the reference steps")
    with pool.pooled(work(query, key, params["W_q"].shape[1])):
        key, value, mask = merge_mha_masks(query, key, value, num_heads, attn_mask, key_padding_mask, is_causal, tiled)
        (Q, K, V), proj = _project_qkv(query, key, value, params)  # 1. (B, T|S, d_model)
        concat = np.empty(Q.shape, dtype=Q.dtype)  # (B, T, d_model), the heads' views filled by step 3 or 4-5
        if tiled:  # 2-3. the tiled path takes contiguous heads
            q, k, v = (_split(x, num_heads) for x in (Q, K, V))  # (B, h, T|S, d_k)
            (heads, _, att), weights = tiled_attention.tiled_attention_forward(q, k, v, mask, causal=is_causal), None
            _combine_into(concat, heads, head_mask)  # 4-5.
        else:  # 2-5. views of Q, K, V in, the concat's view out: no layout copy
            where = _heads(concat, num_heads) if head_mask is None else None
            q, k, v = (_heads(x, num_heads) for x in (Q, K, V))  # (B, h, T|S, d_k), views
            heads, weights, att = attention.attend(q, k, v, mask, dropout_p, rng, out=where)  # (B, h, T, d_k)
            if head_mask is not None:
                _combine_into(concat, heads, head_mask)
        out, out_proj = linear_forward(concat, params["W_o"], params.get("b_o"))  # 6. (B, T, d_model)
    weights = None if weights is None else read_only(weights)
    return out, weights, MHACache(proj, HeadsCache(num_heads), att, heads, head_mask, out_proj)


def multi_head_attention_backward(dout, cache: MHACache):
    """:func:`mhattn.functional.mha.multi_head_attention_backward` on NumPy: ``(dquery, dkey, dvalue, grads,
    dhead_mask)``, as one pooled call (a backward does about twice its forward's products)."""
    query, key = cache.proj[0].x, cache.proj[1].x
    grads = {}
    with pool.pooled(2 * work(query, key, cache.out_proj.W.shape[1])):
        dconcat, grads["W_o"], db_o = linear_backward(dout, cache.out_proj)  # 6. (B, T, d_model)
        h, tiled = cache.split.num_heads, isinstance(cache.attention, TiledAttentionCache)
        dmasked = _split(dconcat, h) if tiled else _heads(dconcat, h)  # 5. (B, h, T, d_k)
        dhead_mask, dheads = None, dmasked  # 4.
        if cache.head_mask is not None:
            dhead_mask = np.sum(dmasked * cache.heads, axis=(2, 3))  # (B, h)
            dhead_mask = dhead_mask.sum(axis=0) if cache.head_mask.ndim == 1 else dhead_mask  # (h,)
            dheads = dmasked * cache.head_mask[..., None, None]
        B, T, d_model = cache.out_proj.x.shape
        dtype = np.promote_types(dheads.dtype, cache.out_proj.x.dtype)
        dQKV = [np.empty((B, L, d_model), dtype=dtype) for L in (T, key.shape[1], key.shape[1])]  # (B, T|S, d_model)
        if tiled:  # 3-2.
            for d, into in zip(tiled_attention.tiled_attention_backward(dheads, cache.attention), dQKV, strict=True):
                _combine_into(into, d)
        else:  # 3-2. written straight into the heads' views: no layout copy
            attention.scaled_dot_product_attention_backward(dheads, cache.attention, out=[_heads(g, h) for g in dQKV])
        dquery, grads["W_q"], db_q = linear_backward(dQKV[0], cache.proj[0])  # 1.
        dkey, grads["W_k"], db_k = linear_backward(dQKV[1], cache.proj[1])
        dvalue, grads["W_v"], db_v = linear_backward(dQKV[2], cache.proj[2])
    for name, db in (("b_q", db_q), ("b_k", db_k), ("b_v", db_v), ("b_o", db_o)):
        if db is not None:
            grads[name] = db
    return dquery, dkey, dvalue, grads, dhead_mask
