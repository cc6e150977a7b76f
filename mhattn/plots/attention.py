"""Matplotlib figures shared by the notebooks and the command line (matplotlib is optional)."""

from __future__ import annotations

from mhattn.backend import to_numpy


def attention_heatmaps(weights, tokens=None, title=None, ncols=4, vmax=None):
    """One heatmap per head.

    Args:
        weights: ``(h, T, S)`` attention weights (rows: queries, columns: keys).
        tokens: optional list of S token strings for the axis labels (used when T == S).
        vmax: top of the colour scale (default: the largest weight shown), bottom is 0.

    Returns:
        The matplotlib ``Figure``.
    """
    from matplotlib.figure import Figure

    w = to_numpy(weights)
    h = w.shape[0]
    vmax = float(w.max()) if vmax is None else vmax
    nrows = -(-h // ncols)
    fig = Figure(figsize=(3.2 * min(ncols, h), 3.2 * nrows))
    axes = fig.subplots(nrows, min(ncols, h), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        ax.imshow(w[i], vmin=0.0, vmax=vmax, cmap="viridis")
        ax.set_title(f"head {i}", fontsize=9)
        if tokens is not None and len(tokens) == w.shape[2]:
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
        else:
            ax.set_xticks([])
            ax.set_yticks([])
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
