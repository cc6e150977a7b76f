# Generated from exercises_src/ex08_count_parameters.py by scripts/make_exercises.py: edit the source, not this file.
"""Exercise 8: counting the parameters of multi-head attention.

Read exercises/README.md, section "8. Counting parameters", first.
Run the visible tests: ``python -m pytest exercises/test_visible.py -m ex08``.
Count from the shapes; do not build a ``MultiHeadAttention`` or use ``mhattn.course.counting``.
"""

from __future__ import annotations


def count_parameters(d_model, num_heads, kdim=None, vdim=None, bias=True):
    """Learned scalars in standard multi-head attention (torch's ``nn.MultiheadAttention``).

    Head i has ``W^Q_i (d_model, d_k)``, ``W^K_i (kdim, d_k)``, ``W^V_i (vdim, d_k)``;
    ``W^O`` is ``(d_model, d_model)``; with ``bias`` there are four ``(d_model,)`` biases.

    Args:
        d_model, num_heads: ints, ``num_heads`` divides ``d_model``.
        kdim, vdim: input widths of key and value (default ``d_model``).
        bias: count the four biases.

    Returns:
        Python ``int``.

    Raises:
        ValueError: ``d_model`` is not divisible by ``num_heads``.
    """
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    kdim = d_model if kdim is None else kdim
    vdim = d_model if vdim is None else vdim
    d_k = d_model // num_heads
    per_head = (d_model + kdim + vdim) * d_k  # W^Q_i, W^K_i, W^V_i
    return int(num_heads * per_head + d_model * d_model + (4 * d_model if bias else 0))


def count_block_diagonal(d_model, num_heads):
    """Weights (no biases) when head i projects only its own d_k-wide slice of the input.

    W^Q_i, W^K_i, W^V_i are then ``(d_k, d_k)`` each, plus ``W^O (d_model, d_model)``
    (the layer notebook 01 builds with ``mhattn.course.counting.block_diagonal_mha``).

    Returns:
        Python ``int``.

    Raises:
        ValueError: ``d_model`` is not divisible by ``num_heads``.
    """
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return int(num_heads * 3 * d_k * d_k + d_model * d_model)
