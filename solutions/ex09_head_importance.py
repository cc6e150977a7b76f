# Generated from exercises_src/ex09_head_importance.py by scripts/make_exercises.py: edit the source, not this file.
"""Exercise 9: head importance from head-mask gradients (Michel et al. 2019, §4.1 "Head Importance Score").

Read exercises/README.md, section "9. Head importance", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex09``.
"""

from __future__ import annotations

import numpy as np


def head_mask_gradient(heads, dconcat):
    """``dL/dxi`` for a head mask ``xi`` of shape ``(B, h)`` that scales each head's output.

    The forward was ``concat = Concat(xi[b, i] * heads[b, i])``; at ``xi = 1`` the
    gradient is ``dL/dxi[b, i] = sum over t, j of heads[b, i, t, j] * dconcat[b, t, i*d_k + j]``.

    Args:
        heads: ``(B, h, T, d_k)`` float32/float64 per-head attention outputs (before the concat).
        dconcat: ``(B, T, h*d_k)`` same dtype, the gradient at the concat.
    Neither input may be modified.

    Returns:
        ``(B, h)`` array of ``heads``' dtype.
    """
    B, h, T, d_k = heads.shape
    dheads = dconcat.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
    return (heads * dheads).sum(axis=(2, 3))  # (B, h)


def head_importance(heads, dconcat, normalize=True):
    """Importance ``I_i = mean over the batch of |dL/dxi[b, i]|`` (Michel et al. 2019, §4.1: ``I_h = E_x |dL(x)/dxi_h|``).

    Args:
        heads, dconcat: as in :func:`head_mask_gradient`.
        normalize: divide by the l2 norm over the layer's heads (Michel et al. 2019, §4.1), so the
            result has norm 1 (leave an all-zero result as zeros).

    Returns:
        ``(h,)`` array of ``heads``' dtype, every entry >= 0.
    """
    imp = np.abs(head_mask_gradient(heads, dconcat)).mean(axis=0)  # (h,)
    if normalize:
        norm = np.sqrt((imp**2).sum())
        imp = imp / norm if norm > 0 else imp
    return imp.astype(heads.dtype)
