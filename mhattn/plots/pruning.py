"""Figures of the pruning report (matplotlib), shared by ``mhattn prune`` and the notebooks."""

from __future__ import annotations

import numpy as np


def _figure(**kwargs):
    """A ``matplotlib.figure.Figure`` outside pyplot: no global backend or figure registry is touched."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def importance_bars(reports, title="Head importance and single-head ablation"):
    """Bars of normalised importance (left) and zero-ablation loss change (right) per head, per model."""
    fig = _figure(figsize=(10, 2.6 * len(reports)))
    axes = fig.subplots(len(reports), 2, squeeze=False)
    for row, (name, r) in enumerate(reports.items()):
        imp, dl = np.ravel(r["importance"]), np.ravel(r["ablation_zero_dloss"])
        axes[row, 0].bar(range(len(imp)), imp, color="tab:blue")
        axes[row, 0].set_ylabel(name)
        axes[row, 0].set_title("Michel importance (l2-normalised)")
        axes[row, 1].bar(range(len(dl)), dl, color="tab:red")
        axes[row, 1].set_title("loss change when ablated alone (nats)")
        for ax in axes[row]:
            ax.set_xlabel("head (layer-major)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def random_removal_hist(reports, bins=30):
    """Histogram of loss changes over the random removals, one colour per model."""
    fig = _figure(figsize=(7, 3.5))
    ax = fig.subplots()
    for name, r in reports.items():
        dl = np.asarray(r["random"]["dloss"])
        ax.hist(dl, bins=bins, alpha=0.6, label=f"{name} (median {np.median(dl):+.2f})")
    ax.axvline(0.0, color="k", lw=0.8)
    n = next(iter(reports.values()))["settings"]["n_remove"]
    ax.set_xlabel(f"loss change after removing {n} random heads (nats)")
    ax.set_ylabel("subsets")
    ax.legend()
    fig.tight_layout()
    return fig


def pruning_curves(reports):
    """Loss against the fraction of heads removed: by importance (re-scored) and at random."""
    fig = _figure(figsize=(7, 3.5))
    ax = fig.subplots()
    for name, r in reports.items():
        c = r["curve"]
        line = ax.plot(c["fraction_removed"], c["importance_loss"], marker="o", label=f"{name}: by importance")[0]
        ax.plot(c["fraction_removed"], c["random_loss"], ls="--", color=line.get_color(), label=f"{name}: random")
    ax.set_xlabel("fraction of heads removed")
    ax.set_ylabel("loss (nats)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def similarity_heatmaps(reports, key="output"):
    """Cosine similarity between heads (layer 0), one panel per model."""
    fig = _figure(figsize=(4 * len(reports), 3.6))
    axes = fig.subplots(1, len(reports), squeeze=False)
    for ax, (name, r) in zip(axes[0], reports.items(), strict=True):
        im = ax.imshow(np.asarray(r["similarity"][key][0]), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_title(f"{name}: {key} similarity")
        ax.set_xlabel("head")
        ax.set_ylabel("head")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
    return fig


def save_all(reports, out_dir):
    """Write every figure as PNG into ``out_dir``; returns the paths."""
    from pathlib import Path

    out_dir = Path(out_dir)
    paths = []
    for fname, fn in (("importance.png", importance_bars), ("random_removal_hist.png", random_removal_hist),
                      ("pruning_curves.png", pruning_curves), ("similarity.png", similarity_heatmaps)):  # fmt: skip
        fig = fn(reports)
        fig.savefig(out_dir / fname, dpi=100)
        paths.append(out_dir / fname)
    return paths
