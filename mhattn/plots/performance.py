"""Figures for notebooks 08 and 09: the tile grid, time and memory against T, cost against h.

Every function returns a ``matplotlib.figure.Figure`` (no pyplot state); matplotlib is optional.
"""

from __future__ import annotations

import numpy as np

SKIPPED, PARTIAL, FULL = 0, 1, 2


def tile_states(T: int, S: int, block_q: int, block_k: int, causal: bool = True):
    """Which score tiles a causal tiled pass computes: ``(ceil(T/bq), ceil(S/bk))`` int array.

    ``SKIPPED`` (0): every key is after every query of the block; ``PARTIAL`` (1): the tile
    crosses the diagonal and is masked inside; ``FULL`` (2): every pair is allowed.
    The same rule as :func:`mhattn.functional.attention_tiled._key_end`.
    """
    nq, nk = -(-T // block_q), -(-S // block_k)
    states = np.full((nq, nk), FULL, dtype=int)
    if causal:
        for i in range(nq):
            q0, q1 = i * block_q, min((i + 1) * block_q, T)
            for j in range(nk):
                k0, k1 = j * block_k, min((j + 1) * block_k, S)
                states[i, j] = SKIPPED if k0 >= q1 else (PARTIAL if k1 - 1 > q0 else FULL)
    return states


def tile_picture(T: int, S: int, block_q: int, block_k: int, causal: bool = True, title=None):
    """The ``(T, S)`` score matrix cut into ``block_q x block_k`` tiles, coloured by :func:`tile_states`."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    states = tile_states(T, S, block_q, block_k, causal)
    fig = Figure(figsize=(4.2, 4.2 * T / S + 0.4))
    ax = fig.subplots()
    colours = ["#eeeeee", "#f4a261", "#2a9d8f"]  # SKIPPED, PARTIAL, FULL
    cmap = ListedColormap(colours)
    ax.imshow(np.kron(states, np.ones((block_q, block_k)))[:T, :S], cmap=cmap, vmin=0, vmax=2, extent=(0, S, T, 0))
    for x in range(0, S + 1, block_k):
        ax.axvline(x, color="white", lw=1.5)
    for y in range(0, T + 1, block_q):
        ax.axhline(y, color="white", lw=1.5)
    if causal:
        ax.plot([0, min(T, S)], [0, min(T, S)], color="black", lw=0.8)
    counts = [int((states == s).sum()) for s in (FULL, PARTIAL, SKIPPED)]
    ax.set(xlabel="keys s (tiles of block_k)", ylabel="queries t (blocks of block_q)")
    names = ("skipped", "on the diagonal (masked inside)", "full")
    ax.legend(handles=[Patch(color=c, label=n) for c, n in zip(colours, names, strict=True)], fontsize=7,
              loc="upper right", framealpha=0.9)  # fmt: skip
    ax.set_title(title or f"full {counts[0]}, on the diagonal {counts[1]}, skipped {counts[2]}", fontsize=9)
    return fig


def scaling_figure(records, title="recorded forward and backward time"):
    """Log-log time against T for ``attention_scaling_*.json`` records, with a T^2 guide line."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 3.6))
    ax = fig.subplots()
    for rec in records:
        Ts = np.array([r["T"] for r in rec["rows"]], dtype=float)
        for key, style in (("forward_s", "o-"), ("backward_s", "s--")):
            ax.plot(Ts, [r[key] * 1e3 for r in rec["rows"]], style, label=f"{rec['backend']} {key.split('_')[0]}")
        last = rec["rows"][-1]["backward_s"] * 1e3
        ax.plot(Ts, (Ts / Ts[-1]) ** 2 * last, ":", color="gray", label=f"T^2 slope ({rec['backend']})")
    ax.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="milliseconds", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def tiled_record_figure(record):
    """Two panels from ``attention_tiled_numpy.json``: time against torch, peak memory tiled against plain."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.4))
    ax_t, ax_m = fig.subplots(1, 2)
    speed = record["speed"]
    labels = [f"B {r['B']}, T {r['T']}" for r in speed]
    x = np.arange(len(speed))
    for i, name in enumerate(("tiled", "plain", "torch")):
        ax_t.bar(x + (i - 1) * 0.27, [r[f"{name}_s"] * 1e3 for r in speed], width=0.27, label=name)
    ax_t.set_xticks(x, labels, fontsize=8)
    ax_t.set(ylabel="forward + backward, ms", title="time (median)")
    ax_t.legend(fontsize=8)
    mem = record["memory"]
    Ts = [r["T"] for r in mem]
    ax_m.plot(Ts, [r["tiled_bytes"] / 2**20 for r in mem], "o-", label="tiled")
    plain = [(r["T"], r["plain_bytes"] / 2**20) for r in mem if r["plain_bytes"]]
    ax_m.plot(*zip(*plain, strict=True), "s--", label="plain")
    ax_m.set(xscale="log", yscale="log", xlabel="T (B = 1)", ylabel="peak traced MiB", title="memory of forward + backward")
    ax_m.set_xticks(Ts, [str(T) for T in Ts])
    ax_m.minorticks_off()
    ax_m.legend(fontsize=8)
    fig.tight_layout()
    return fig


def heads_cost_figure(rows):
    """Time and multiply-adds against h at fixed d_model (rows: h, time_s, madds)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 3.2))
    ax = fig.subplots()
    hs = [r["h"] for r in rows]
    ax.plot(hs, [r["time_s"] / rows[0]["time_s"] for r in rows], "o-", label="measured time / time at h = 1")
    ax.plot(hs, [r["madds"] / rows[0]["madds"] for r in rows], "s--", label="multiply-adds / those at h = 1")
    ax.set(xscale="log", xlabel="heads h (d_model fixed)", ylabel="relative to h = 1", ylim=(0, 2.5))
    ax.set_xticks(hs, [str(h) for h in hs])
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
