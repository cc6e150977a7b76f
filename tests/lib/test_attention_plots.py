"""The attention heatmaps label the outer panels only: x ticks on the bottom row, y ticks on the first column."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from mhattn.plots.attention import attention_heatmaps  # noqa: E402


def _panels(fig):
    """The head panels (the colour bar's axes excluded), in the order they were made."""
    return [ax for ax in fig.axes if ax.get_title().startswith("head ")]


def test_tokens_label_the_outer_panels_only():
    w = np.random.default_rng(0).random((5, 3, 4))  # 5 heads, 3 queries, 4 keys: rows of 3 panels, one left empty
    fig = attention_heatmaps(w, tokens=["a", "b", "c", "d"], ncols=3)
    panels = _panels(fig)
    assert [ax.get_title() for ax in panels] == [f"head {i}" for i in range(5)]
    for i, ax in enumerate(panels):
        bottom, left = i + 3 >= 5, i % 3 == 0  # heads 2, 3, 4 have no panel below them
        xs = [t.get_text() for t in ax.get_xticklabels()]
        ys = [t.get_text() for t in ax.get_yticklabels()]
        assert xs == (["a", "b", "c", "d"] if bottom else []), (i, xs)
        assert ys == (["a", "b", "c"] if left else []), (i, ys)
        assert len(ax.get_xticks()) == (4 if bottom else 0) and len(ax.get_yticks()) == (3 if left else 0), i
        assert (ax.get_xlabel() != "") == bottom and (ax.get_ylabel() != "") == left


def test_positions_without_tokens():
    fig = attention_heatmaps(np.zeros((2, 16, 32)), ncols=2)
    first = _panels(fig)[0]  # bottom row and first column at once (one row of two)
    assert list(first.get_xticks()) == list(range(0, 32, 4)) and list(first.get_yticks()) == list(range(0, 16, 2))
    assert list(_panels(fig)[1].get_yticks()) == []


def test_bad_shape():
    with pytest.raises(ValueError, match=r"\(h, T, S\)"):
        attention_heatmaps(np.zeros((3, 3)))
