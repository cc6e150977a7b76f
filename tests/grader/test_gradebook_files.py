"""What a gradebook writes, and who may read it (issue 34).

- Every file of the output folder is its owner's alone (0600, folders 0700): the class seed and every grade; the
  summary names no seed; a seed never goes on the command line (``--seed-file``; ``--seed`` is refused).
- A learner's text (an exception message, a folder's name) is escaped in summary.md and feedback: no image, no
  link, no emphasis, no HTML, and a code span holds any backticks; file stems cannot collide.
- The instructor's snags: a second hand-in of one id is reported; another class seed into a graded folder warns;
  a hand-in that cannot be graded says why once; singular words for one.
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from mhattn import cli
from mhattn.classroom import grade_class
from mhattn.classroom.names import file_stem, md_code, md_text
from mhattn.classroom.summary import feedback
from mhattn.grade import format_table, grade

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS, write_folder, zip_bytes  # noqa: E402

pytestmark = pytest.mark.grader
EX08 = "ex08_count_parameters.py"
SEED = 2**100 + 77


def _class(tmp: Path, handins: dict[str, dict[str, str]]) -> Path:
    for sid, files in handins.items():
        write_folder(tmp / "subs" / sid, files)
    return tmp / "subs"


def test_every_output_file_is_the_instructors_alone_and_the_summary_names_no_seed(tmp_path):
    subs = _class(tmp_path, {"alice": {EX08: SOLUTIONS[EX08]}, "bob": {EX08: "x = 1\n"}})
    out = tmp_path / "out"
    done = grade_class(subs, out, jobs=2, seed=SEED, progress=False)
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [out, *out.rglob("*")]}
    assert {"class.json", "gradebook.csv", "summary.md", "faults.csv", "results/alice.json", "feedback/bob.md"} <= set(modes)
    assert all(m == (0o700 if (out / p).is_dir() else 0o600) for p, m in modes.items()), modes
    text = (out / "summary.md").read_text(encoding="utf-8")
    seeds = [str(SEED), *(str(r["seed"]) for r in done["students"].values())]
    assert not any(s in text for s in seeds) and "class seed" not in text
    grade_class(subs, out, jobs=1, progress=False)  # an older copy's mode does not survive a rewrite either
    assert stat.S_IMODE((out / "gradebook.csv").stat().st_mode) == 0o600


def test_the_seed_comes_from_a_file_never_the_command_line(tmp_path, capsys):
    subs = _class(tmp_path, {"alice": {EX08: SOLUTIONS[EX08]}})
    with pytest.raises(SystemExit) as exit_:
        cli.main(["gradebook", str(subs), "--out", str(tmp_path / "out"), "--seed", "5"])
    assert exit_.value.code == 2 and "--seed-file" in capsys.readouterr().err
    seed_file = tmp_path / "seed"
    seed_file.write_text(json.dumps({"seed": SEED}))
    assert cli.main(["gradebook", str(subs), "--out", str(tmp_path / "out"), "--quiet", "--seed-file", str(seed_file)]) == 0
    err = capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "class.json").read_text())["seed"] == SEED and str(SEED) not in err
    result = tmp_path / "out" / "results" / "alice.json"
    assert cli.main(["grade", str(subs / "alice"), "--only", "ex08", "--seed-file", str(result), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seed"] == json.loads(result.read_text())["seed"]  # an instructor repeats a grade, seed unseen
    for bad in ("-3", "seed", '{"seed": true}'):
        seed_file.write_text(bad)
        with pytest.raises(SystemExit):
            cli.main(["gradebook", str(subs), "--out", str(tmp_path / "o2"), "--seed-file", str(seed_file)])
        assert "holds no seed" in capsys.readouterr().err
    guide = (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")
    assert "--seed-file" in guide and not any("gradebook" in ln and "--seed " in ln for ln in guide.splitlines())


BEACON = "![x](http://evil.example/b.png) **all tests passed** <img src=x onerror=alert(1)> [link](http://x) ~~no~~"


def test_a_learners_text_is_escaped_in_the_summary_and_the_feedback(tmp_path):
    raising = f"raise ValueError({BEACON!r})\n"
    subs = _class(tmp_path, {"a`b``c": {EX08: raising}, "mallory": {EX08: raising}})
    (subs / "`x.zip").write_bytes(b"not a zip " + BEACON.encode())
    grade_class(subs, tmp_path / "out", jobs=2, seed=3, progress=False)
    texts = [(tmp_path / "out" / "summary.md").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in (tmp_path / "out" / "feedback").iterdir()]
    for text in texts:
        for raw in ("![", "](http", "**all", "<img", "~~no"):  # each acted on unless its first character is escaped
            assert not re.search(r"(?<!\\)" + re.escape(raw), text), (raw, text)
    summary = texts[0]
    assert md_code("a`b``c") == "```a`b``c```" and md_code("a`b``c") in summary  # a code span holds any backticks
    assert md_code("`x") == "`` `x ``" and md_code("`x") in summary
    assert md_text(BEACON) in texts[1] + texts[2]  # the message is there, escaped, not dropped
    rows = list(csv.reader((tmp_path / "out" / "faults.csv").open(encoding="utf-8")))
    assert all(not c.startswith(("=", "+", "-", "@")) for r in rows for c in r)


def test_file_stems_cannot_collide(tmp_path):
    odd = ["-rf", "rf-686c39acd6327bbd", "Alice", "alice", "a~b", "a_b"]
    stems = [file_stem(s) for s in odd]
    hashed = file_stem("-rf")
    assert len(set(stems)) == len(odd) and file_stem("alice") == "alice" and "~" in hashed
    assert file_stem(hashed) != hashed  # an id named like another's hashed stem is hashed itself
    subs = _class(tmp_path, {"-rf": {EX08: SOLUTIONS[EX08]}, hashed: {EX08: "x = 1\n"}})
    done = grade_class(subs, tmp_path / "out", jobs=2, seed=3, progress=False)
    assert {sid: r["total"] for sid, r in done["students"].items()} == {"-rf": 5, hashed: 0}
    stored = {p.name: json.loads(p.read_text())["student"] for p in (tmp_path / "out" / "results").iterdir()}
    assert sorted(stored.values()) == sorted(["-rf", hashed]) and len(stored) == 2


def test_a_second_handin_of_one_id_is_reported_and_one_is_said_in_the_singular(tmp_path, capsys):
    subs = _class(tmp_path, {"heidi": {EX08: SOLUTIONS[EX08]}, "ivan": {}})
    (subs / "heidi.zip").write_bytes(zip_bytes({EX08: "x = 1\n"}))
    (subs / "notes.txt").write_text("x")
    out = tmp_path / "out"
    assert cli.main(["gradebook", str(subs), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "2 entries of the submissions folder are not hand-ins" in text
    assert "`heidi.zip`: a second hand-in of heidi (heidi is graded, this one is not)" in text
    assert "1 hand-in could not be graded" in text and "2 students" in err and "1 hand-ins" not in text
    note = (out / "feedback" / "ivan.md").read_text(encoding="utf-8")
    assert note.count("no exercise files") == 1 and "new inputs" not in note  # said once; no test ran
    right = feedback({"student": "x", "total": 5, "max_total": 5, "error": None, "exercises": []})
    assert "new inputs" in right


def test_another_class_seed_into_a_graded_folder_warns_before_it_regrades(tmp_path, capsys):
    subs = _class(tmp_path, {"alice": {EX08: SOLUTIONS[EX08]}})
    out = tmp_path / "out"
    for seed in (5, 5, 6):
        (tmp_path / "seed").write_text(str(seed))
        assert cli.main(["gradebook", str(subs), "--out", str(out), "--quiet", "--seed-file", str(tmp_path / "seed")]) == 0
        err = capsys.readouterr().err
        assert ("graded with another class seed" in err) == (seed == 6), err
    assert "The class seed changed" in (out / "summary.md").read_text(encoding="utf-8")


@pytest.mark.skipif(os.geteuid() != 0, reason="run as root only")
def test_the_summary_says_who_ran_each_handin(tmp_path):
    subs = _class(tmp_path, {"alice": {EX08: SOLUTIONS[EX08]}})
    done = grade_class(subs, tmp_path / "out", jobs=1, seed=3, progress=False, sandbox_mode=False)
    text = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert "each as an unprivileged user of its own" in text and "with your rights" not in text
    assert done["notes"][0] == "Each hand-in ran without a sandbox, each as an unprivileged user of its own."
    table = format_table(grade(subs / "alice", only=["ex08"], seed=3, sandbox_mode=False))
    assert "an unprivileged user of its own" in table and "with your rights" not in table  # mhattn grade says so too


def test_the_autograder_zip_holding_the_class_seed_is_its_owners_alone(tmp_path, capsys):
    (tmp_path / "seed").write_text(str(SEED))
    out = tmp_path / "autograder.zip"
    out.write_bytes(b"an older copy")
    out.chmod(0o644)
    assert cli.main(["autograder", "gradescope", "--out", str(out), "--seed-file", str(tmp_path / "seed")]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    with pytest.raises(SystemExit):
        cli.main(["autograder", "gradescope", "--out", str(out), "--seed", "5"])
    assert "--seed-file" in capsys.readouterr().err
