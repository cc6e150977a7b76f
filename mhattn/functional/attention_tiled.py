"""Step 3 (numbered as in :mod:`~mhattn.functional.mha`) in linear memory: tiled (FlashAttention-style) attention.

The plain path (:mod:`mhattn.functional.attention`) stores the ``(B, h, T, S)``
weights. Here a block of ``block_q`` queries meets the keys one tile of
``block_k`` at a time, and only ``(block_q, block_k)`` scores exist at once.

Forward, the online softmax (Milakov & Gimelshein 2018; FlashAttention-2, Dao
2023, Algorithm 1, lines 8-10). For one query row and key tiles j = 1, 2, ...::

    m_j = max(m_{j-1}, rowmax(S_j))                       running maximum
    l_j = exp(m_{j-1} - m_j) l_{j-1} + rowsum(exp(S_j - m_j))   running sum, rescaled
    O_j = exp(m_{j-1} - m_j) O_{j-1} + exp(S_j - m_j) V_j       running output, rescaled
    O = O_last / l_last,   L = m_last + log(l_last)         (Alg. 1, lines 12-13)

Backward (Dao 2023, Algorithm 2): nothing of size ``(T, S)`` was kept, so each
tile is recomputed from the per-row log-sum-exp L, with ``D = rowsum(dO * O)``
(line 4; FlashAttention-2 §3.1.2)::

    P_ij  = exp(S_ij - L_i)                 lines 10-11 (one exp, no max, no sum)
    dV_j += P_ij^T dO_i                     line 12
    dP_ij = dO_i V_j^T                      line 13
    dS_ij = P_ij * (dP_ij - D_i)            line 14
    dQ_i += dS_ij K_j,  dK_j += dS_ij^T Q_i  lines 15-16 (times 1/sqrt(d_k))

The loops run as Algorithm 2 writes them: the outer one over key tiles j (``dK_j``, ``dV_j`` summed there), the inner
one over query blocks i (``dQ_i`` summed across the key tiles). Every (batch, head) pair goes at once, one array op
per line. Any ``block_k`` gives the same results up to rounding (tests and notebook 09 use small ones); a whole-row
tile never rescales. Default sizes: key tiles of 256 and query blocks that make about 2**20 scores per tile over
all the pairs (4 MiB in float32, so a tile stays in a large cache; key tiles of 512 ran 10-20% slower at B1 T2048 and
B2 T1024, whole ``(B, h, T, S)`` tiles slower still). A line that turns a tile the loop already owns into the next
(``S - m``, ``dP - D``) writes it in place (the array API's ``-=``, ``*=``): a fresh tile per line took 1.1-1.4x as long,
with the same numbers (benchmarks/RESULTS.md).

Masks and conventions are the plain path's: ``mask`` bool (True = not allowed) or float (added), broadcastable
to ``(B, h, T, S)``; ``causal=True`` masks key s > query t (torch's top-left ``is_causal``) and skips the tiles
wholly above the diagonal. A query with no allowed key gets output 0, ``L = -inf`` and zero gradients.
No dropout here: it needs the ``(T, S)`` keep-mask, so it stays on the plain path.
Any array-API library runs it. This is the reference, written as the paper writes it; the NumPy speed engine's
drop-in pair (threads, reused tile buffers, L2-sized tiles) sits in the engine package beside this one, tested
equal to it.

Float32 and float64 only. A finite mask value as large as ``-1e9`` or ``finfo.min`` hiding a whole row
makes its ``L`` as large: the backward recomputes ``P = exp((S + mask - m) - log l)``, ``m`` and ``log l`` kept
apart as the forward made them (``S - L + mask`` would cancel to nothing).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from mhattn.backend import array_namespace, broadcasts_to, device_of
from mhattn.functional.masks import add_mask, cast_mask, check_mask_kind, dead_keys
from mhattn.functional.validate import check_float_array


class TiledAttentionCache(NamedTuple):
    q: object  # (B, h, T, d_k)
    k: object  # (B, h, S, d_k)
    v: object  # (B, h, S, d_v)
    out: object  # (B, h, T, d_v) the forward's output (for D = rowsum(dO * O))
    lse: object  # (B, h, T) log-sum-exp of each score row (-inf: no allowed key)
    row_max: object  # (B, h, T) the forward's shift m (0: no allowed key, or no shift taken)
    log_l: object  # (B, h, T) log of the row sum l under that shift (0: no allowed key); lse = m + log_l
    mask: object  # broadcast view (B, h, T, S), or None
    extreme: bool  # the float mask holds values beyond half the dtype's range (the engine adds it without overflow)
    causal: bool
    scale: float  # 1 / sqrt(d_k)
    block_q: int
    block_k: int
    workers: int  # threads the engine used (1 here)


def check_tiled_inputs(q, k, v, mask):
    """The namespace and the scores' shape ``(B, h, T, S)`` of checked inputs (see the forward's Raises)."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_float_array(name, a, q.dtype if name != "q" else None)
        if a.ndim != 4:
            raise ValueError(f"tiled attention: {name} must be 4-D (B, h, L, d), got shape {a.shape}")
    xp = array_namespace(q, k, v, mask)
    if q.dtype not in (xp.float32, xp.float64):
        raise TypeError(f"tiled attention: q, k, v must be float32 or float64, got {q.dtype}; cast them (e.g. to float32)")
    if q.shape[-1] != k.shape[-1] or k.shape[:3] != v.shape[:3] or q.shape[:2] != k.shape[:2] or q.shape[-1] == 0:
        raise ValueError(f"tiled attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit together")
    if k.shape[2] == 0:
        raise ValueError(f"tiled attention: k and v have no positions (S=0): shapes {k.shape}, {v.shape}")
    scores_shape = (*q.shape[:-1], k.shape[-2])
    if mask is not None:
        check_mask_kind("mask", mask)
        if not broadcasts_to(mask.shape, scores_shape):
            raise ValueError(f"tiled attention: mask of shape {mask.shape} does not broadcast to the scores {scores_shape}")
    return xp, scores_shape


def _scores(xp, qs, k, mask, causal, q0, q1, k0, k1):
    """One tile of scaled, masked scores ``(B, h, bq, bk)``: ``(Q_i / sqrt(d_k)) K_j^T``, the mask, the causal cut."""
    s = xp.matmul(qs, k[..., k0:k1, :].mT)  # (B, h, bq, d_k) @ (B, h, d_k, bk) -> (B, h, bq, bk)
    if mask is not None and mask.dtype == xp.bool:
        s = xp.where(mask[..., q0:q1, k0:k1], -xp.inf, s)
    elif mask is not None:
        s = add_mask(s, mask[..., q0:q1, k0:k1])  # without overflow
    if causal and k1 - 1 > q0:  # the tile crosses the diagonal: key s > query t is masked
        device = device_of(s)
        s = xp.where(xp.arange(k0, k1, device=device)[None, :] > xp.arange(q0, q1, device=device)[:, None], -xp.inf, s)
    return s


def _key_end(causal, q1, S):
    """Keys past this index are masked for every query of the block (causal: s <= t < q1)."""
    return min(S, q1) if causal else S


def _forward_block(xp, q, k, v, mask, causal, scale, q0, q1, block_k):
    """Online softmax of one query block over its key tiles (Algorithm 1, lines 8-13): ``(O_i, L_i, m_i, log l_i)``."""
    qs = q[..., q0:q1, :] * scale  # (B, h, bq, d_k), 1/sqrt(d_k) folded in once
    m = xp.full((*qs.shape[:-1], 1), -xp.inf, dtype=q.dtype, device=device_of(q))  # running max (B, h, bq, 1)
    l_sum = xp.zeros_like(m)  # running sum l
    acc = xp.zeros((*qs.shape[:-1], v.shape[-1]), dtype=q.dtype, device=device_of(q))  # running output (B, h, bq, d_v)
    key_end = _key_end(causal, q1, v.shape[-2])
    for k0 in range(0, key_end, block_k):
        k1 = min(k0 + block_k, key_end)
        s = _scores(xp, qs, k, mask, causal, q0, q1, k0, k1)  # (B, h, bq, bk)
        # line 9: new running max (a row with nothing allowed yet shifts by 0: exp(-inf - 0) = 0)
        m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))  # (B, h, bq, 1)
        m_safe = xp.where(m_new == -xp.inf, 0.0, m_new)
        s -= m_safe  # in place: s is this tile's own array (a fresh one per line: 1.1-1.4x the time)
        p = xp.exp(s)  # (B, h, bq, bk)
        alpha = xp.exp(m - m_safe)  # rescales what was summed under the old max (0 on the first tile)
        # lines 9-10: the running sum and output, rescaled, plus this tile
        l_sum = l_sum * alpha + xp.sum(p, axis=-1, keepdims=True)  # (B, h, bq, 1)
        acc = acc * alpha + xp.matmul(p, v[..., k0:k1, :])  # (B, h, bq, bk) @ (B, h, bk, d_v) -> (B, h, bq, d_v)
        m = m_new
    # lines 12-13: normalise; an empty row (l = 0) gives out 0 and L = -inf
    empty = l_sum == 0
    l_safe = xp.where(empty, 1.0, l_sum)
    log_l, m = xp.log(l_safe), xp.where(empty, 0.0, m)  # (B, h, bq, 1) each, kept apart for the backward
    lse = xp.where(empty, -xp.inf, m + log_l)
    return acc / l_safe, lse[..., 0], m[..., 0], log_l[..., 0]


def tiled_attention_forward(q, k, v, mask=None, *, causal=False, block_q=None, block_k=None, workers=None):
    """Scaled dot-product attention without storing the ``(B, h, T, S)`` weights.

    Args:
        q: ``(B, h, T, d_k)`` float32/float64 queries; k: ``(B, h, S, d_k)``; v: ``(B, h, S, d_v)``, same dtype,
            namespace and device (any array-API library; B = 0 gives empty outputs).
        mask: bool (True = not allowed) or float (added; cast to ``q``'s dtype), broadcastable to ``(B, h, T, S)``;
            or ``None``. A constant: the backward returns no gradient for it.
        causal: also mask key s > query t (fully masked tiles are skipped).
        block_q: queries per block (default: about 2**20 scores per tile over all the (batch, head) pairs).
        block_k: keys per tile (default 256, at most S; fewer than S runs the online softmax across tiles).
        workers: the speed engine's thread count; the reference runs one call at a time and only checks that it
            is positive.

    Returns:
        ``(out, lse, cache)``: ``out`` ``(B, h, T, d_v)`` equal to the plain path's;
        ``lse`` ``(B, h, T)``, ``log sum_s exp(score_ts)`` (``-inf`` where no key is allowed).

    Raises:
        TypeError: non-float or mixed-dtype q, k, v; a dtype other than float32/float64 (float16, say);
            a mask neither bool nor float; arrays of two libraries.
        ValueError: shapes that do not fit, no keys (S = 0), a mask that does not broadcast, a non-positive
            block size, arrays on two devices.

    Source: Dao 2023 (FlashAttention-2), Algorithm 1; Vaswani et al. 2017, eq. (1).
    """
    xp, scores_shape = check_tiled_inputs(q, k, v, mask)
    B, h, T, S = scores_shape
    block_k = min(S, 256) if block_k is None else block_k
    block_q = max(16, min(T, 2**20 // max(1, B * h * block_k))) if block_q is None else block_q
    if min(block_q, block_k, 1 if workers is None else workers) < 1:
        raise ValueError(f"tiled attention: block_q={block_q}, block_k={block_k}, workers={workers} must be positive")
    if mask is not None:  # a key hidden from every query holds no influence, whatever it holds (NaN, inf)
        mask = mask if mask.dtype in (xp.bool, q.dtype) else cast_mask(mask, q.dtype)
        dead = dead_keys(mask)[..., None]  # (..., S, 1)
        k, v = xp.where(dead, 0.0, k), xp.where(dead, 0.0, v)  # (B, h, S, d_k), (B, h, S, d_v): fresh arrays
        mask = xp.broadcast_to(mask, scores_shape)  # a view: no memory
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32 as float32
    starts = range(0, max(T, 1), block_q)  # T = 0: one empty block gives the empty outputs their shapes
    blocks = [_forward_block(xp, q, k, v, mask, causal, scale, q0, min(q0 + block_q, T), block_k) for q0 in starts]
    out, lse, row_max, log_l = (xp.concat([b[i] for b in blocks], axis=-1 if i else -2) for i in range(4))
    cache = TiledAttentionCache(q, k, v, out, lse, row_max, log_l, mask, False, bool(causal), scale, block_q, block_k, 1)
    return out, lse, cache


def tiled_attention_backward(dout, cache: TiledAttentionCache):
    """Gradients of :func:`tiled_attention_forward`, tiles recomputed from the log-sum-exp.

    Args:
        dout: ``(B, h, T, d_v)`` upstream gradient, the forward's namespace and device.

    Returns:
        ``(dq, dk, dv)`` with the shapes of ``q``, ``k``, ``v``; zero for masked pairs.

    Raises:
        ValueError: ``dout`` is not the output's shape.

    Source: Dao 2023 (FlashAttention-2), Algorithm 2, lines 4 and 10-16.
    """
    c = cache
    xp = array_namespace(dout, c.q)
    if dout.shape != c.out.shape:
        raise ValueError(f"tiled attention: dout has shape {dout.shape}, the output {c.out.shape}")
    T, S = c.q.shape[2], c.k.shape[2]
    # line 4: D_i = rowsum(dO_i * O_i) (= rowsum(dP * P), without P)
    D = xp.sum(dout * c.out, axis=-1, keepdims=True)  # (B, h, T, 1)
    # line 11's L = m + log l, kept apart: L rounded at the size of m would move every weight of a large-score row by
    # one unit of m's last place (float32 scores near 1e4: dV 2e-4 off the plain path, against 4e-8 with the two apart)
    m, log_l = c.row_max[..., None], c.log_l[..., None]  # (B, h, T, 1) each: the forward's shift and log-sum
    starts = range(0, T, c.block_q)
    dq = [xp.zeros_like(c.q[..., q0 : min(q0 + c.block_q, T), :]) for q0 in starts]  # dQ_i, summed over the tiles
    dk, dv = [], []
    for k0 in range(0, S, c.block_k):  # line 5: the outer loop over key tiles j
        k1 = min(k0 + c.block_k, S)
        dk_j = xp.zeros_like(c.k[..., k0:k1, :])  # (B, h, bk, d_k)
        dv_j = xp.zeros_like(c.v[..., k0:k1, :])  # (B, h, bk, d_v)
        for i, q0 in enumerate(starts):  # line 7: the inner loop over query blocks i
            q1 = min(q0 + c.block_q, T)
            if c.causal and k0 >= q1:  # every key of the tile comes after every query of the block
                continue
            qs = c.q[..., q0:q1, :] * c.scale  # (B, h, bq, d_k)
            do = dout[..., q0:q1, :]  # (B, h, bq, d_v)
            # lines 10-11: the tile's weights from the forward's shift and log-sum: P = exp((S - m) - log l)
            s = _scores(xp, qs, c.k, c.mask, c.causal, q0, q1, k0, k1)  # (B, h, bq, bk)
            s -= m[..., q0:q1, :]  # in place, as in the forward: s is this tile's own array
            s -= log_l[..., q0:q1, :]
            p = xp.exp(s)  # (B, h, bq, bk); 0 where masked
            # line 12: dV_j += P^T dO_i
            dv_j = dv_j + xp.matmul(p.mT, do)  # (B, h, bk, bq) @ (B, h, bq, d_v) -> (B, h, bk, d_v)
            # lines 13-14: dP = dO_i V_j^T, dS = P * (dP - D_i)
            dp = xp.matmul(do, c.v[..., k0:k1, :].mT)  # (B, h, bq, d_v) @ (B, h, d_v, bk) -> (B, h, bq, bk)
            dp -= D[..., q0:q1, :]  # in place: dp is this tile's own array
            dp *= p
            ds = dp  # (B, h, bq, bk)
            # lines 15-16: dQ_i += dS K_j / sqrt(d_k); dK_j += dS^T (Q_i / sqrt(d_k))
            dq[i] = dq[i] + xp.matmul(ds, c.k[..., k0:k1, :]) * c.scale  # (B, h, bq, d_k)
            dk_j = dk_j + xp.matmul(ds.mT, qs)  # (B, h, bk, bq) @ (B, h, bq, d_k) -> (B, h, bk, d_k)
        dk.append(dk_j)
        dv.append(dv_j)
    dq = xp.concat(dq, axis=-2) if dq else xp.zeros_like(c.q)  # (B, h, T, d_k)
    return dq, xp.concat(dk, axis=-2), xp.concat(dv, axis=-2)
