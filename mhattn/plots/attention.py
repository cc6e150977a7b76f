"""Attention heatmaps, shared by the notebooks and the command line (matplotlib is optional)."""

from __future__ import annotations

import math

from mhattn.backend import to_numpy

PANEL_IN = 2.9  # side of one head's panel, inches
PAGE_IN = 8.6  # the course site's text column at a 1280 px window (688 px), at the notebooks' 80 dpi
MARGIN_IN = 1.6  # the colour bar and the query-axis labels beside the panels
LABEL_PT = (6.0, 11.0)  # smallest and largest tick-label size, points


def _label_size(n):
    """Tick-label size (points) and stride for ``n`` token labels along one panel side: the labels grow with the
    cells (0.6 of a cell of a :data:`PANEL_IN` panel, within :data:`LABEL_PT`), and only every ``stride``-th is
    drawn when the labels would otherwise be closer than their size in a panel that the layout has shrunk to 0.7
    of :data:`PANEL_IN` (titles, labels and the colour bar take the rest)."""
    cell = PANEL_IN * 72 / max(n, 1)  # points per token along an unshrunk panel
    size = min(max(0.6 * cell, LABEL_PT[0]), LABEL_PT[1])
    return size, max(1, math.ceil(size / (0.7 * cell)))


def _label_axes(ax, tokens, T, S, first_col, last_row):
    """Token names (or integer positions) on the outer panels only: x ticks on the bottom row, y ticks on the
    first column (every panel has the same axes; inner ticks also cost most of the drawing time)."""
    named = tokens is not None and len(tokens) == S
    size, stride = _label_size(max(T, S)) if named else (8.0, 1)
    if named:
        xticks = range(0, S, stride)
        yticks = range(0, T, stride)
        xlabels = [tokens[i] for i in xticks]
        ylabels = [tokens[i] for i in yticks] if len(tokens) >= T else list(yticks)
    else:
        xticks, yticks = range(0, S, max(1, S // 8)), range(0, T, max(1, T // 8))
        xlabels, ylabels = list(xticks), list(yticks)
    ax.set_xticks(xticks if last_row else [], xlabels if last_row else [], rotation=90 if named else 0, fontsize=size)
    ax.set_yticks(yticks if first_col else [], ylabels if first_col else [], fontsize=size)
    if last_row:
        ax.set_xlabel("key (attended to)", fontsize=10)
    if first_col:
        ax.set_ylabel("query (attending)", fontsize=10)


def attention_heatmaps(weights, tokens=None, title=None, ncols=None, vmax=None):
    """One heatmap per head, on one colour scale, with a colour bar.

    Args:
        weights: ``(h, T, S)`` attention weights, any float dtype (rows: queries, columns: keys).
        tokens: optional list of S token strings for the tick labels (the query axis uses the
            first T of them), sized to the cells (:func:`_label_size`: every token up to about 20 per
            panel, every few beyond); without it the ticks are integer positions.
        title: figure title, drawn above the per-head titles (constrained layout keeps them apart).
        ncols: panels per row; default as many as fit the course site's text column (:data:`PAGE_IN`), so
            that a notebook's figure is shown at its own size, not shrunk to the column.
        vmax: top of the colour scale (default: the largest weight shown); the bottom is 0.

    Returns:
        The ``matplotlib.figure.Figure`` (no pyplot state is touched).

    Raises:
        ValueError: ``weights`` is not 3-D.
    """
    from matplotlib.figure import Figure

    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must be (h, T, S), got shape {w.shape}")
    h, T, S = w.shape
    vmax = float(w.max()) if vmax is None else vmax
    ncols = min(ncols or max(1, int((PAGE_IN - MARGIN_IN) // PANEL_IN)), h)
    nrows = -(-h // ncols)
    fig = Figure(figsize=(PANEL_IN * ncols + 0.8, 0.9 * PANEL_IN * nrows + (0.5 if title else 0.2)), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        image = ax.imshow(w[i], vmin=0.0, vmax=vmax, cmap="viridis")
        ax.set_title(f"head {i}", fontsize=11)
        _label_axes(ax, tokens, T, S, first_col=i % ncols == 0, last_row=i + ncols >= h)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title)
    return fig
