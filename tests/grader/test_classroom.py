"""mhattn gradebook: a generated class (tests/grader/classroom_cases.py) graded with the expected totals; each broken
hand-in costs its student only, with a reason; a second run skips what has not changed; a student's grade is
the same whatever --jobs, and `mhattn grade --seed <recorded seed>` repeats it."""

from __future__ import annotations

import csv
import json
import sys
import zipfile
from pathlib import Path

import pytest

from mhattn import cli
from mhattn.classroom import HandinError, grade_class, student_seed, unpack
from mhattn.classroom.summary import fault
from mhattn.grade import EXERCISES, grade

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS, TOTAL, bomb_bytes, make_class, write_folder, zip_bytes  # noqa: E402


# ---- hand-ins, without grading ------------------------------------------------------------
def test_student_seeds_differ_and_repeat():
    seeds = {student_seed(7, f"s{i}") for i in range(1000)}
    assert len(seeds) == 1000 and student_seed(7, "s1") == student_seed(7, "s1") != student_seed(8, "s1")


@pytest.mark.parametrize(
    "entries, words",
    [
        ({"../ex01_split_heads.py": "x = 1\n"}, "outside its folder"),
        ({"/abs/ex01_split_heads.py": "x = 1\n"}, "outside its folder"),
        ({"notes.txt": "no exercise here"}, "no exercise files"),
    ],
)
def test_unsafe_or_empty_zips_are_refused_with_a_reason(tmp_path, entries, words):
    (tmp_path / "h.zip").write_bytes(zip_bytes(entries))
    with pytest.raises(HandinError, match=words):
        unpack(tmp_path / "h.zip", tmp_path)
    assert not (tmp_path.parent / "ex01_split_heads.py").exists()


def test_a_zip_link_a_bomb_and_garbage_are_refused(tmp_path):
    link = zipfile.ZipInfo("ex01_split_heads.py")
    link.external_attr = 0o120777 << 16
    with zipfile.ZipFile(tmp_path / "link.zip", "w") as z:
        z.writestr(link, "/etc/passwd")
    (tmp_path / "bomb.zip").write_bytes(bomb_bytes())
    (tmp_path / "junk.zip").write_bytes(b"PK\x03\x04junk")
    for name, words in (("link.zip", "is a link"), ("bomb.zip", "zip bomb"), ("junk.zip", "not a readable zip")):
        with pytest.raises(HandinError, match=words):
            unpack(tmp_path / name, tmp_path)


def test_a_long_entry_is_cut_one_byte_past_the_limit(tmp_path):
    """An entry that unpacks to far more than an exercise file is read only up to the grader's limit."""
    from mhattn.grade.scan import MAX_BYTES

    (tmp_path / "h.zip").write_bytes(zip_bytes({"ex01_split_heads.py": "#" * (4 * MAX_BYTES)}))
    out = unpack(tmp_path / "h.zip", tmp_path / "out") if (tmp_path / "out").mkdir() is None else None
    assert (out / "ex01_split_heads.py").stat().st_size == MAX_BYTES + 1


def test_the_folder_with_the_exercise_files_is_found(tmp_path):
    write_folder(tmp_path / "alice" / "course" / "exercises", SOLUTIONS)
    (tmp_path / "alice" / "README.md").write_text("hi")
    assert unpack(tmp_path / "alice", tmp_path / "x") == tmp_path / "alice" / "course" / "exercises"
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "handin.zip").write_bytes(zip_bytes(SOLUTIONS, "bob/"))
    (tmp_path / "out").mkdir()
    assert sorted(p.name for p in unpack(tmp_path / "bob", tmp_path / "out").iterdir()) == sorted(SOLUTIONS)


def test_faults_add_up_across_students():
    axis = "this is a softmax over axis -2; the softmax runs over the last axis (-1, the keys)"
    a = f"hidden test failed: softmax_forward(scores (2, 3, 4, 5)): max |error| vs reference 3.1e-01 (tolerance 1.0e-09); {axis}"
    b = a.replace("(2, 3, 4, 5)", "(1, 2, 7, 3)").replace("3.1e-01", "9.0e-02")
    assert fault(a) == fault(b) == axis
    raised = "hidden test: exception ZeroDivisionError: division by zero (ex01_split_heads.py line 3)"
    assert fault(raised) == "raises ZeroDivisionError"
    assert fault("not implemented yet: split_heads raises NotImplementedError") == "not written yet"


# ---- a whole class ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    want = make_class(tmp / "submissions")
    done = grade_class(tmp / "submissions", tmp / "out", jobs=2, seed=7, timeout=4.0, progress=False)
    return tmp, want, done


@pytest.mark.grader
@pytest.mark.slow  # over 10 s on 2 loaded cores
def test_every_student_gets_the_expected_total(graded):
    _, want, done = graded
    got = {sid: r["total"] for sid, r in done["students"].items()}
    assert got == {sid: total for sid, (total, _) in want.items()}
    for sid, (_, words) in want.items():
        error = done["students"][sid]["error"]
        assert (words is None and error is None) or (words and words in error), (sid, error)


@pytest.mark.grader
def test_each_wrong_kind_loses_exactly_its_checks(graded):
    from classroom_cases import LOST, WRONG

    _, _, done = graded
    for case in (c for c in WRONG if f"wrong_{c.name}" in done["students"]):
        rows = {r["name"]: r for r in done["students"][f"wrong_{case.name}"]["exercises"]}
        failed = {c["name"] for c in rows[case.exercise]["checks"] if c["points"] < c["max_points"]}
        assert failed == set(LOST[case.name]), case.name
        assert all(rows[ex.name]["points"] == ex.points for ex in EXERCISES if ex.name != case.exercise)


@pytest.mark.grader
def test_the_gradebook_files(graded):
    tmp, want, done = graded
    out = tmp / "out"
    with (out / "gradebook.csv").open(encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", *(f"{ex.name} ({ex.points})" for ex in EXERCISES), f"total ({TOTAL})", "note"]
    assert {r[0]: int(r[-2]) for r in rows[1:]} == {sid: total for sid, (total, _) in want.items()}
    alice = json.loads((out / "results" / "wrong_causal_hides_diagonal.json").read_text())
    assert alice["seed"] == student_seed(7, "wrong_causal_hides_diagonal", alice["hash"]) and alice["class_seed"] == 7
    assert all("checks" in r for r in alice["exercises"])
    feedback = (out / "feedback" / "wrong_causal_hides_diagonal.md").read_text()
    assert "## ex03_attention_forward: 4/10" in feedback and "it also hides the diagonal" in feedback
    assert str(alice["seed"]) not in feedback and "--seed" not in feedback  # the seed is the instructor's
    summary = (out / "summary.md").read_text()
    assert "| ex02_softmax | 10 |" in summary and "## Faults" in summary
    unfinished = summary.split("## Not written yet")[1].split("##")[0]  # stubs + partly, once per exercise
    assert "- 2 students, ex06_mha_forward: not written yet: `partly`, `stubs`" in unfinished
    problems = summary.split("## Problems with the hand-ins themselves")[1].split("##")[0]
    assert "time-out: timed out" in problems and "`timeout`" in problems  # the endless loop, listed by name
    assert "`zip_slip`: the zip entry" in summary and not (tmp / "escaped.py").exists()


@pytest.mark.grader
def test_a_second_run_grades_only_what_changed(graded):
    tmp, want, _ = graded
    sub, out = tmp / "submissions", tmp / "out"
    changed = sub / "right_folder" / "ex05_combine_heads.py"
    changed.write_text(changed.read_text().replace("x.transpose(0, 2, 1, 3)", "x[:, ::-1].transpose(0, 2, 1, 3)"))
    again = grade_class(sub, out, jobs=2, timeout=4.0, progress=False)  # the class seed comes from out/class.json
    broken = {sid for sid, (_, words) in want.items() if words}
    assert set(again["graded"]) == {"right_folder"} | broken and again["class_seed"] == 7
    assert again["students"]["right_folder"]["total"] == TOTAL - 5
    assert again["students"]["right_zip"]["total"] == TOTAL


@pytest.mark.grader
@pytest.mark.slow  # over 10 s on 2 loaded cores
def test_one_grade_does_not_depend_on_jobs_or_the_class_and_can_be_repeated(graded, tmp_path):
    tmp, _, done = graded
    wrong = max(s for s in done["students"] if s.startswith("wrong_"))  # one known-wrong kind in the class
    for sid in ("partly", wrong):
        write_folder(tmp_path / "alone" / sid, {p.name: p.read_text() for p in (tmp / "submissions" / sid).glob("ex*.py")})
    alone = grade_class(tmp_path / "alone", tmp_path / "out", jobs=1, seed=7, timeout=4.0, progress=False)
    for sid, res in alone["students"].items():
        assert res == done["students"][sid]
        again = grade(tmp / "submissions" / sid, seed=res["seed"], timeout=4.0, jobs=1)
        assert again["exercises"] == res["exercises"]


@pytest.mark.grader
def test_the_command(tmp_path, capsys):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "a.zip").write_bytes(zip_bytes({"ex08_count_parameters.py": SOLUTIONS["ex08_count_parameters.py"]}))
    (sub / "b.zip").write_bytes(b"not a zip")
    (tmp_path / "seed").write_text("3\n")
    assert (
        cli.main(["gradebook", str(sub), "--out", str(tmp_path / "out"), "--quiet", "--seed-file", str(tmp_path / "seed")]) == 0
    )
    rows = list(csv.reader((tmp_path / "out" / "gradebook.csv").open()))
    assert [(r[0], r[-2]) for r in rows[1:]] == [("a", "5"), ("b", "0")]
    assert "2 students (2 graded, 0 unchanged, 1 could not be graded)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["gradebook", str(tmp_path / "missing"), "--out", str(tmp_path / "o2")])
    assert exit_.value.code == 2 and "no folder" in capsys.readouterr().err
