"""Attention heatmaps, shared by the notebooks and the command line (matplotlib is optional)."""

from __future__ import annotations

from mhattn.backend import to_numpy


def _label_axes(ax, tokens, T, S, first_col, last_row):
    """Token names (or integer positions) on the outer panels only: x ticks on the bottom row, y ticks on the
    first column (every panel has the same axes; inner ticks also cost most of the drawing time)."""
    named = tokens is not None and len(tokens) == S
    if named:
        xticks, xlabels = range(S), tokens
        yticks, ylabels = range(T), tokens[:T] if len(tokens) >= T else range(T)
    else:
        xticks, yticks = range(0, S, max(1, S // 8)), range(0, T, max(1, T // 8))
        xlabels, ylabels = list(xticks), list(yticks)
    ax.set_xticks(xticks if last_row else [], xlabels if last_row else [], rotation=90 if named else 0, fontsize=6)
    ax.set_yticks(yticks if first_col else [], ylabels if first_col else [], fontsize=6)
    if last_row:
        ax.set_xlabel("key (attended to)", fontsize=8)
    if first_col:
        ax.set_ylabel("query (attending)", fontsize=8)


def attention_heatmaps(weights, tokens=None, title=None, ncols=4, vmax=None):
    """One heatmap per head, on one colour scale, with a colour bar.

    Args:
        weights: ``(h, T, S)`` attention weights, any float dtype (rows: queries, columns: keys).
        tokens: optional list of S token strings for the tick labels (the query axis uses the
            first T of them); without it the ticks are integer positions.
        title: figure title, drawn above the per-head titles (constrained layout keeps them apart).
        ncols: panels per row.
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
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig = Figure(figsize=(2.9 * ncols + 0.8, 2.9 * nrows + (0.5 if title else 0.2)), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        image = ax.imshow(w[i], vmin=0.0, vmax=vmax, cmap="viridis")
        ax.set_title(f"head {i}", fontsize=9)
        _label_axes(ax, tokens, T, S, first_col=i % ncols == 0, last_row=i + ncols >= h)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title)
    return fig
