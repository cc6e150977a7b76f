"""Notebook display helpers: figures as bare PNGs, so stored outputs hold no ``<Figure size ...>`` text."""

from __future__ import annotations

import base64

from mhattn.plots.png import png_bytes


def show(fig, dpi: int = 80) -> None:
    """Display a matplotlib figure as ``image/png`` only, then close it (nothing else is printed)."""
    from IPython.display import display

    png = png_bytes(fig, dpi, bbox_inches="tight", metadata={"Software": None})
    if hasattr(fig, "number"):  # a pyplot-managed figure: release it (a bare Figure holds no global state)
        import matplotlib.pyplot as plt

        plt.close(fig)
    display({"image/png": base64.b64encode(png).decode("ascii")}, raw=True)
