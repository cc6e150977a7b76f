"""``mhattn course init DIR``: the course without a clone.

It copies the notebooks (.ipynb and .py), the exercise stubs, their README and the visible tests; it restores
missing files and never overwrites a learner's edits (``--force`` moves them to ``.bak`` first); and no answer
(``solutions/``, ``exercises_src/``, a solution region) is copied, nor built into the wheel's materials.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mhattn.cli import main
from mhattn.course import materials

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXERCISES = sorted(p.name for p in (ROOT / "exercises_src").glob("ex[0-9][0-9]_*.py"))


def _assert_no_answers(files: dict[str, bytes]):
    assert not [rel for rel in files if rel.startswith(("solutions/", "exercises_src/"))]
    assert not [rel for rel, data in files.items() if b"### BEGIN SOLUTION" in data or b"### END SOLUTION" in data]
    for name in EXERCISES:
        assert b"NotImplementedError" in files[f"exercises/{name}"], f"{name} is not a stub"


def test_init_copies_the_course_and_prints_the_next_command(tmp_path, capsys):
    dest = tmp_path / "my-course"
    assert main(["course", "init", str(dest)]) == 0
    out = capsys.readouterr().out
    assert f"cd {dest}" in out and "jupyter lab notebooks/00_setup_and_backends.ipynb" in out and "mhattn grade" in out
    for nb in NOTEBOOKS:
        assert (dest / "notebooks" / nb).read_bytes() == (ROOT / "notebooks" / nb).read_bytes()
        assert (dest / "notebooks" / nb).with_suffix(".py").is_file()
    for name in [*EXERCISES, "README.md", "test_visible.py"]:
        assert (dest / "exercises" / name).is_file(), name
    assert (dest / "glossary.md").read_bytes() == (ROOT / "docs" / "glossary.md").read_bytes()
    copied = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    _assert_no_answers(copied)
    assert not (dest / "solutions").exists() and not (dest / "exercises_src").exists()


def test_init_again_is_fine_restores_what_is_missing_and_never_overwrites_an_edit(tmp_path, capsys):
    dest = tmp_path / "c"
    assert main(["course", "init", str(dest)]) == 0
    assert main(["course", "init", str(dest)]) == 0  # identical files: nothing to do
    edited = dest / "exercises" / EXERCISES[0]
    edited.write_text("def split_heads(x, num_heads):\n    return 'my work'\n", encoding="utf-8")
    (dest / "notebooks" / NOTEBOOKS[0]).unlink()  # a missing file is restored even when another was edited
    capsys.readouterr()
    assert main(["course", "init", str(dest)]) == 0
    out = capsys.readouterr().out
    assert f"exercises/{EXERCISES[0]}" in out and "never overwritten" in out and "--force" in out
    assert edited.read_text(encoding="utf-8").endswith("'my work'\n")
    assert (dest / "notebooks" / NOTEBOOKS[0]).read_bytes() == (ROOT / "notebooks" / NOTEBOOKS[0]).read_bytes()


def test_force_replaces_every_edit_and_keeps_each_as_bak(tmp_path, capsys):
    dest = tmp_path / "c"
    assert main(["course", "init", str(dest)]) == 0
    edits = {dest / "exercises" / name: f"mine {i}\n" for i, name in enumerate(EXERCISES[:3])}
    for path, text in edits.items():
        path.write_text(text, encoding="utf-8")
    assert main(["course", "init", str(dest), "--force"]) == 0
    for path, text in edits.items():
        assert path.with_name(path.name + ".bak").read_text(encoding="utf-8") == text
        assert b"NotImplementedError" in path.read_bytes()
    assert sorted(p.name for p in (dest / "exercises").glob("*.bak")) == sorted(p.name + ".bak" for p in edits)


def test_build_step_puts_the_materials_without_answers_into_the_package(tmp_path):
    """``setup.py``'s build_py (what ``pip wheel .`` runs) writes mhattn/course_materials/ and no answer."""
    res = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    built = tmp_path / "mhattn" / "course_materials"
    files = {p.relative_to(built).as_posix(): p.read_bytes() for p in built.rglob("*") if p.is_file()}
    assert files == materials.collect(ROOT)
    assert {f"notebooks/{nb}" for nb in NOTEBOOKS} <= set(files)
    _assert_no_answers(files)
    assert not list(tmp_path.rglob("solutions"))


def test_a_tree_without_materials_is_refused(tmp_path):
    with pytest.raises(materials.CourseError, match="no course materials"):
        materials.collect(tmp_path)
