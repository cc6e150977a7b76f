"""What the Python array API standard lacks and mhattn needs: one named helper each, one implementation per
library where the library has its own, and a correct generic one for any other namespace.

- :func:`scatter_add`: the embedding backward's unbuffered ``dW[ids] += rows`` (``np.add.at``);
- :func:`pick_last`: ``z[i, y[i]]`` per row (integer-array indexing), the loss's picked logits;
- :func:`one_hot`: the loss gradient's ``- 1`` at the targets (integer-array assignment);
- :func:`uniform`: random numbers in [0, 1) on the inputs' device, from a seeded ``numpy.random.Generator``;

and every NumPy-only speed trick of the steps, as scikit-learn's ``_array_api.py`` keeps them, each with the
standard's version beside it (NumPy's namespace itself, with ``reshape``/``sum`` as fast as the methods and a
pooled ``matmul``, is :data:`mhattn.executor.NUMPY`):

- :func:`exp_in_place`, :func:`max_last`: the softmax's exponential in the caller's buffer, a short row's maximum;
- :func:`contiguous`: rows laid out contiguously (per-head GEMMs on strided views run ~30% slower);
- tiled attention's reused tile buffers and in-place fills (:func:`workspace`, :func:`matmul_into`,
  :func:`fill_where`) and its shift-free exponentials (:func:`key_norm`, :func:`shift_free`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mhattn.backend import _library, device_of, is_numpy


def scatter_add(xp, target, index, values):
    """``target[index[n]] += values[n]`` for every n, repeated indices adding up, in place; returns ``target``.

    Args:
        target: ``(V, D)`` float; index: ``(N,)`` integer in ``[0, V)``; values: ``(N, D)``, ``target``'s dtype.
    """
    if is_numpy(xp):
        np.add.at(target, index, values)
    elif _library(target) == "cupy":
        import cupyx

        cupyx.scatter_add(target, index, values)
    elif _library(target) == "torch":
        target.index_add_(0, index, values)
    else:  # any namespace: a one-hot (N, V) matrix gathers the rows, one matmul sums them
        hot = xp.astype(index[:, None] == xp.arange(target.shape[0], device=device_of(target))[None, :], target.dtype)
        target[...] = target + hot.mT @ values  # (V, N) @ (N, D)
    return target


def pick_last(xp, z, y):
    """``z[n, y[n]]`` for each row n: ``(N,)`` from ``z`` ``(N, C)`` and integer ``y`` ``(N,)`` in ``[0, C)``."""
    if is_numpy(xp):
        return z[np.arange(z.shape[0]), y]
    return xp.squeeze(xp.take_along_axis(z, xp.astype(y, xp.int64)[:, None], axis=1), axis=1)


def one_hot(xp, y, num_classes, dtype):
    """``(N, C)`` array of ``dtype``: 1 at ``[n, y[n]]``, 0 elsewhere, on ``y``'s device."""
    return xp.astype(y[:, None] == xp.arange(num_classes, device=device_of(y))[None, :], dtype)


def uniform(xp, rng, shape, like):
    """``rng.random(shape)`` as a float64 array of ``like``'s namespace and device.

    The numbers come from the seeded ``numpy.random.Generator`` on the host, so every library draws the same
    mask for the same seed, and move once, explicitly, to ``like``'s device.
    """
    host = rng.random(shape)
    if is_numpy(xp):
        return host
    return xp.asarray(host, device=device_of(like))


def exp_in_place(xp, s):
    """``xp.exp(s)``: written into ``s`` on NumPy (``out=``: no second array), a fresh array elsewhere."""
    return xp.exp(s, out=s) if is_numpy(xp) else xp.exp(s)


# rows up to this long take the maximum by halving (max_last); longer ones NumPy's own reduction
ROW_MAX_HALVING = 64


def max_last(xp, z):
    """``xp.max(z, axis=-1, keepdims=True)``: the same values (a maximum does not depend on the order it is taken
    in; NaN wins as in ``max``), a fresh array. NumPy reduces a short last axis one row at a time, so on NumPy rows
    of up to 32 entries are laid out as columns (one copy) and reduced across the rows at once (4x faster at S = 16),
    rows of up to ``ROW_MAX_HALVING`` are halved with elementwise maxima, ``log2(S)`` passes over ever smaller arrays
    (1.5x at S = 64); longer rows, and other libraries, use ``max`` itself.
    """
    if not (is_numpy(xp) and 2 <= z.shape[-1] <= ROW_MAX_HALVING):
        return xp.max(z, axis=-1, keepdims=True)
    if z.shape[-1] <= 32:
        columns = np.ascontiguousarray(np.reshape(z, (-1, z.shape[-1])).T)  # (S, rows)
        return np.reshape(columns.max(axis=0), (*z.shape[:-1], 1))  # (..., 1)
    m = z  # (..., S)
    while m.shape[-1] > 1:
        n = m.shape[-1]
        half = n // 2
        top = xp.maximum(m[..., :half], m[..., n - half :])  # (..., n//2); an odd middle entry is kept apart
        m = top if n % 2 == 0 else xp.concat([top, m[..., half : half + 1]], axis=-1)  # (..., ceil(n/2))
    return m  # (..., 1)


def contiguous(xp, a):
    """``a`` with its rows contiguous on NumPy (one copy; GEMMs on strided views run ~30% slower); ``a`` elsewhere."""
    return xp.ascontiguousarray(a) if is_numpy(xp) else a


class Workspace(NamedTuple):
    """Tiled attention's tile buffers, made once per work item on NumPy (``None`` elsewhere: CuPy's and torch's
    memory pools make fresh arrays cheap already; fresh 1-4 MiB arrays per tile cost page faults on NumPy, ~20%)."""

    s: object  # (..., block_q, block_k) scores, then weights P
    ds: object  # (..., block_q, block_k) dP, then dS
    kv: object  # (..., block_k, d) a tile's dV or dK contribution
    extra: tuple = ()  # backward: ([K | 1]^T, [V | 1]^T), each (..., d + 1, S), contiguous


def workspace(xp, q, block_q, block_k, S):
    """Buffers for one work item ``q`` ``(..., T, d)`` on NumPy; ``Workspace(None, None, None)`` elsewhere."""
    if not is_numpy(xp):
        return Workspace(None, None, None)
    lead, bq, bk = q.shape[:-2], min(block_q, q.shape[-2]), min(block_k, S)
    return Workspace(*(xp.empty((*lead, *shape), dtype=q.dtype) for shape in ((bq, bk), (bq, bk), (bk, q.shape[-1]))))


def matmul_into(xp, a, b, buf, rows, cols):
    """``a @ b``, written into the top-left ``(rows, cols)`` corner of ``buf`` when there is one (NumPy)."""
    return a @ b if buf is None else xp.matmul(a, b, out=buf[..., :rows, :cols])


def fill_where(xp, s, where, value=-float("inf")):
    """``xp.where(where, value, s)``: in place on NumPy (``copyto``), a fresh array elsewhere."""
    if is_numpy(xp):
        xp.copyto(s, value, where=where)
        return s
    return xp.where(where, value, s)


# |score| below this needs no shift before exp (float32 max ~3.4e38, float64 ~1.8e308)
NO_SHIFT_BOUND = {"float32": 30.0, "float64": 300.0}


def key_norm(xp, k):
    """``max |k_s|`` over the keys of one work item, for :func:`shift_free`; ``None`` off NumPy."""
    return float(xp.sqrt(xp.max(xp.sum(k * k, axis=-1)))) if is_numpy(xp) else None


def shift_free(xp, qs, k_norm, mask):
    """Whether every score of the block lies within ``NO_SHIFT_BOUND``: ``|q . k| <= |q| max|k|`` (Cauchy-Schwarz).

    Then exp(S) can neither overflow nor underflow a row's largest term, so the shift by the running max (whose only
    job is that) can be 0: softmax is the same for any shift. A float mask may add any number, so it always takes
    the shift. Only on NumPy (a ``float()`` here would wait for the GPU).
    """
    if k_norm is None or (mask is not None and mask.dtype != xp.bool):
        return False
    bound = NO_SHIFT_BOUND["float32" if qs.dtype == xp.float32 else "float64"]
    return float(xp.sqrt(xp.max(xp.sum(qs * qs, axis=-1)))) * k_norm <= bound
