"""Inverted dropout, Srivastava et al. 2014; used on sub-layer outputs (Vaswani §5.4).

Kept entries are scaled by ``1/(1-p)`` during training so nothing changes at test time.
The mask is drawn on the host from a seeded ``numpy.random.Generator`` and moved explicitly to the
input's device (:func:`mhattn.backend.uniform`), so the same seed drops the same entries on every library.
"""

from __future__ import annotations

from typing import NamedTuple

from mhattn.backend import array_namespace, read_only, uniform


class DropoutCache(NamedTuple):
    keep: object  # same shape as x: 0 or 1/(1-p); None when nothing was dropped


def dropout_forward(x, p, rng=None):
    """Zero each entry with probability ``p`` and rescale the rest.

    Args:
        x: any float array-API array (NumPy, CuPy, torch, array-api-strict).
        p: drop probability in [0, 1); 0 returns ``x`` unchanged.
        rng: ``numpy.random.Generator``, needed when ``p > 0``.

    Returns:
        ``(out, cache)``, ``out`` shaped like ``x``, of its dtype, namespace and device: a fresh array
        when ``p > 0``; with ``p = 0`` a read-only view of ``x`` on NumPy (a copy elsewhere), never ``x`` itself.

    Raises:
        ValueError: ``p`` outside [0, 1), or ``p > 0`` without ``rng``.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if p == 0.0:
        return read_only(x), DropoutCache(None)
    if rng is None:
        raise ValueError("dropout: p > 0 needs rng, a numpy.random.Generator")
    xp = array_namespace(x)
    # 1. keep-mask with the inverted-dropout scale: 0 or 1/(1-p)
    keep = xp.astype(uniform(xp, rng, x.shape, x) >= p, x.dtype) * (1.0 / (1.0 - p))
    return x * keep, DropoutCache(keep)


def dropout_backward(dout, cache: DropoutCache):
    """Step 1 was ``x * keep``: the gradient flows through the kept entries, equally rescaled."""
    return dout if cache.keep is None else dout * cache.keep
