"""The grader's own reference for exercise 10 (exercises 1-9 compare with mhattn itself).

The random-removal experiment: remove k of h heads chosen uniformly at random and
ask how much the loss grows on average. With all ``C(h, k)`` subsets equally likely
the expectation is a finite average, computed exactly here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def removal_mask(num_heads: int, removed) -> np.ndarray:
    """``(h,)`` float64 head mask ξ: 0 at the removed heads, 1 elsewhere."""
    mask = np.ones(num_heads)
    mask[list(removed)] = 0.0
    return mask


def expected_loss_change(loss_fn, num_heads: int, k: int) -> float:
    """Exact ``E_{|R|=k}[loss(ξ_R)] - loss(1)`` over every k-subset R of the heads.

    Raises:
        ValueError: ``k`` outside ``0..num_heads``.
    """
    if not 0 <= k <= num_heads:
        raise ValueError(f"k={k} must be between 0 and num_heads={num_heads}")
    base = float(loss_fn(removal_mask(num_heads, ())))
    changes = [float(loss_fn(removal_mask(num_heads, r))) - base for r in itertools.combinations(range(num_heads), k)]
    return math.fsum(changes) / math.comb(num_heads, k)


def removal_curve(loss_fn, num_heads: int) -> np.ndarray:
    """``(h + 1,)`` float64: :func:`expected_loss_change` for k = 0..h."""
    return np.array([expected_loss_change(loss_fn, num_heads, k) for k in range(num_heads + 1)])
