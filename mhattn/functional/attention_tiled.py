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

Tile sizes (benchmarks/RESULTS.md): on NumPy blocks of 256 queries, key tiles sized from one core's L2 as the OS
reports it (:func:`mhattn.executor.plan_blocks`): a ``(256, block_k)`` score tile fills at most half of it, so 512
keys for 1 MiB of L2 in float32, 1024 for 2 MiB (1 MiB where the OS does not say); full rows at S = 2048 ran ~18% slower.
Any ``block_k`` gives the same results (tests and notebook 09 use small ones); a whole-row tile never rescales.

Masks and conventions are the plain path's: ``mask`` bool (True = not allowed) or float (added), broadcastable
to ``(B, h, T, S)``; ``causal=True`` masks key s > query t (torch's top-left ``is_causal``) and skips the tiles
wholly above the diagonal. A query with no allowed key gets output 0, ``L = -inf`` and zero gradients.
No dropout here: it needs the ``(T, S)`` keep-mask, so it stays on the plain path.
Any array-API library runs it. On NumPy the (batch, head) pairs run on one pool of threads with BLAS at one
thread (:mod:`mhattn.executor`) and tiles reuse buffers (:mod:`mhattn.xp_extra`); elsewhere all pairs go at
once, one query block at a time. The running max is only a guard against overflow (any shift gives the same
softmax): a query block whose scores are all small (Cauchy-Schwarz bound, :func:`mhattn.xp_extra.shift_free`)
skips it, which saves two of the forward's passes over each tile.

Float32 and float64 only. A finite mask value as large as ``-1e9`` or ``finfo.min`` hiding a whole row
makes its ``L`` as large: with a float mask the backward recomputes ``P = exp((S + mask - m) - log l)``,
``m`` and ``log l`` kept apart as the forward made them (``S - L + mask`` would cancel to nothing).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from mhattn import executor
from mhattn.backend import array_namespace, broadcasts_to, device_of
from mhattn.functional.masks import add_mask, cast_mask, check_mask_kind, dead_keys
from mhattn.functional.validate import check_float_array
from mhattn.xp_extra import contiguous, exp_in_place, fill_where, key_norm, matmul_into, shift_free, workspace


class TiledAttentionCache(NamedTuple):
    q: object  # (B, h, T, d_k)
    k: object  # (B, h, S, d_k)
    v: object  # (B, h, S, d_v)
    out: object  # (B, h, T, d_v) the forward's output (for D = rowsum(dO * O))
    lse: object  # (B, h, T) log-sum-exp of each score row (-inf: no allowed key)
    row_max: object  # (B, h, T) the forward's shift m (0: no allowed key, or no shift taken)
    log_l: object  # (B, h, T) log of the row sum l under that shift (0: no allowed key); lse = m + log_l
    mask: object  # broadcast view (B, h, T, S), or None
    extreme: bool  # the float mask holds values beyond half the dtype's range: added without overflow (add_mask)
    causal: bool
    scale: float  # 1 / sqrt(d_k)
    block_q: int
    block_k: int
    workers: int


def _check(q, k, v, mask):
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


def _scores(xp, qs, kT, mask, causal, q0, q1, k0, k1, out, extreme=False):
    """One tile of scaled, masked scores ``(..., bq, bk)`` from ``kT`` ``(..., d, S)``, into ``out``'s corner.

    ``extreme``: the float mask is added as the plain path adds it (:func:`~mhattn.functional.masks.add_mask`:
    a sum beyond the finite range is ``-inf``), which costs a few passes; else in place.
    """
    s = matmul_into(xp, qs, kT[..., :, k0:k1], out, q1 - q0, k1 - k0)  # (..., bq, bk); K^T contiguous: ~12% faster
    if mask is not None and mask.dtype == xp.bool:
        s = fill_where(xp, s, mask[..., q0:q1, k0:k1])
    elif mask is not None and extreme:
        s = add_mask(s, mask[..., q0:q1, k0:k1])
    elif mask is not None:
        s += mask[..., q0:q1, k0:k1]
    if causal and k1 - 1 > q0:  # the tile crosses the diagonal: key s > query t is masked
        device = device_of(s)
        s = fill_where(xp, s, xp.arange(k0, k1, device=device)[None, :] > xp.arange(q0, q1, device=device)[:, None])
    return s


def _key_end(causal, q1, S):
    """Keys past this index are masked for every query of the block (causal: s <= t < q1)."""
    return min(S, q1) if causal else S


def _exp_tile(xp, s, m, shift):
    """``P = exp(S - m_new)`` in place, the new running max and ``alpha = exp(m_old - m_new)`` (line 9)."""
    if not shift:  # every score is small (see shift_free): m stays 0, alpha 1
        return exp_in_place(xp, s), m, 1
    # a row with nothing allowed yet uses 0 (exp(-inf - 0) = 0)
    m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))  # (..., bq, 1)
    m_safe = xp.where(m_new == -xp.inf, 0.0, m_new)
    s -= m_safe
    return exp_in_place(xp, s), m_new, xp.exp(m - m_safe)  # alpha: 0 on the first tile


def _forward_block(xp, q, kT, v, mask, extreme, causal, scale, q0, q1, block_k, ws, k_norm):
    """Online softmax of one query block over its key tiles: ``(out, lse, m, log l)`` of the block."""
    device = device_of(q)
    qs = q[..., q0:q1, :] * scale  # (..., bq, d_k), 1/sqrt(d_k) folded in once
    shift = not shift_free(xp, qs, k_norm, mask)
    m = xp.full((*qs.shape[:-1], 1), -xp.inf if shift else 0.0, dtype=q.dtype, device=device)  # running max (..., bq, 1)
    l_sum = xp.zeros_like(m)  # running sum l
    acc = xp.zeros((*qs.shape[:-1], v.shape[-1]), dtype=q.dtype, device=device)  # running output (..., bq, d_v)
    ones = xp.ones((min(block_k, v.shape[-2]), 1), dtype=q.dtype, device=device)
    key_end = _key_end(causal, q1, v.shape[-2])
    for k0 in range(0, key_end, block_k):
        k1 = min(k0 + block_k, key_end)
        s = _scores(xp, qs, kT, mask, causal, q0, q1, k0, k1, ws.s, extreme=extreme)  # (..., bq, bk)
        # 1-2. new running max and this tile's exponentials, in place (Alg. 1, line 9)
        p, m, alpha = _exp_tile(xp, s, m, shift)
        # 3. rescale what was summed under the old max, then add this tile (Alg. 1: l line 9, O line 10)
        l_sum = l_sum * alpha + p @ ones[: k1 - k0, :]  # row sums as a GEMV (4x np.sum's speed)
        acc = acc * alpha + p @ v[..., k0:k1, :]  # (..., bq, d_v)
    # 4. normalise; an empty row (l = 0) gives out 0 and lse -inf (Alg. 1, lines 12-13)
    empty = l_sum == 0
    l_safe = xp.where(empty, 1.0, l_sum)
    log_l, m = xp.log(l_safe), xp.where(empty, 0.0, m)  # (..., bq, 1) each, kept apart for the backward
    lse = xp.where(empty, -xp.inf, m + log_l)
    return acc / l_safe, lse[..., 0], m[..., 0], log_l[..., 0]


def _with_column(xp, a, column):
    """``[a | column]``: ``(..., n, d)`` and ``column`` broadcastable to ``(..., n, 1)`` -> ``(..., n, d + 1)``."""
    return xp.concat([a, xp.broadcast_to(column, (*a.shape[:-1], 1))], axis=-1)


def _backward_block(xp, c, dout, D, lse_b, grads, idx, q0, q1, ws):
    """Algorithm 2's inner loop for one query block of one work item ``idx`` (a (b, head) pair, or everything).

    ``- L_i`` and ``- D_i`` ride along in the GEMMs as one extra column
    (``[Q_i | -L_i] [K_j | 1]^T = Q_i K_j^T - L_i``): two fewer passes over each tile. A float mask
    adds to the scores first, as in the forward, and ``m_i`` and ``log l_i`` are taken off after: a
    large finite mask value (``-1e9``, ``finfo.min``) hiding the whole row makes ``L_i`` as large, and
    ``Q_i K_j^T - L_i + mask`` would cancel to nothing.
    """
    (dq, dk, dv), (k_oneT, v_oneT) = grads, ws.extra
    rows = executor.at(idx, slice(q0, q1))  # this block's rows of a (B, h, T, ...) array
    k = c.k[executor.at(idx)]  # (..., S, d_k)
    mask = None if c.mask is None else c.mask[executor.at(idx)]
    float_mask = mask is not None and mask.dtype != xp.bool
    qs = c.q[rows] * c.scale  # (..., bq, d_k)
    do = dout[rows]  # (..., bq, d_v)
    qs_l = qs if float_mask else _with_column(xp, qs, -lse_b[rows][..., None])  # (..., bq, d_k + 1) = [Q_i | -L_i]
    kT = k_oneT[..., :-1, :] if float_mask else k_oneT  # K^T, or [K | 1]^T
    do_d = _with_column(xp, do, -D[rows][..., None])  # (..., bq, d_v + 1) = [dO_i | -D_i]
    dq_acc = 0  # (..., bq, d_k) after the first tile
    for k0 in range(0, _key_end(c.causal, q1, k.shape[-2]), c.block_k):
        k1 = min(k0 + c.block_k, _key_end(c.causal, q1, k.shape[-2]))
        keys = executor.at(idx, slice(k0, k1))  # this tile's rows of a (B, h, S, ...) array
        # lines 10-11: recompute the tile's weights from the saved log-sum-exp: P = exp(S - L)
        s = _scores(xp, qs_l, kT, mask, c.causal, q0, q1, k0, k1, ws.s, extreme=c.extreme)  # (..., bq, bk)
        if float_mask:  # (S + mask - m) - log l, as the forward made it
            s -= c.row_max[rows][..., None]
            s -= c.log_l[rows][..., None]
        p = exp_in_place(xp, s)
        # line 12: dV_j += P^T dO_i
        dv[keys] += matmul_into(xp, p.mT, do, ws.kv, k1 - k0, do.shape[-1])  # (..., bk, d_v)
        # lines 13-14: dS = P * (dO V^T - D)
        ds = matmul_into(xp, do_d, v_oneT[..., :, k0:k1], ws.ds, q1 - q0, k1 - k0)  # (..., bq, bk)
        ds *= p
        # lines 15-16: dQ_i += dS K_j; dK_j += dS^T (Q_i / sqrt(d_k))
        dq_acc = dq_acc + ds @ k[..., k0:k1, :]  # (..., bq, d_k)
        dk[keys] += matmul_into(xp, ds.mT, qs, ws.kv, k1 - k0, qs.shape[-1])  # (..., bk, d_k)
    dq[rows] = dq_acc * c.scale


def tiled_attention_forward(q, k, v, mask=None, *, causal=False, block_q=None, block_k=None, workers=None):
    """Scaled dot-product attention without storing the ``(B, h, T, S)`` weights.

    Args:
        q: ``(B, h, T, d_k)`` float32/float64 queries; k: ``(B, h, S, d_k)``; v: ``(B, h, S, d_v)``, same dtype,
            namespace and device (any array-API library; B = 0 gives empty outputs).
        mask: bool (True = not allowed) or float (added; cast to ``q``'s dtype), broadcastable to ``(B, h, T, S)``;
            or ``None``.
        causal: also mask key s > query t (fully masked tiles are skipped).
        block_q: queries per block (default 256 on NumPy; sized to about 2**26 scores per tile elsewhere).
        block_k: keys per tile (default on NumPy: from the L2 size, see above, at most S; S elsewhere; fewer than S runs the
            online softmax across tiles).
        workers: threads on NumPy (default: :func:`mhattn.executor.thread_budget`, at most B*h); ignored elsewhere.

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
    xp, scores_shape = _check(q, k, v, mask)
    extreme = False  # a float mask with values beyond half the range (finfo.min, say): added as the plain path adds
    block_q, block_k, workers = executor.plan_blocks(xp, q, k.shape[-2], block_q, block_k, workers)
    if min(block_q, block_k, workers) < 1:
        raise ValueError(f"tiled attention: block_q={block_q}, block_k={block_k}, workers={workers} must be positive")
    if mask is not None:  # a key hidden from every query holds no influence, whatever it holds (NaN, inf)
        mask = mask if mask.dtype in (xp.bool, q.dtype) else cast_mask(mask, q.dtype)  # in-place adds keep q's dtype
        extreme = mask.dtype != xp.bool and bool(xp.any(xp.abs(xp.where(mask == -xp.inf, 0.0, mask)) > xp.finfo(q.dtype).max / 2))
        dead = dead_keys(mask)[..., None]  # (..., S, 1)
        k, v = xp.where(dead, 0.0, k), xp.where(dead, 0.0, v)  # (B, h, S, d_k), (B, h, S, d_v): fresh arrays
        mask = xp.broadcast_to(mask, scores_shape)  # a view: no memory
    # each head's rows contiguous: GEMMs on strided (B, h, T, d_k) views of (B, T, d_model) run ~30% slower
    q, k, v = (contiguous(xp, a) for a in (q, k, v))  # (B, h, L, d), O(L d) each
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32 as float32
    device = device_of(q)
    out = xp.empty((*q.shape[:-1], v.shape[-1]), dtype=q.dtype, device=device)  # (B, h, T, d_v)
    lse, row_max, log_l = (xp.empty(q.shape[:-1], dtype=q.dtype, device=device) for _ in range(3))  # (B, h, T) each

    def job(idx):
        item = executor.at(idx)  # (b, head) on NumPy, everything elsewhere
        m = None if mask is None else mask[item]
        ws = workspace(xp, q[item], block_q, block_k, k.shape[2])
        kT = contiguous(xp, k[item].mT)  # (..., d_k, S)
        k_norm = key_norm(xp, k[item])
        for q0 in range(0, q.shape[2], block_q):
            q1 = min(q0 + block_q, q.shape[2])
            rows = executor.at(idx, slice(q0, q1))
            out[rows], lse[rows], row_max[rows], log_l[rows] = _forward_block(
                xp, q[item], kT, v[item], m, extreme, causal, scale, q0, q1, block_k, ws, k_norm
            )

    executor.run_items(job, executor.work_items(xp, q), workers)
    cache = TiledAttentionCache(q, k, v, out, lse, row_max, log_l, mask, extreme, bool(causal), scale, block_q, block_k, workers)
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
    device = device_of(c.q)
    # line 4: D_i = rowsum(dO_i * O_i) (= rowsum(dP * P), without P)
    dout = contiguous(xp, dout)  # (B, h, T, d_v)
    D = xp.sum(dout * c.out, axis=-1)  # (B, h, T)
    # an empty row has every key masked (-inf after _scores, P = 0) whatever L is: 0 keeps inf out of the GEMMs
    lse_b = xp.where(c.lse == -xp.inf, 0.0, c.lse)  # (B, h, T)
    dq = xp.empty_like(c.q)
    dk, dv = (xp.zeros(a.shape, dtype=c.q.dtype, device=device) for a in (c.k, c.v))
    one = xp.ones((1, 1), dtype=c.q.dtype, device=device)
    T = c.q.shape[2]

    def job(idx):
        item = executor.at(idx)
        extra = tuple(contiguous(xp, _with_column(xp, a[item], one).mT) for a in (c.k, c.v))  # [K | 1]^T, [V | 1]^T
        ws = workspace(xp, c.q[item], c.block_q, c.block_k, c.k.shape[2])._replace(extra=extra)
        for q0 in range(0, T, c.block_q):
            _backward_block(xp, c, dout, D, lse_b, (dq, dk, dv), idx, q0, min(q0 + c.block_q, T), ws)

    executor.run_items(job, executor.work_items(xp, c.q), c.workers)
    return dq, dk, dv
