"""Hand-ins that are not plain files of the learner's own: a link to solutions/ (a file or the whole folder), a link
to itself, to ``/proc`` or ``/dev``, a FIFO, a device, a folder. Each scores 0 with a reason in both modes, nothing is
read from it, and the good files beside it keep their points."""

from __future__ import annotations

import os

import pytest
from test_grade_attacks import FULL, MODES, ROOT, _reasons, write_submission

from mhattn.grade import grade

pytestmark = pytest.mark.grader


@pytest.mark.parametrize("use_sandbox", list(MODES.values()), ids=list(MODES))
def test_links_to_the_solutions_score_0(use_sandbox, tmp_path):
    """A handed-in file that links out of its folder, or a folder that links to solutions/, is not the learner's work."""
    folder = write_submission(tmp_path / "sub", ())
    (folder / "ex05_combine_heads.py").unlink()
    (folder / "ex05_combine_heads.py").symlink_to(ROOT / "solutions" / "ex05_combine_heads.py")
    rows = {r["name"]: r for r in grade(folder, only=["ex05", "ex01"], sandbox_mode=use_sandbox)["exercises"]}
    assert rows["ex01_split_heads"]["points"] == FULL["ex01_split_heads"], rows["ex01_split_heads"]["reason"]
    assert rows["ex05_combine_heads"]["points"] == 0 and "is a link to a file outside" in rows["ex05_combine_heads"]["reason"]
    (tmp_path / "linked").symlink_to(ROOT / "solutions", target_is_directory=True)
    report = grade(tmp_path / "linked", only=["ex01"], sandbox_mode=use_sandbox)
    assert report["total"] == 0 and "is a link to mhattn's solutions/" in report["exercises"][0]["reason"]


@pytest.mark.parametrize("use_sandbox", list(MODES.values()), ids=list(MODES))
def test_bad_files_cost_that_file_only(use_sandbox, tmp_path):
    """Links (a loop, /proc/self/mem, /proc/kmsg, /dev/zero), a FIFO, a device and a folder in place of exercise
    files: each of those scores 0 with a reason, nothing is read from them, the good files keep their points."""
    folder = write_submission(tmp_path / "sub", ())
    bad = {
        "ex01_split_heads.py": lambda p: p.symlink_to(p.name),  # a link to itself
        "ex02_softmax.py": lambda p: p.symlink_to("/proc/self/mem"),
        "ex03_attention_forward.py": lambda p: p.symlink_to("/proc/kmsg"),
        "ex04_attention_backward.py": lambda p: os.mkfifo(p),
        "ex06_mha_forward.py": lambda p: p.symlink_to("/dev/zero"),
        "ex07_mha_backward.py": lambda p: p.mkdir(),
    }
    if os.geteuid() == 0:  # a device node in the folder itself (mknod needs root)
        bad["ex09_head_importance.py"] = lambda p: os.mknod(p, 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 5))
    for name, make in bad.items():
        (folder / name).unlink()
        make(folder / name)
    report = grade(folder, only=[n[:4] for n in bad] + ["ex05", "ex08"], timeout=10.0, seed=2, sandbox_mode=use_sandbox)
    rows = _reasons(report)
    for name in bad:
        points, why = rows[name[:-3]]
        assert points == 0 and ("hand in the file itself" in why or "outside the folder" in why), (name, why)
    assert rows["ex05_combine_heads"][0] == FULL["ex05_combine_heads"], rows["ex05_combine_heads"]
    assert rows["ex08_count_parameters"][0] == FULL["ex08_count_parameters"], rows["ex08_count_parameters"]
