"""Figures of the pruning experiments (matplotlib), shared by ``mhattn prune`` and the notebooks.

:func:`sixes_figure` is the main job's (``mhattn prune``): each layer's random sixes against the naive reading and
its complement pairs against the whole layer. The others draw what they are handed, ``{model name: measurements}`` (a
report's ``details``; the histogram also the report's expectations,
:meth:`mhattn.heads.report.ModelReport.figure_data`), and compute nothing of their own."""

from __future__ import annotations

import numpy as np

from mhattn.plots.png import png_bytes


def _figure(**kwargs):
    """A ``matplotlib.figure.Figure`` outside pyplot: no global backend or figure registry is touched."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _head_ticks(ax, n, axis="x"):
    """One integer tick per head (every other one past 16 heads)."""
    ticks = np.arange(0, n, 1 if n <= 16 else 2)
    (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks)


def importance_bars(reports, title="Head importance and single-head ablation"):
    """Bars of normalised importance (left) and zero-ablation loss change (right) per head, per model."""
    fig = _figure(figsize=(10, 2.8 * len(reports)), layout="constrained")
    axes = fig.subplots(len(reports), 2, squeeze=False)
    for row, (name, r) in enumerate(reports.items()):
        imp, dl = np.ravel(r["importance"]), np.ravel(r["ablation_zero_dloss"])
        axes[row, 0].bar(range(len(imp)), imp, color="tab:blue")
        axes[row, 0].set_ylabel(name)
        axes[row, 0].set_title("Michel importance (l2-normalised)", fontsize=10)
        axes[row, 1].bar(range(len(dl)), dl, color="tab:red")
        axes[row, 1].set_title("loss change when ablated alone (nats)", fontsize=10)
        for ax in axes[row]:
            ax.set_xlabel("head (layer-major)")
            _head_ticks(ax, len(imp))
    fig.suptitle(title)
    return fig


def random_removal_hist(reports, bins=30, xmax=None):
    """Histogram of loss changes over the random removals, one panel per model, with both expectations.

    Args:
        reports: model name -> its measurements (``random.dloss``, ``settings.n_remove``) and the expected loss
            changes the report computed, ``additive`` and ``naive`` (nats; ``naive`` may be absent or ``None``):
            :meth:`mhattn.heads.report.ModelReport.figure_data`.
        xmax: upper end of the x range (nats), the same for every panel; ``None`` = each panel's
            largest value or expectation. Values beyond it are piled into the last bin, which is hatched and labelled
            with their count, so nothing is clipped silently.
    """
    fig = _figure(figsize=(7, 2.6 * len(reports)), layout="constrained")
    axes = fig.subplots(len(reports), 1, squeeze=False)[:, 0]
    for ax, (name, r) in zip(axes, reports.items(), strict=True):
        dl = np.asarray(r["random"]["dloss"])
        add, naive = r["additive"], r.get("naive")
        hi = max(float(dl.max()), add, naive or 0.0) if xmax is None else float(xmax)
        edges = np.linspace(min(0.0, float(dl.min())), hi, bins + 1)
        beyond = int((dl > hi).sum())
        _, _, patches = ax.hist(np.minimum(dl, hi), bins=edges, color="tab:gray", label=f"median {np.median(dl):+.3f}")
        if beyond:
            patches[-1].set_hatch("//")
            patches[-1].set_label(f"{beyond} beyond {hi:.2f} (piled here)")
        ax.axvline(add, color="tab:blue", ls="--", label=f"additive (k/h) sum of singles {add:+.3f}")
        if naive is not None and naive <= hi:
            ax.axvline(naive, color="tab:red", ls=":", label=f"naive k/h of no-heads loss {naive:+.3f}")
        elif naive is not None:
            ax.plot([], [], color="tab:red", ls=":", label=f"naive {naive:+.3f} (beyond the axis)")
        ax.axvline(0.0, color="k", lw=0.8)
        ax.set_title(name, fontsize=10)
        ax.set_ylabel("subsets")
        ax.legend(fontsize=8)
    n = next(iter(reports.values()))["settings"]["n_remove"]
    axes[-1].set_xlabel(f"loss change after removing {n} random heads (nats)")
    return fig


def pruning_curves(reports):
    """Loss against the fraction of heads removed: by importance (re-scored), at random, and the naive straight line."""
    fig = _figure(figsize=(7, 3.5), layout="constrained")
    ax = fig.subplots()
    for name, r in reports.items():
        c = r["curve"]
        f = c["fraction_removed"]
        line = ax.plot(f, c["importance_loss"], marker="o", label=f"{name}: by importance")[0]
        ax.plot(f, c["random_loss"], ls="--", color=line.get_color(), label=f"{name}: random")
        ax.plot([f[0], f[-1]], [c["random_loss"][0], c["random_loss"][-1]], ls=":", color=line.get_color(),
                label=f"{name}: naive straight line")  # fmt: skip
    ax.set_xlabel("fraction of heads removed")
    ax.set_ylabel("loss (nats)")
    ax.legend(fontsize=8)
    return fig


def similarity_heatmaps(reports, key="output"):
    """Cosine similarity between heads (layer 0), one panel per model."""
    fig = _figure(figsize=(4.2 * len(reports), 3.6), layout="constrained")
    axes = fig.subplots(1, len(reports), squeeze=False)
    for ax, (name, r) in zip(axes[0], reports.items(), strict=True):
        m = np.asarray(r["similarity"][key][0])
        im = ax.imshow(m, vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_title(f"{name}: {key} similarity", fontsize=10)
        ax.set_xlabel("head")
        ax.set_ylabel("head")
        _head_ticks(ax, len(m), "x")
        _head_ticks(ax, len(m), "y")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="cosine similarity")
    return fig


# the report's figures: file name -> function of ``{model: details}``; ``mhattn prune`` draws them before the
# gate experiments finish, so none may read ``details["gates"]`` (tests/course/test_prune_cli.py checks)
FIGURES = {"importance.png": importance_bars, "random_removal_hist.png": random_removal_hist,
           "pruning_curves.png": pruning_curves, "similarity.png": similarity_heatmaps}  # fmt: skip


def figure_pngs(reports, names=tuple(FIGURES)):
    """The figures ``names`` (keys of ``FIGURES``) of ``reports`` (model name -> ``ModelReport.figure_data()``)
    as ``{file name: PNG bytes}``."""
    return {name: png_bytes(FIGURES[name](reports), dpi=100) for name in names}


def sixes_figure(name, measurement, rows):
    """Per layer (one row each): the histogram of a six's loss change with the median's 95% interval (shaded) and
    the naive reading (left); the histogram of (Δ(S) + Δ(S')) / Δ(all) over complement pairs with 1 marked (right).

    Args:
        name: the model's label; measurement: :func:`mhattn.heads.sixes.measure_model`'s result; rows: its
            :func:`mhattn.heads.reasons.model_reasons`.
    """
    fig = _figure(figsize=(9, 2.2 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), 2, squeeze=False)
    for (left, right), layer, r in zip(axes, measurement["layers"], rows, strict=True):
        d = np.asarray(layer["sixes"]["total"]["dloss"])
        left.hist(d, bins=30, color="tab:gray")
        left.axvspan(*r.six_dloss.ci, color="tab:blue", alpha=0.3, label=f"median {r.six_dloss.median:+.3f} (95% interval)")
        left.axvline(r.naive_dloss, color="tab:red", ls=":", label=f"naive {r.naive_dloss:+.3f}")
        left.set_ylabel(f"layer {r.layer}\nsixes")
        left.legend(fontsize=7, loc="upper right")
        if r.pair_ratio is not None:
            whole = layer["all"]["total"]["dloss"]
            right.hist((d[0::2] + d[1::2]) / whole, bins=20, color="tab:green")
            right.axvline(1.0, color="k", lw=0.8)
        right.set_ylabel("pairs")
    axes[-1, 0].set_xlabel("loss change when six heads of the layer are removed (nats)")
    axes[-1, 1].set_xlabel("(S + complement) / all twelve")
    for ax in axes[:, 1]:
        ax.yaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(name)
    return fig
