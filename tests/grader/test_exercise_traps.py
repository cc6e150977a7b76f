"""Each trap that exercises/README.md names gets its own hint from the grader, not just "wrong values".

The README's **Trap.** / **Traps.** paragraph of each exercise lists its traps, separated by ";". Each trap is
matched by a phrase below to a known-wrong submission (tests/grader_attacks/wrong.py) that falls into it, and
grading that submission must give the hint's words in the exercise's reason, after the comparison (the part a
hint takes: ``...; <hint>``). A trap added to the README without a hint here fails the first test.
A few hints beyond the README's traps: the whole reason of a missing transpose, a softmax over the queries and an
unstable softmax, and no layout hint for a value a little off everywhere.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mhattn.grade import grade

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS  # noqa: E402
from grader_attacks.cases import WRONG  # noqa: E402
from grader_attacks.edits import Edit, apply  # noqa: E402

README = (ROOT / "exercises_src" / "README.md").read_text(encoding="utf-8")
CASES = {c.name: c for c in WRONG}
TRAPS = {  # (exercise marker, words of the trap in the README): (wrong submission, words of its hint)
    ("ex01", "A reshape straight to"): ("split_no_transpose", "in the wrong places"),
    ("ex02", "Normalising over the query axis"): ("softmax_query_axis", "this is a softmax over axis -2"),
    ("ex02", "keeping only the"): ("softmax_backward_diagonal", "keeps only the diagonal of the softmax Jacobian"),
    ("ex03", "Dividing by the square root of d_model"): ("scale_sqrt_d_model", "1/sqrt(h * d_k) = 1/sqrt(d_model)"),
    ("ex03", "a causal mask that also hides the"): ("causal_hides_diagonal", "it also hides the diagonal"),
    ("ex04", "Forgetting the `1/sqrt(d_k)`"): ("attention_backward_unscaled", "1/sqrt(d_k) is missing on the way back"),
    ("ex05", "Any other order of the heads"): ("concat_wrong_order", "in the wrong places"),
    ("ex07", "taken from one example only"): ("mha_grad_first_example", "the gradient of the first example only"),
    ("ex11", "A row whose keys are all masked"): ("online_nan_on_masked_row", "NaN where a row's keys so far are all masked"),
    ("ex11", "forgetting to rescale"): ("online_no_rescale", "not rescaled by exp(m_old - m_new)"),
    ("ex11", "returning the running maximum"): ("online_lse_is_max", "lse is each row's maximum score"),
}  # fmt: skip


def readme_traps() -> list[tuple[str, str]]:
    """``[(exercise marker, one trap's text), ...]`` from each section's Trap(s) paragraph."""
    found = []
    for number, body in re.findall(r"^## (\d+)\. .*?\n(.*?)(?=^## |\Z)", README, flags=re.MULTILINE | re.DOTALL):
        para = re.search(r"\*\*Traps?\.\*\*(.*?)(?:\n\n|\Z)", body, flags=re.DOTALL)
        if para:
            found += [(f"ex{int(number):02d}", " ".join(t.split())) for t in para.group(1).split(";")]
    return found


def test_every_trap_in_the_readme_has_a_hint_case():
    traps = readme_traps()
    assert len(traps) >= len(TRAPS) - 1, traps  # the README's paragraphs were found
    for marker, text in traps:
        matched = [key for key in TRAPS if key[0] == marker and key[1] in text]
        assert len(matched) == 1, f"{marker}: the trap {text!r} has {len(matched)} hint cases in TRAPS"
    assert len(traps) == len(TRAPS), "a trap in TRAPS is no longer in the README"


def graded_row(folder: Path, edits, exercise: str, seed: int | None = None) -> dict:
    """The report row of ``exercise`` for solutions/ with ``edits`` applied, written into ``folder``."""
    for filename, text in apply(SOLUTIONS, edits).items():
        (folder / filename).write_text(text, encoding="utf-8")
    return grade(folder, only=[exercise], seed=seed)["exercises"][0]


@pytest.mark.grader
@pytest.mark.parametrize("key", list(TRAPS), ids=[TRAPS[k][0] for k in TRAPS])
def test_each_trap_gets_its_hint(key, tmp_path):
    name, words = TRAPS[key]
    case = CASES[name]
    row = graded_row(tmp_path, case.edits, case.exercise, seed=11)
    hints = [c["reason"].split("; ", 1)[1] for c in row["checks"] if c["points"] == 0 and "; " in c["reason"]]
    assert any(words in h for h in hints), row["checks"]


# --- hints beyond the README's traps ------------------------------------------------------------------------------


@pytest.mark.grader
def test_a_missing_transpose_gets_a_hint_not_the_answer(tmp_path):
    why = graded_row(tmp_path, CASES["split_no_transpose"].edits, "ex01")["reason"]
    assert "the values are right but in the wrong places" in why


@pytest.mark.grader
def test_a_softmax_over_the_queries_is_told_its_axis(tmp_path):
    why = graded_row(tmp_path, CASES["softmax_query_axis"].edits, "ex02")["reason"]
    assert "this is a softmax over axis -2; the softmax runs over the last axis" in why and "stable?" not in why


@pytest.mark.grader
def test_an_unstable_softmax_is_told_to_subtract_the_max(tmp_path):
    edits = (Edit("ex02_softmax.py", "    m = np.where(np.isfinite(m), m, 0)", "    m = 0 * m"),)
    why = graded_row(tmp_path, edits, "ex02")["reason"]
    assert "contains NaN or inf; exp overflowed: subtract each row's maximum" in why


@pytest.mark.grader
def test_a_value_slightly_off_is_not_called_a_layout_fault():
    """A result a little off everywhere (e.g. a finite-difference gradient) gets no 'wrong places' hint; a transpose does."""
    import numpy as np

    from mhattn.grade.harness import GradeFailure, check_array

    expected = np.random.default_rng(0).standard_normal((3, 4))
    with pytest.raises(GradeFailure) as off:
        check_array("x", expected + 5e-11, expected, 1e-12)
    assert "wrong places" not in str(off.value)
    with pytest.raises(GradeFailure) as moved:
        check_array("x", expected[::-1].copy(), expected, 1e-12)
    assert "wrong places" in str(moved.value)
