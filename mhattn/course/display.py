"""Notebook display helpers: figures as bare PNGs, so stored outputs hold no ``<Figure size ...>`` text."""

from __future__ import annotations

import base64
import io


def show(fig, dpi: int = 80) -> None:
    """Display a matplotlib figure as ``image/png`` only, then close it (nothing else is printed)."""
    from IPython.display import display

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    if hasattr(fig, "number"):  # a pyplot-managed figure: release it (a bare Figure holds no global state)
        import matplotlib.pyplot as plt

        plt.close(fig)
    display({"image/png": base64.b64encode(buf.getvalue()).decode("ascii")}, raw=True)
