"""The exercise texts point where they say: every section a docstring names exists in the README, and the
README keeps formula-level hints in collapsed blocks (a learner opens them on purpose)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "exercises_src"
EXERCISES = sorted(SRC.glob("ex[0-9][0-9]_*.py"))
README = (SRC / "README.md").read_text(encoding="utf-8")
HEADINGS = re.findall(r"^## (.+)$", README, re.MULTILINE)


@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_docstring_names_an_existing_readme_section(path):
    text = path.read_text(encoding="utf-8")
    named = re.findall(r'section "([^"]+)"', text)
    assert named, f"{path.name} names no README section"
    for title in named:
        assert any(h.startswith(title) for h in HEADINGS), f"{path.name}: README has no section {title!r}; it has {HEADINGS}"


@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_every_exercise_has_a_section(path):
    number = int(path.name[2:4])
    assert any(h.startswith(f"{number}. ") and path.name in h for h in HEADINGS), f"README has no section for {path.name}"


def test_formulas_sit_in_collapsed_hints():
    """The answers' formulas appear only inside <details> blocks, never in the open text."""
    open_text = re.sub(r"<details>.*?</details>", "", README, flags=re.DOTALL)
    formulas = (
        "p * (dprobs - sum(dprobs * p))",
        "a transpose of axes 1 and 2",
        "4 d_model^2 + 4 d_model",
        "h * 3 * (d_model/h)^2",
    )
    for formula in formulas:
        assert formula in README, f"the hint {formula!r} went missing"
        assert formula not in open_text, f"{formula!r} is in the open text: move it into a <details> hint"
