"""Hand-ins graded side by side are kept apart (issue 34): a user per worker as root, private temporary folders,
fair time, and a class snapshot that counts only what a hand-in wrote.

- As root, in both modes, a hand-in graded beside a classmate cannot signal or read the classmate's worker
  (``/proc/<pid>/mem``), cannot leave files in the shared temporary folders, and fills only a private one of
  :data:`mhattn.grade.user.TMP_BYTES`; the classmate keeps full marks.
- The time limit counts the CPU time of a worker's own process tree: a hand-in that waits longer than the limit on
  the wall clock passes, one whose children burn the CPU does not; a time-out beside another worker is run again
  alone.
- Without a sandbox the snapshot of the code a later run executes ignores modules the grader itself loads meanwhile.
- A normal user without a sandbox grades one hand-in at a time and reuses no stored result.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from mhattn.classroom import grade_class
from mhattn.classroom.gradebook import NOT_ISOLATED
from mhattn.grade import grade, launch, pool, user, watch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS, write_folder, zip_bytes  # noqa: E402
from test_grading_trust import IS_ROOT, MODES, open_dir  # noqa: E402, F401 (open_dir: a fixture)

pytestmark = pytest.mark.grader
EX01 = "ex01_split_heads.py"


# appended to a right answer: bob names his worker (no file of /proc needed) and waits on the clock (no CPU time)
BOB = "import ctypes, time\nctypes.CDLL(None).prctl(15, b'mhattn-bob', 0, 0, 0)\ntime.sleep(8)\n"
MALLORY = """
import errno, os, signal, tempfile, time
def attempt(fn):
    try:
        fn()
        return "DONE"
    except OSError as err:
        return str(err.errno)
def bob():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/comm").read().strip() == "mhattn-bob":
                return int(pid)
        except OSError:
            pass
facts, deadline = [], time.monotonic() + 15  # a loaded machine may start bob's worker late
while bob() is None and time.monotonic() < deadline:
    time.sleep(0.05)
pid = bob()
facts.append(f"seen={pid is not None}")
if pid is not None:
    facts.append("mem=" + attempt(lambda: open(f"/proc/{pid}/mem", "rb").close()))
    facts.append("kill=" + attempt(lambda: os.kill(pid, signal.SIGKILL)))
facts.append("shared=" + attempt(lambda: open("/tmp/mhattn-mallory-left", "w").close()))
def fill():
    for i in range(6):  # 6 x 15 MiB: over the private folder's 64 MiB, each under the 16 MiB file limit
        with open(os.path.join(tempfile.gettempdir(), f"fill{i}"), "wb") as f:
            f.write(b"x" * (15 << 20))
facts.append("fill=" + attempt(fill))
raise RuntimeError(" ".join(facts))
"""


def _facts(report: dict) -> dict[str, str]:
    why = report["exercises"][0]["reason"]
    return dict(f.split("=", 1) for f in why.split("RuntimeError: ")[1].split(" (")[0].split(" ") if "=" in f)


@pytest.mark.slow  # in the sandbox mallory waits 15 s for a worker she never sees
@pytest.mark.skipif(not IS_ROOT, reason="run as root only (as CI and Gradescope do)")
@pytest.mark.parametrize("use_sandbox", MODES)
def test_as_root_a_classmate_graded_beside_cannot_kill_read_or_fill_up(open_dir, use_sandbox):  # noqa: F811 (the fixture)
    subs, out = open_dir / "subs", open_dir / "out"
    write_folder(subs / "bob", {EX01: SOLUTIONS[EX01] + BOB})
    write_folder(subs / "mallory", {EX01: MALLORY})
    for sid in ("bob", "mallory"):
        (subs / sid).chmod(0o700)  # as the run had them: only ownership and the users keep them apart
    done = grade_class(subs, out, jobs=2, seed=3, progress=False, sandbox_mode=use_sandbox)
    facts = _facts(done["students"]["mallory"])
    assert done["students"]["bob"]["exercises"][0]["points"] == 5, done["students"]["bob"]["exercises"][0]
    if use_sandbox:
        assert facts["seen"] == "False"  # a PID namespace of its own: bob's worker is not there to find
    else:
        assert facts["seen"] == "True", facts  # side by side, and visible: the test means something
        assert facts["mem"] == "13" and facts["kill"] == "1", facts  # EACCES, EPERM: another user, not dumpable
        assert facts["shared"] == "30", facts  # EROFS: /tmp is read-only in its mount namespace
    assert facts["fill"] == "28", facts  # ENOSPC: its own temporary folder holds 64 MiB, whatever the file count
    assert not Path("/tmp/mhattn-mallory-left").exists()


@pytest.mark.skipif(not IS_ROOT, reason="run as root only")
def test_each_worker_holds_a_user_of_the_pool_no_other_holds():
    seen, lock = [], threading.Lock()

    def hold():
        with pool.lease() as ids:
            with lock:
                seen.append(ids)
            time.sleep(0.3)

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and len(set(seen)) == 4 and all(u in pool.ids() and u == g for u, g in seen)
    assert all(pool._taken(u) is False for u, _ in seen)  # no user or group of the system has them


@pytest.mark.skipif(not IS_ROOT, reason="run as root only")
def test_a_leased_user_is_cleared_before_and_after():
    with pool.lease() as (uid, gid):
        left = Path("/tmp") / f"mhattn-left-{uid}"
        left.write_text("x")
        os.chown(left, uid, gid)
    assert not left.exists()


SLEEPS = "import time\ntime.sleep(5)\n"  # 5 s on the wall clock, next to no CPU time


def burner(children: int, seconds: float) -> str:
    """A hand-in that forks ``children`` processes, each burning ``seconds`` of CPU time, then waits for ever."""
    return f"""
import os, time
for _ in range({children}):
    if os.fork() == 0:
        t = time.process_time()
        while time.process_time() - t < {seconds}:
            pass
        os._exit(0)
while True:
    time.sleep(1)
"""


CHILDREN_BURN = burner(5, 1.5)


@pytest.mark.slow
@pytest.mark.parametrize("use_sandbox", MODES)
def test_the_time_limit_counts_the_cpu_time_of_the_workers_own_processes(tmp_path, use_sandbox):
    """Limit 2 s: a hand-in that sleeps 5 s passes (the wall clock allows 9 s), one whose five children each burn
    1.5 s of CPU time (each under its own 3 s RLIMIT_CPU) times out on their sum."""
    write_folder(tmp_path / "sleeps", {EX01: SOLUTIONS[EX01] + SLEEPS})
    write_folder(tmp_path / "burns", {EX01: CHILDREN_BURN})
    sleeps = grade(tmp_path / "sleeps", only=["ex01"], timeout=2.0, seed=1, sandbox_mode=use_sandbox)
    assert sleeps["total"] == 5, sleeps["exercises"][0]["reason"]
    burns = grade(tmp_path / "burns", only=["ex01"], timeout=2.0, seed=1, sandbox_mode=use_sandbox)
    why = burns["exercises"][0]["reason"]
    assert burns["total"] == 0 and why.startswith("timed out after 2 s of CPU time"), why  # not the wall clock's 9 s


def test_a_time_out_beside_another_worker_is_run_again_alone():
    turns, order = launch.Turns(), []
    with turns.beside() as first:
        assert not first.crowded
        with turns.beside() as second:
            assert first.crowded and second.crowded

    def alone():
        with turns.alone() as turn:
            order.append(("alone", turn.crowded))

    with turns.beside():
        t = threading.Thread(target=alone)
        t.start()
        time.sleep(0.2)
        order.append(("beside ends", None))
    t.join()
    assert order == [("beside ends", None), ("alone", False)]  # it waited for the one running


HOG = burner(30, 2.5)
BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass\n"


@pytest.mark.slow
@pytest.mark.parametrize("use_sandbox", MODES)
def test_a_classmates_busy_children_cannot_make_a_right_hand_in_time_out(tmp_path, use_sandbox):
    """The issue's case: 30 busy children in one hand-in; the classmate beside it needs about 1.5 s of CPU time of 5
    (1 s of its own loop, and starting Python and numpy)."""
    subs = tmp_path / "subs"
    write_folder(subs / "alice", {EX01: SOLUTIONS[EX01] + BUSY})
    write_folder(subs / "hog", {EX01: HOG})
    done = grade_class(subs, tmp_path / "out", jobs=2, seed=4, timeout=5.0, progress=False, sandbox_mode=use_sandbox)
    alice = done["students"]["alice"]["exercises"][0]
    assert alice["points"] == 5, alice["reason"]
    assert done["students"]["hog"]["total"] == 0


def test_the_snapshot_ignores_a_module_the_grader_loads_while_a_worker_runs():
    name = next(m for m in ("encodings.cp1026", "encodings.cp1140", "encodings.mac_farsi") if m not in sys.modules)
    before = watch.snapshot()
    __import__(name)  # as another thread unpacking a zip loads cp437
    assert watch.changed(before, watch.snapshot(before)) == []
    fresh = Path(watch._trees()[0]) / "mhattn-snapshot-test.py"  # a file written where mhattn lives still counts
    try:
        fresh.write_text("x = 1\n")
        assert watch.changed(before, watch.snapshot(before)) == [str(fresh)]
    finally:
        fresh.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("use_sandbox", MODES)
def test_a_class_of_right_hand_ins_gets_full_marks_at_two_jobs(tmp_path, use_sandbox):
    """Four copies of solutions/, half of them zips, whose unpacking loads a codec while a classmate's worker runs
    (the issue's class of twelve, at a third of the test's time)."""
    import encodings

    sys.modules.pop("encodings.cp437", None)  # loaded afresh by the first zip's names, as in a fresh grader
    encodings._cache.pop("cp437", None)
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(4):
        if i % 2:
            (subs / f"s{i:02d}.zip").write_bytes(zip_bytes(SOLUTIONS))  # zips: unpacking loads codecs meanwhile
        else:
            write_folder(subs / f"s{i:02d}", SOLUTIONS)
    done = grade_class(subs, tmp_path / "out", jobs=2, progress=False, sandbox_mode=use_sandbox)
    totals = {sid: r["total"] for sid, r in done["students"].items()}
    assert totals == {f"s{i:02d}": 100 for i in range(4)}, [
        (sid, x["reason"]) for sid, r in done["students"].items() for x in r["exercises"] if x["points"] < x["max_points"]
    ]


def test_a_normal_user_without_a_sandbox_grades_one_at_a_time_and_reuses_nothing(tmp_path, monkeypatch):
    """Simulated (the suite runs as root in CI): the grader sees no root, so workers run with its rights."""
    monkeypatch.setattr(user, "worker_ids", lambda: None)
    log, subs = tmp_path / "log", tmp_path / "subs"
    stamp = f"import time\nopen({str(log)!r}, 'a').write(f'{{time.time()}} ')\ntime.sleep(0.5)\n"
    stamp_end = f"open({str(log)!r}, 'a').write(f'{{time.time()}}\\n')\n"
    for sid in ("a", "b", "c"):
        write_folder(subs / sid, {EX01: SOLUTIONS[EX01] + stamp + stamp_end})
    first = grade_class(subs, tmp_path / "out", jobs=3, seed=5, progress=False, sandbox_mode=False)
    spans = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(spans) == 3 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    second = grade_class(subs, tmp_path / "out", jobs=3, progress=False, sandbox_mode=False)
    assert second["graded"] == ["a", "b", "c"] and second["skipped"] == []  # nothing it could have written is reused
    assert NOT_ISOLATED in first["notes"] and NOT_ISOLATED in (tmp_path / "out" / "summary.md").read_text()
    assert json.loads((tmp_path / "out" / "results" / "a.json").read_text())["total"] == 5
