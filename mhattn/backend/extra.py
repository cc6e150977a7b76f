"""What the Python array API standard lacks and mhattn needs: one named helper each, one implementation per
library where the library has its own, and a correct generic one for any other namespace.

- :func:`scatter_add`: the embedding backward's unbuffered ``dW[ids] += rows`` (``np.add.at``);
- :func:`pick_last`: ``z[i, y[i]]`` per row (integer-array indexing), the loss's picked logits;
- :func:`one_hot`: the loss gradient's ``- 1`` at the targets (integer-array assignment);
- :func:`uniform`: random numbers in [0, 1) on the inputs' device, from a seeded ``numpy.random.Generator``;

as scikit-learn's ``_array_api.py`` keeps them. Speed tricks are not here: they are the engine's
(:mod:`mhattn.kernels`), beside the reference steps, never inside them.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend.arrays import asarray, device_of, is_numpy
from mhattn.backend.host import library_of


def scatter_add(xp, target, index, values):
    """``target[index[n]] += values[n]`` for every n, repeated indices adding up, in place; returns ``target``.

    Args:
        target: ``(V, D)`` float; index: ``(N,)`` integer in ``[0, V)``; values: ``(N, D)``, ``target``'s dtype.
    """
    if is_numpy(xp):
        np.add.at(target, index, values)
    elif library_of(target) == "cupy":
        import cupyx

        cupyx.scatter_add(target, index, values)
    elif library_of(target) == "torch":
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
    return asarray(rng.random(shape), like=like)
