"""A figure as PNG bytes, for the command's files and the notebooks' bare image outputs."""

from __future__ import annotations

import io


def png_bytes(fig, dpi: int, **savefig_kw) -> bytes:
    """``fig`` (a ``matplotlib.figure.Figure``) rendered as PNG at ``dpi`` dots per inch; ``savefig_kw`` go
    to ``Figure.savefig`` (e.g. ``bbox_inches``, ``metadata``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **savefig_kw)
    return buf.getvalue()
