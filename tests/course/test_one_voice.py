"""One voice: the answer box's verdict lines are the same wherever the course states them (issue 32's item 7).

``mhattn prune`` and ``report.md`` build the box with :func:`mhattn.heads.main_report.model_entry`; notebook 07 prints
it from the shipped data; ``docs/prune_report.md`` (the site), the README and the explorer's page quote it. Each must
hold the lines the code writes from ``mhattn/data/sixes.json`` now, word for word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mhattn.heads.box import model_box
from mhattn.heads.main_report import model_entry, shipped
from mhattn.heads.reasons import model_reasons

ROOT = Path(__file__).resolve().parents[2]
VERDICT = ("Answer:", "Supported,", "Not supported,")


def verdict_lines(text: str) -> list[str]:
    """The box's verdict lines in ``text`` (a leading Markdown quote or an indentation is not part of them)."""
    lines = (line.strip().removeprefix("> ").strip() for line in text.splitlines())
    return [line for line in lines if line.startswith(VERDICT)]


@pytest.fixture(scope="module")
def deep_box() -> str:
    deep = shipped()["text-deep12"]
    rows = {seed: model_reasons(m) for seed, m in deep.items()}
    return model_box("text-deep12", deep["0"], rows["0"], [rows[s] for s in rows if s != "0"])


def test_the_command_prints_the_box_of_the_shipped_data(deep_box):
    """``mhattn prune`` on the shipped checkpoint with the shipped settings: the same box, seed ranges included."""
    assert model_entry("text-deep12", shipped()["text-deep12"]["0"])["box"] == deep_box
    assert len(verdict_lines(deep_box)) == 5  # the answer, then four reasons


def test_the_site_page_holds_the_whole_box(deep_box):
    assert deep_box in (ROOT / "docs" / "prune_report.md").read_text(encoding="utf-8")


def test_notebook_07_prints_the_same_verdicts(deep_box):
    nb = json.loads((ROOT / "notebooks" / "07_test_yourself_pruning.ipynb").read_text(encoding="utf-8"))
    printed = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert verdict_lines(deep_box) == verdict_lines(printed)[: len(verdict_lines(deep_box))]


def test_the_readme_quotes_the_answer(deep_box):
    readme = verdict_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    assert readme == [verdict_lines(deep_box)[0]]


def test_the_toys_answers_are_quoted_where_the_toys_are_shown():
    answers = [verdict_lines(model_box(n, m, model_reasons(m)))[0] for n, m in shipped()["toys"].items()]
    for page in ("explorer.md", "prune_report.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert all(a in text for a in answers), page
