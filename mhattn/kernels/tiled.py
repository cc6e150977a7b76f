"""The engine's tiled attention: the reference's Algorithms 1 and 2 on NumPy, fast, with the same signature and results.

:mod:`mhattn.functional.attention_tiled` is the textbook version; this pair computes the same numbers (equal to
rounding; ``tests/lib/test_engine.py``) the way a 2-core CPU runs fastest:

- each (batch, head) pair is one work item on the engine's pool of threads, BLAS at one thread (:mod:`.pool`);
- tiles sized from one core's L2 (:func:`mhattn.kernels.pool.plan_blocks`): query blocks of 512, a ``(512,
  block_k)`` score tile at most half the L2, so 256 keys for 1 MiB of L2 in float32, 512 for 2 MiB (full rows at
  S = 2048 ran ~18% slower, benchmarks/RESULTS.md);
- each item's tile buffers made once and written in place (:mod:`.tiles`);
- a query block whose scores are all small skips the running max (:func:`mhattn.kernels.tiles.shift_free`): any
  shift gives the same softmax, and it saves two of the forward's passes over each tile;
- in the backward ``- L_i`` and ``- D_i`` ride along in the GEMMs as one extra column
  (``[Q_i | -L_i] [K_j | 1]^T = Q_i K_j^T - L_i``): two fewer passes over each tile. The price: ``L = m + log l`` is
  rounded at the size of the row maximum ``m``, so for float32 scores of 1e3 to 1e4 the recomputed weights (and dV) move
  1e-5 to 2e-4 off the plain path, where the reference, which keeps ``m`` and ``log l`` apart, stays within 1e-6.

NumPy float32/float64 arrays only (:func:`mhattn.kernels.takes`); the cache is the reference's
:class:`~mhattn.functional.attention_tiled.TiledAttentionCache`.
"""

from __future__ import annotations

import math

import numpy as np

from mhattn.backend import array_namespace
from mhattn.functional.attention_tiled import TiledAttentionCache, check_tiled_inputs
from mhattn.functional.masks import add_mask, cast_mask, dead_keys
from mhattn.kernels import pool
from mhattn.kernels.tiles import fill_where, key_norm, matmul_into, shift_free, with_column, workspace


def _scores(qs, kT, mask, causal, q0, q1, k0, k1, out, extreme=False):
    """One tile of scaled, masked scores ``(..., bq, bk)`` from ``kT`` ``(..., d, S)``, into ``out``'s corner.

    ``extreme``: the float mask is added as the plain path adds it (:func:`~mhattn.functional.masks.add_mask`:
    a sum beyond the finite range is ``-inf``), which costs a few passes; else in place.
    """
    s = matmul_into(qs, kT[..., :, k0:k1], out, q1 - q0, k1 - k0)  # (..., bq, bk); K^T contiguous: ~12% faster
    if mask is not None and mask.dtype == np.bool_:
        s = fill_where(s, mask[..., q0:q1, k0:k1])
    elif mask is not None and extreme:
        s = add_mask(s, mask[..., q0:q1, k0:k1])
    elif mask is not None:
        s += mask[..., q0:q1, k0:k1]
    if causal and k1 - 1 > q0:  # the tile crosses the diagonal: key s > query t is masked
        s = fill_where(s, np.arange(k0, k1)[None, :] > np.arange(q0, q1)[:, None])
    return s


def _key_end(causal, q1, S):
    """Keys past this index are masked for every query of the block (causal: s <= t < q1)."""
    return min(S, q1) if causal else S


def _exp_tile(s, m, shift):
    """``P = exp(S - m_new)`` in place, the new running max and ``alpha = exp(m_old - m_new)`` (line 9)."""
    if not shift:  # every score is small (see shift_free): m stays 0, alpha 1
        return np.exp(s, out=s), m, 1
    # a row with nothing allowed yet uses 0 (exp(-inf - 0) = 0)
    m_new = np.maximum(m, np.max(s, axis=-1, keepdims=True))  # (..., bq, 1)
    m_safe = np.where(m_new == -np.inf, 0.0, m_new)
    s -= m_safe
    return np.exp(s, out=s), m_new, np.exp(m - m_safe)  # alpha: 0 on the first tile


def _forward_block(q, kT, v, mask, extreme, causal, scale, q0, q1, block_k, ws, k_norm):
    """Online softmax of one query block over its key tiles: ``(out, lse, m, log l)`` of the block."""
    qs = q[..., q0:q1, :] * scale  # (..., bq, d_k), 1/sqrt(d_k) folded in once
    shift = not shift_free(qs, k_norm, mask)
    m = np.full((*qs.shape[:-1], 1), -np.inf if shift else 0.0, dtype=q.dtype)  # running max (..., bq, 1)
    l_sum = np.zeros_like(m)  # running sum l
    acc = np.zeros((*qs.shape[:-1], v.shape[-1]), dtype=q.dtype)  # running output (..., bq, d_v)
    ones = np.ones((min(block_k, v.shape[-2]), 1), dtype=q.dtype)
    key_end = _key_end(causal, q1, v.shape[-2])
    for k0 in range(0, key_end, block_k):
        k1 = min(k0 + block_k, key_end)
        s = _scores(qs, kT, mask, causal, q0, q1, k0, k1, ws.s, extreme=extreme)  # (..., bq, bk)
        # 1-2. new running max and this tile's exponentials, in place (Alg. 1, line 9)
        p, m, alpha = _exp_tile(s, m, shift)
        # 3. rescale what was summed under the old max, then add this tile (Alg. 1: l line 9, O line 10)
        l_sum = l_sum * alpha + p @ ones[: k1 - k0, :]  # row sums as a GEMV (4x np.sum's speed)
        acc = acc * alpha + p @ v[..., k0:k1, :]  # (..., bq, d_v)
    # 4. normalise; an empty row (l = 0) gives out 0 and lse -inf (Alg. 1, lines 12-13)
    empty = l_sum == 0
    l_safe = np.where(empty, 1.0, l_sum)
    log_l, m = np.log(l_safe), np.where(empty, 0.0, m)  # (..., bq, 1) each, kept apart for the backward
    lse = np.where(empty, -np.inf, m + log_l)
    return acc / l_safe, lse[..., 0], m[..., 0], log_l[..., 0]


def _backward_block(c, dout, D, lse_b, grads, idx, q0, q1, ws):
    """Algorithm 2's inner loop for one query block of one work item ``idx``, a (b, head) pair.

    ``- L_i`` and ``- D_i`` ride along in the GEMMs as one extra column
    (``[Q_i | -L_i] [K_j | 1]^T = Q_i K_j^T - L_i``): two fewer passes over each tile. A float mask
    adds to the scores first, as in the forward, and ``m_i`` and ``log l_i`` are taken off after: a
    large finite mask value (``-1e9``, ``finfo.min``) hiding the whole row makes ``L_i`` as large, and
    ``Q_i K_j^T - L_i + mask`` would cancel to nothing.
    """
    (dq, dk, dv), (k_oneT, v_oneT) = grads, ws.extra
    rows = (*idx, slice(q0, q1))  # this block's rows of a (B, h, T, ...) array
    k = c.k[idx]  # (..., S, d_k)
    mask = None if c.mask is None else c.mask[idx]
    float_mask = mask is not None and mask.dtype != np.bool_
    qs = c.q[rows] * c.scale  # (..., bq, d_k)
    do = dout[rows]  # (..., bq, d_v)
    qs_l = qs if float_mask else with_column(qs, -lse_b[rows][..., None])  # (..., bq, d_k + 1) = [Q_i | -L_i]
    kT = k_oneT[..., :-1, :] if float_mask else k_oneT  # K^T, or [K | 1]^T
    do_d = with_column(do, -D[rows][..., None])  # (..., bq, d_v + 1) = [dO_i | -D_i]
    dq_acc = 0  # (..., bq, d_k) after the first tile
    for k0 in range(0, _key_end(c.causal, q1, k.shape[-2]), c.block_k):
        k1 = min(k0 + c.block_k, _key_end(c.causal, q1, k.shape[-2]))
        keys = (*idx, slice(k0, k1))  # this tile's rows of a (B, h, S, ...) array
        # lines 10-11: recompute the tile's weights from the saved log-sum-exp: P = exp(S - L)
        s = _scores(qs_l, kT, mask, c.causal, q0, q1, k0, k1, ws.s, extreme=c.extreme)  # (..., bq, bk)
        if float_mask:  # (S + mask - m) - log l, as the forward made it
            s -= c.row_max[rows][..., None]
            s -= c.log_l[rows][..., None]
        p = np.exp(s, out=s)
        # line 12: dV_j += P^T dO_i
        dv[keys] += matmul_into(p.mT, do, ws.kv, k1 - k0, do.shape[-1])  # (..., bk, d_v)
        # lines 13-14: dS = P * (dO V^T - D)
        ds = matmul_into(do_d, v_oneT[..., :, k0:k1], ws.ds, q1 - q0, k1 - k0)  # (..., bq, bk)
        ds *= p
        # lines 15-16: dQ_i += dS K_j; dK_j += dS^T (Q_i / sqrt(d_k))
        dq_acc = dq_acc + ds @ k[..., k0:k1, :]  # (..., bq, d_k)
        dk[keys] += matmul_into(ds.mT, qs, ws.kv, k1 - k0, qs.shape[-1])  # (..., bk, d_k)
    dq[rows] = dq_acc * c.scale


def tiled_attention_forward(q, k, v, mask=None, *, causal=False, block_q=None, block_k=None, workers=None):
    """Scaled dot-product attention without storing the ``(B, h, T, S)`` weights.

    Args:
        q: ``(B, h, T, d_k)`` float32/float64 NumPy queries; k: ``(B, h, S, d_k)``; v: ``(B, h, S, d_v)``, same dtype
            (B = 0 gives empty outputs).
        mask: bool (True = not allowed) or float (added; cast to ``q``'s dtype), broadcastable to ``(B, h, T, S)``;
            or ``None``.
        causal: also mask key s > query t (fully masked tiles are skipped).
        block_q: queries per block (default :data:`mhattn.kernels.pool.BLOCK_Q`, 512).
        block_k: keys per tile (default from the L2 size, see above, at most S; fewer than S runs the online softmax
            across tiles).
        workers: threads (default: :func:`mhattn.kernels.pool.thread_budget`, at most B*h).

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
    _, scores_shape = check_tiled_inputs(q, k, v, mask)
    extreme = False  # a float mask with values beyond half the range (finfo.min, say): added as the plain path adds
    block_q, block_k, workers = pool.plan_blocks(q, k.shape[-2], block_q, block_k, workers)
    if min(block_q, block_k, workers) < 1:
        raise ValueError(f"tiled attention: block_q={block_q}, block_k={block_k}, workers={workers} must be positive")
    if mask is not None:  # a key hidden from every query holds no influence, whatever it holds (NaN, inf)
        mask = mask if mask.dtype in (np.bool_, q.dtype) else cast_mask(mask, q.dtype)  # in-place adds keep q's dtype
        extreme = mask.dtype != np.bool_ and bool(
            np.any(np.abs(np.where(mask == -np.inf, 0.0, mask)) > np.finfo(q.dtype).max / 2)
        )
        dead = dead_keys(mask)[..., None]  # (..., S, 1)
        k, v = np.where(dead, 0.0, k), np.where(dead, 0.0, v)  # (B, h, S, d_k), (B, h, S, d_v): fresh arrays
        mask = np.broadcast_to(mask, scores_shape)  # a view: no memory
    # each head's rows contiguous: GEMMs on strided (B, h, T, d_k) views of (B, T, d_model) run ~30% slower
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))  # (B, h, L, d), O(L d) each
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32 as float32
    out = np.empty((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)  # (B, h, T, d_v)
    lse, row_max, log_l = (np.empty(q.shape[:-1], dtype=q.dtype) for _ in range(3))  # (B, h, T) each

    def job(idx):
        item = idx  # one (b, head) pair: its (T|S, d) rows
        m = None if mask is None else mask[item]
        ws = workspace(q[item], v.shape[-1], block_q, block_k, k.shape[2])
        kT = np.ascontiguousarray(k[item].mT)  # (..., d_k, S)
        k_norm = key_norm(k[item])
        for q0 in range(0, q.shape[2], block_q):
            q1 = min(q0 + block_q, q.shape[2])
            rows = (*idx, slice(q0, q1))
            out[rows], lse[rows], row_max[rows], log_l[rows] = _forward_block(
                q[item], kT, v[item], m, extreme, causal, scale, q0, q1, block_k, ws, k_norm
            )

    pool.run_items(job, [(b, i) for b in range(q.shape[0]) for i in range(q.shape[1])], workers)
    cache = TiledAttentionCache(q, k, v, out, lse, row_max, log_l, mask, extreme, bool(causal), scale, block_q, block_k, workers)
    return out, lse, cache


def tiled_attention_backward(dout, cache: TiledAttentionCache):
    """Gradients of :func:`tiled_attention_forward`, tiles recomputed from the log-sum-exp.

    Args:
        dout: ``(B, h, T, d_v)`` upstream gradient, a NumPy array.

    Returns:
        ``(dq, dk, dv)`` with the shapes of ``q``, ``k``, ``v``; zero for masked pairs.

    Raises:
        ValueError: ``dout`` is not the output's shape.

    Source: Dao 2023 (FlashAttention-2), Algorithm 2, lines 4 and 10-16.
    """
    c = cache
    array_namespace(dout, c.q)  # one library, one device
    if dout.shape != c.out.shape:
        raise ValueError(f"tiled attention: dout has shape {dout.shape}, the output {c.out.shape}")
    # line 4: D_i = rowsum(dO_i * O_i) (= rowsum(dP * P), without P)
    dout = np.ascontiguousarray(dout)  # (B, h, T, d_v)
    D = np.sum(dout * c.out, axis=-1)  # (B, h, T)
    # an empty row has every key masked (-inf after _scores, P = 0) whatever L is: 0 keeps inf out of the GEMMs
    lse_b = np.where(c.lse == -np.inf, 0.0, c.lse)  # (B, h, T)
    dq = np.empty_like(c.q)
    dk, dv = (np.zeros(a.shape, dtype=c.q.dtype) for a in (c.k, c.v))
    one = np.ones((1, 1), dtype=c.q.dtype)
    T = c.q.shape[2]

    def job(idx):
        item = idx
        extra = tuple(np.ascontiguousarray(with_column(a[item], one).mT) for a in (c.k, c.v))  # [K | 1]^T, [V | 1]^T
        ws = workspace(c.q[item], c.v.shape[-1], c.block_q, c.block_k, c.k.shape[2])._replace(extra=extra)
        for q0 in range(0, T, c.block_q):
            _backward_block(c, dout, D, lse_b, (dq, dk, dv), idx, q0, min(q0 + c.block_q, T), ws)

    pool.run_items(job, [(b, i) for b in range(c.q.shape[0]) for i in range(c.q.shape[1])], c.workers)
    return dq, dk, dv
