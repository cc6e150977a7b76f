"""Write the course notebooks 00, 01, 02, 03, 06 and 07 (without outputs) from the cells below.

    python scripts/make_notebooks.py [06 ...]       # all six, or only those named
    jupyter nbconvert --to notebook --execute --inplace notebooks/0[012367]_*.ipynb
    python -m pytest notebooks/                      # nbval: stored outputs must match a re-run

The maths lives in mhattn; the notebooks only explain, call and plot it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebook_cells import NOTEBOOKS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def build(cells):
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [new_markdown_cell(text.strip()) if kind == "md" else new_code_cell(text.strip()) for kind, text in cells]
    return nb


def main() -> int:
    only = sys.argv[1:]
    for name, cells in NOTEBOOKS.items():
        if only and not any(name.startswith(o) for o in only):
            continue
        path = ROOT / "notebooks" / f"{name}.ipynb"
        nbformat.write(build(cells), path)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
