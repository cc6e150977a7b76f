# Your exercise: write your code in this file. (Maintainers: it is generated from
# exercises_src/ex10_random_removal.py by scripts/make_exercises.py; change the source, not this copy.)
"""Exercise 10: the random-removal experiment (expected loss change when removing k of h heads).

Read exercises/README.md, section "10. The random-removal experiment", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex10``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def removal_mask(num_heads, removed):
    """The head mask that removes the heads in ``removed``.

    Args:
        num_heads: h.
        removed: iterable of distinct head indices in ``0..h-1``.

    Returns:
        ``(h,)`` float64 array: 0.0 at removed heads, 1.0 elsewhere.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex10_random_removal: not written yet")


def expected_loss_change(loss_fn, num_heads, k):
    """``E[loss(remove k random heads)] - loss(all heads)``, the expectation over every k-subset.

    Each of the ``C(h, k)`` subsets is equally likely, so compute the exact average
    by enumerating them (no sampling).

    Args:
        loss_fn: callable taking a ``(h,)`` float64 head mask (see :func:`removal_mask`),
            returning a float loss.
        num_heads: h >= 1.
        k: number of heads removed, ``0 <= k <= h``.

    Returns:
        Python ``float`` (0.0 for ``k == 0``).

    Raises:
        ValueError: ``k`` is outside ``0..h``.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex10_random_removal: not written yet")


def removal_curve(loss_fn, num_heads):
    """:func:`expected_loss_change` for every ``k = 0, 1, ..., h``.

    Returns:
        ``(h + 1,)`` float64 array; entry k is the expected loss change with k heads removed.
    """
    # YOUR CODE HERE
    raise NotImplementedError("ex10_random_removal: not written yet")
