"""The notebook sources: every jupytext pair in sync, every notebook opening with objectives and ending with exercises.

The ``.py`` (jupytext percent format) is the source a person edits; the ``.ipynb`` beside it keeps the outputs
that nbval checks. A pair drifts when one is edited and ``jupytext --sync`` is not run: the test renders the
``.ipynb``'s cells as percent text and compares them with the ``.py`` (the ``jupytext_version`` header line may
differ between machines and is ignored).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
IDS = [p.stem for p in SOURCES]


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "jupytext_version:" not in line]


def _markdown_cells(path: Path) -> tuple[list[tuple[int, str]], int]:
    """((position, source) of each markdown cell, number of cells) of the notebook read from its ``.py``."""
    nb = jupytext.read(path)
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"], len(nb.cells)


def test_there_are_notebooks():
    assert len(SOURCES) >= 8, f"expected the course notebooks in {NOTEBOOKS}, found {IDS}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_pair_in_sync(source):
    ipynb = source.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{source.name} has no paired {ipynb.name}: run `jupytext --sync {source}`"
    rendered = jupytext.writes(jupytext.read(ipynb), fmt="py:percent")
    want, got = _lines(source.read_text(encoding="utf-8")), _lines(rendered)
    diff = "\n".join(list(difflib.unified_diff(want, got, f"{source.name}", f"{ipynb.name} (rendered)", lineterm=""))[:40])
    assert want == got, f"{source.name} and {ipynb.name} differ: run `jupytext --sync {source}`, then re-execute\n{diff}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_opens_with_objectives(source):
    cells, _ = _markdown_cells(source)
    assert cells and cells[0][0] == 0, f"{source.name}: the first cell must be markdown (title and objectives)"
    first = cells[0][1]
    assert re.search(r"objectives|after this notebook you can", first, re.IGNORECASE), (
        f"{source.name}: the first cell states no learning objectives ('Learning objectives' or 'After this notebook you can')"
    )
    assert re.search(r"^\s*(\d+\.|[-*])\s+\S", first, re.MULTILINE), f"{source.name}: the objectives are not a list"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_ends_with_exercise_pointers(source):
    cells, n = _markdown_cells(source)
    assert cells and cells[-1][0] == n - 1, f"{source.name}: the last cell must be markdown (pointers to the exercises)"
    last = cells[-1][1]
    assert re.search(r"^(#+ .*|\*\*)Exercises", last, re.MULTILINE), f"{source.name}: the last cell has no 'Exercises' heading"
    assert re.search(r"\bex\d\d_\w+\.py|exercises/", last), f"{source.name}: the last cell names no exercise file"
