"""The grader's trust model where it matters most: who runs a learner's code, and what that code can reach.

- As root (Gradescope, an instructor with sudo) every worker runs as an unprivileged user, in both modes: its
  uid is not 0, ``/proc/sys`` and ``/etc/shadow`` are out of reach, and it cannot write the output folder, a
  stored result, the class configuration or another student's hand-in, nor read the class seed, nor signal the
  grader. Plain mode as root needs a Python that user can start; without one its tests skip (sandbox ones run).
- Seeds: the class seed has 128 random bits; a hand-in's seed is an HMAC of the class seed, the id and the files;
  it reaches the instructor's files only, never the feedback; a given class seed repeats a grading.
- Stored results (plain mode as a normal user, where a worker can reach them): one edited by anyone but the
  grader is graded again, and one a worker rewrites while the class is graded (with a valid HMAC, as plain mode
  lets it read the class seed) changes neither that run's gradebook nor what the next run reuses.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mhattn.classroom import grade_class
from mhattn.classroom.handins import class_seed, files_hash, student_seed
from mhattn.grade import grade, pool, sandbox, user

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS  # noqa: E402

pytestmark = pytest.mark.grader
EX01 = "ex01_split_heads.py"
IS_ROOT = os.geteuid() == 0


def plain_ok() -> bool:
    """Plain mode works here: not root, or root with a Python the worker's user can start."""
    try:
        user.check_plain(user.worker_ids(), json.dumps([str(sandbox.package_dir().parent), str(Path(np.__file__).parents[1])]))
    except RuntimeError:
        return False
    return True


MODES = [
    pytest.param(True, id="sandbox", marks=pytest.mark.skipif(not sandbox.available(), reason="no working bubblewrap")),
    pytest.param(
        False, id="plain", marks=pytest.mark.skipif(not plain_ok(), reason="the worker's user cannot start this Python")
    ),
]


@pytest.fixture
def open_dir():
    """A folder every user may pass through and read (0755, under /tmp): only ownership keeps a worker out."""
    path = Path(tempfile.mkdtemp(prefix="mhattn-open-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


PROBE = """
import json, os, signal
def attempt(name, fn):
    try:
        fn()
        return name + "=DONE"
    except OSError as err:
        return f"{{name}}={{err.errno}}"
facts = [f"uid={{os.getuid()}},{{os.geteuid()}} gid={{os.getgid()}} groups={{os.getgroups()}}"]
facts.append(attempt("sysctl", lambda: open("/proc/sys/kernel/core_pattern", "w")))
facts.append(attempt("shadow", lambda: open("/etc/shadow", "rb").read(1)))
facts.append(attempt("seed", lambda: open({out!r} + "/class.json").read()))
facts.append(attempt("result", lambda: open({out!r} + "/results/bob.json", "a")))
facts.append(attempt("newresult", lambda: open({out!r} + "/results/mallory.json", "w")))
facts.append(attempt("csv", lambda: open({out!r} + "/gradebook.csv", "a")))
facts.append(attempt("handin", lambda: open({bob!r}, "a")))
facts.append(attempt("kill", lambda: os.kill(os.getppid(), signal.SIGSTOP)))
raise RuntimeError(" ".join(facts))
"""


@pytest.mark.skipif(not IS_ROOT, reason="run as root only (as CI and Gradescope do)")
@pytest.mark.parametrize("use_sandbox", MODES)
def test_as_root_the_worker_is_an_unprivileged_user_that_reaches_nothing(open_dir, use_sandbox):
    subs, out = open_dir / "submissions", open_dir / "out"
    (subs / "bob").mkdir(parents=True)
    (subs / "bob" / EX01).write_text(SOLUTIONS[EX01], encoding="utf-8")
    grade_class(subs, out, jobs=1, seed=5, progress=False, sandbox_mode=use_sandbox)  # bob first: his result exists
    (subs / "alice").mkdir()
    (subs / "alice" / EX01).write_text(PROBE.format(out=str(out), bob=str(subs / "bob" / EX01)), encoding="utf-8")
    before = {p: p.read_bytes() for p in [out / "results" / "bob.json", out / "class.json", subs / "bob" / EX01]}
    done = grade_class(subs, out, jobs=1, progress=False, sandbox_mode=use_sandbox)
    why = done["students"]["alice"]["exercises"][0]["reason"]
    facts = dict(f.split("=", 1) for f in why.split("RuntimeError: ")[1].split(" (")[0].split(" ") if "=" in f)
    uids = {int(u) for u in facts["uid"].split(",")}
    assert 0 not in uids and facts["gid"] != "0" and facts["groups"] in ("[]", f"[{facts['gid']}]"), why
    assert all(facts[k] != "DONE" for k in ("sysctl", "shadow", "seed", "result", "newresult", "csv", "handin", "kill"))
    if use_sandbox:
        assert facts["sysctl"] == "30", why  # EROFS: /proc/sys is bound read-only
    assert {p: p.read_bytes() for p in before} == before and not (out / "results" / "mallory.json").exists()
    assert done["students"]["bob"]["total"] == 5 and "alice" in done["graded"] and "bob" in done["skipped"]


def test_a_class_seed_has_128_random_bits():
    seeds = [class_seed() for _ in range(64)]
    assert len(set(seeds)) == 64 and all(0 <= s < 2**128 for s in seeds)
    assert max(s.bit_length() for s in seeds) >= 120  # below that for all 64: chance 2**-512


def test_a_handin_seed_is_an_hmac_of_class_seed_id_and_files():
    key, digest = 2**100 + 12345, "ab" * 32
    expected = hmac.new(str(key).encode(), b"mhattn-grade\0alice\0" + digest.encode(), hashlib.sha256).digest()[:8]
    assert student_seed(key, "alice", digest) == int.from_bytes(expected, "big")
    old = int.from_bytes(hashlib.sha256(f"mhattn-grade:{key}:alice".encode()).digest()[:6], "big")  # guessable
    assert student_seed(key, "alice") != old
    others = {student_seed(key + 1, "alice", digest), student_seed(key, "bob", digest), student_seed(key, "alice", "cd" * 32)}
    assert student_seed(key, "alice", digest) not in others and len(others) == 3


def _handin(subs: Path, sid: str, text: str) -> Path:
    (subs / sid).mkdir(parents=True, exist_ok=True)
    (subs / sid / EX01).write_text(text, encoding="utf-8")
    return subs / sid


def test_seeds_reach_the_instructors_files_only_and_repeat_a_grading(tmp_path):
    subs = tmp_path / "subs"
    folder = _handin(subs, "alice", SOLUTIONS[EX01])
    done = grade_class(subs, tmp_path / "out", jobs=1, progress=False)
    res, seed0 = done["students"]["alice"], done["class_seed"]
    assert seed0.bit_length() > 31 and res["seed"] == student_seed(seed0, "alice", files_hash(folder))
    feedback = (tmp_path / "out" / "feedback" / "alice.md").read_text(encoding="utf-8")
    assert str(res["seed"]) not in feedback and str(seed0) not in feedback and "seed" not in feedback.lower()
    assert (tmp_path / "out" / "class.json").stat().st_mode & 0o077 == 0
    assert (tmp_path / "out" / "results").stat().st_mode & 0o077 == 0
    again = grade_class(subs, tmp_path / "again", jobs=1, seed=seed0, progress=False)["students"]["alice"]
    assert again["seed"] == res["seed"] and again["exercises"] == res["exercises"]
    alone = grade(folder, only=["ex01"], seed=res["seed"])["exercises"][0]
    assert alone == res["exercises"][0]


def test_a_stored_result_edited_outside_the_grader_is_graded_again(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    _handin(subs, "bob", SOLUTIONS[EX01])
    grade_class(subs, out, jobs=1, seed=9, progress=False)
    stored = out / "results" / "bob.json"
    data = json.loads(stored.read_text(encoding="utf-8"))
    data["total"] = 100
    stored.write_text(json.dumps(data), encoding="utf-8")  # its HMAC no longer matches
    again = grade_class(subs, out, jobs=1, progress=False)
    assert again["graded"] == ["bob"] and again["students"]["bob"]["total"] == 5
    assert grade_class(subs, out, jobs=1, progress=False)["skipped"] == ["bob"]  # as the grader left it: reused


FORGER = """
import hashlib, hmac, json
seed = json.load(open({out!r} + "/class.json"))["seed"]  # plain mode as a normal user can read it
path = {out!r} + "/results/bob.json"
data = json.load(open(path))
data["total"] = 100
data.pop("mac")
body = json.dumps(data, sort_keys=True).encode()
data["mac"] = hmac.new(b"mhattn-results\\0" + str(seed).encode(), body, hashlib.sha256).hexdigest()
json.dump(data, open(path, "w"))
"""


@pytest.mark.parametrize("use_sandbox", MODES)
def test_a_worker_that_rewrites_a_classmates_stored_result_changes_nothing(tmp_path, use_sandbox):
    """Even with a valid HMAC (plain mode as a normal user reaches class.json): results are read before any worker
    starts and all written again at the end. As root or in the sandbox the write itself fails."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    _handin(subs, "bob", SOLUTIONS[EX01])
    grade_class(subs, out, jobs=1, seed=9, progress=False, sandbox_mode=use_sandbox)
    _handin(subs, "alice", FORGER.format(out=str(out)))
    run2 = grade_class(subs, out, jobs=1, progress=False, sandbox_mode=use_sandbox)
    assert run2["skipped"] == ["bob"] and run2["students"]["bob"]["total"] == 5
    rows = (out / "gradebook.csv").read_text(encoding="utf-8").splitlines()
    assert next(r for r in rows if r.startswith("bob,")).split(",")[-2] == "5"
    assert json.loads((out / "results" / "bob.json").read_text(encoding="utf-8"))["total"] == 5
    run3 = grade_class(subs, out, jobs=1, progress=False, sandbox_mode=use_sandbox)
    assert run3["students"]["bob"]["total"] == 5 and "bob" in run3["skipped"]


@pytest.mark.skipif(not IS_ROOT, reason="run as root only")
def test_a_pool_that_holds_root_is_refused(monkeypatch):
    for text in ("0-3", "0"):
        monkeypatch.setenv(pool.ENV, text)
        with pytest.raises(ValueError, match="never runs as root"):
            user.worker_ids()
    monkeypatch.setenv(pool.ENV, "nobody")
    with pytest.raises(ValueError, match="FIRST-LAST"):
        user.worker_ids()


@pytest.mark.skipif(not IS_ROOT, reason="run as root only")
def test_the_dropper_gives_up_root_and_every_capability():
    code = "import os; print(os.getresuid(), os.getresgid(), os.getgroups()); print(open('/proc/self/status').read())"
    out = subprocess.run([*user.drop((65534, 65534)), sys.executable, "-I", "-S", "-c", code], capture_output=True,
                         text=True, timeout=60, cwd="/")  # fmt: skip
    if out.returncode and "Permission denied" in out.stderr:
        pytest.skip("the worker's user cannot start this Python")
    head, status = out.stdout.split("\n", 1)
    assert head == "(65534, 65534, 65534) (65534, 65534, 65534) []", out.stderr
    caps = {line.split(":")[0]: int(line.split()[1], 16) for line in status.splitlines() if line.startswith("Cap")}
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapAmb"] == 0
