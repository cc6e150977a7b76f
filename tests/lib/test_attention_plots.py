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


def test_default_layout_fits_the_site_column_with_labels_a_reader_can_read():
    """Notebook 01's case, 8 heads over 12 tokens: the default figure is no wider than the course site's text column
    (688 px at a 1280 px window) at the notebooks' 80 dpi, so it is shown unshrunk, with tick labels of 10 pt or more."""
    import io

    from PIL import Image

    from mhattn.plots.png import png_bytes

    tokens = "the animal did not cross the street because it was too tired".split()
    w = np.random.default_rng(0).dirichlet(np.ones(12), size=(8, 12))  # (8, 12, 12), rows sum to 1
    fig = attention_heatmaps(w, tokens=tokens)
    width = Image.open(io.BytesIO(png_bytes(fig, 80, bbox_inches="tight"))).size[0]
    assert width <= 688, width
    first = _panels(fig)[0]
    assert [t.get_text() for t in first.get_yticklabels()] == tokens
    assert min(t.get_fontsize() for t in first.get_yticklabels()) >= 10


def test_many_tokens_are_labelled_every_few_without_overlap():
    w = np.zeros((2, 64, 64))
    tokens = [f"t{i}" for i in range(64)]
    fig = attention_heatmaps(w, tokens=tokens, ncols=2)
    fig.draw_without_rendering()  # constrained layout places the panels at draw time
    first = _panels(fig)[0]
    ticks, labels = list(first.get_yticks()), first.get_yticklabels()
    assert 8 <= len(ticks) < 64 and [t.get_text() for t in labels] == [tokens[int(i)] for i in ticks]
    size = labels[0].get_fontsize()
    bbox = first.get_window_extent()  # the panel, in display pixels: rows are bbox.height / 64 apart
    spacing_pt = (ticks[1] - ticks[0]) * bbox.height / 64 * 72 / fig.dpi
    assert spacing_pt >= size  # neighbouring labels do not overlap
