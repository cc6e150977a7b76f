"""The course site's front page (docs/index.md) maps every notebook: a row of the course-map table and an entry
of the notebooks' toctree for each notebook in notebooks/, and none for a notebook that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INDEX = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _section(heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", INDEX, flags=re.M | re.S)
    assert match, f"no '## {heading}' section in docs/index.md"
    return match.group(1)


def test_the_course_map_has_one_row_per_notebook_in_order():
    rows = re.findall(r"^\| \{doc\}`(\d\d) [^<`]+<notebooks/(\w+)>` \|", _section("The course map"), flags=re.M)
    assert len(NOTEBOOKS) >= 10
    assert [name for _, name in rows] == NOTEBOOKS
    assert all(name.startswith(number + "_") for number, name in rows), rows


def test_the_notebooks_toctree_lists_every_notebook():
    tree = re.search(r"```\{toctree\}\n:caption: Notebooks\n(.*?)```", INDEX, flags=re.S)
    assert tree, "no Notebooks toctree in docs/index.md"
    entries = [line.removeprefix("notebooks/") for line in tree.group(1).splitlines() if line.startswith("notebooks/")]
    assert entries == NOTEBOOKS
