"""Attacks on the grader (tests/grader/grader_attacks/cases.py), each graded in the modes where the grader must hold.

For every case: the attacked exercise scores 0 with a clear one-line reason (or, for a correct
answer with a harmless extra child or thread, its full points), a neighbouring exercise graded at
the same time keeps its full marks, the grader returns a normal report that serialises to JSON,
and no process the submission started is left running. At the end, the grader's own files and
site-packages are unchanged and a clean run still gives solutions/ full marks and a wrong answer 0.
Hand-ins that are not plain files (links, FIFOs, devices, folders): test_grade_bad_files.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import site
import sys
import tempfile
from pathlib import Path

import pytest

from mhattn.grade import EXERCISES, grade, reap, sandbox

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from exercise_files import build  # noqa: E402
from grader_attacks.cases import ATTACKS, BOMB, KEEP_MTIME, WRONG  # noqa: E402
from grader_attacks.edits import MARKER, apply, at_import  # noqa: E402

pytestmark = pytest.mark.grader
FULL = {ex.name: ex.points for ex in EXERCISES}
HAS_BWRAP = sandbox.available()
MODES = {
    "sandbox": pytest.param(True, marks=pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap (bwrap) is not available")),
    "plain": pytest.param(False),
}
NEIGHBOUR = {
    "ex05_combine_heads": "ex01_split_heads",
    "ex02_softmax": "ex08_count_parameters",
    "ex11_online_softmax": "ex05_combine_heads",
    "ex08_count_parameters": "ex01_split_heads",
    "ex10_random_removal": "ex01_split_heads",
    "ex03_attention_forward": "ex05_combine_heads",
    "ex04_attention_backward": "ex01_split_heads",
}


def solution_files() -> dict[str, str]:
    return {n: t for n, t in build(ROOT / "exercises_src")["solutions"].items() if n.startswith("ex")}


def write_submission(folder: Path, edits) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in apply(solution_files(), edits).items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def leftovers(scope: Path) -> list[str]:
    """Command lines of running processes a test submission started, or of a worker of a grade whose temporary
    files are under ``scope`` that outlived it (other graders running on the machine do not count)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")) if os.path.isdir("/proc") else []:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if MARKER in cmd or (str(scope) in cmd and "worker.py" in cmd):
            found.append(cmd)
    return found


def fingerprint() -> str:
    """A hash of the mhattn package's files and of site-packages' top-level names."""
    h = hashlib.sha256()
    for p in sorted(sandbox.package_dir().rglob("*.py")):
        h.update(p.read_bytes())
    for d in site.getsitepackages():
        h.update("\n".join(sorted(os.listdir(d))).encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def before():
    return fingerprint()


def cases_for(mode: str):
    """The attacks graded in ``mode``; one that must time out waits the whole 10 s limit: marked slow."""
    return [pytest.param(MODES[mode].values[0], c, id=f"{mode}-{c.name}",
                         marks=(*MODES[mode].marks, *((pytest.mark.slow,) if c.words == "timed out" else ())))
            for c in ATTACKS if mode in c.modes]  # fmt: skip


@pytest.mark.parametrize("use_sandbox, case", cases_for("sandbox") + cases_for("plain"))
def test_attack_is_contained(use_sandbox, case, tmp_path, before, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the grader's temporary files, named in its workers' argv
    folder = write_submission(tmp_path / "sub", case.edits)
    other = NEIGHBOUR[case.exercise]
    report = grade(folder, only=[case.exercise, other], timeout=10.0, seed=3, sandbox_mode=use_sandbox)
    json.loads(json.dumps(report))
    rows = {r["name"]: r for r in report["exercises"]}
    assert report["sandbox"] is use_sandbox
    assert rows[other]["points"] == FULL[other], rows[other]["reason"]
    why = rows[case.exercise]["reason"]
    assert "\n" not in why and "\x1b" not in why
    if case.full:
        assert rows[case.exercise]["points"] == FULL[case.exercise], why
    else:  # 0, or (partial credit) the points of the checks the attack left alone, e.g. a correct softmax_backward
        assert rows[case.exercise]["points"] < FULL[case.exercise] and case.words in why, why
    assert not leftovers(tmp_path)


@pytest.mark.parametrize("case", WRONG, ids=[c.name for c in WRONG])
@pytest.mark.parametrize("use_sandbox", list(MODES.values()), ids=list(MODES))
def test_wrong_answer_loses_its_points_in_both_modes(use_sandbox, case, tmp_path):
    report = grade(write_submission(tmp_path, case.edits), only=[case.exercise], seed=5, sandbox_mode=use_sandbox)
    row = report["exercises"][0]
    assert row["points"] < row["max_points"] and case.words in row["reason"], row["reason"]


@pytest.mark.parametrize("use_sandbox", list(MODES.values()), ids=list(MODES))
def test_the_worker_runs_the_text_the_grader_checked(use_sandbox, tmp_path, monkeypatch):
    """A file changed after its check (e.g. by another exercise's worker) is not read a second time."""
    from mhattn.grade import scan

    read = scan.read_source

    def read_then_swap(path):
        checked = read(path)
        path.write_text("raise SystemExit('the second read of the file')\n", encoding="utf-8")
        return checked

    monkeypatch.setattr(scan, "read_source", read_then_swap)
    report = grade(write_submission(tmp_path, ()), only=["ex05"], sandbox_mode=use_sandbox)
    assert report["total"] == FULL["ex05_combine_heads"], report["exercises"][0]["reason"]


def test_without_a_sandbox_a_changed_startup_file_is_reported(tmp_path):
    """Plain mode as a normal user cannot stop a write to site-packages; it scores 0 and names the file (a harmless
    .pth here). As root the worker's user may not write there at all."""
    target = Path(site.getsitepackages()[0]) / "zz_mhattn_attack_plain.pth"
    code = f"with open({str(target)!r}, 'w') as f:\n    f.write('# harmless\\n')"
    row = _graded_without_sandbox(tmp_path, code, target)
    assert _stopped_or_reported(row, target), row["reason"]


def _stopped_or_reported(row: dict, path) -> bool:
    """0 points, and why: as root the write was refused (the worker runs as an unprivileged user, and in plain mode in a
    mount namespace where the installed packages may be read-only), else it is named."""
    if os.geteuid() == 0:
        return row["points"] == 0 and ("PermissionError" in row["reason"] or "Read-only file system" in row["reason"])
    return row["points"] == 0 and f"changed {path} while it was graded" in row["reason"]


def _graded_without_sandbox(tmp_path, code, *cleanup):
    """ex05's row after a plain-mode grade of a submission that runs ``code`` at import; ``cleanup`` files removed."""
    folder = write_submission(tmp_path, (at_import("ex05_combine_heads.py", code),))
    try:
        return grade(folder, only=["ex05"], sandbox_mode=False)["exercises"][0]
    finally:
        for path in cleanup:
            path.unlink(missing_ok=True)


def test_without_a_sandbox_a_rewrite_that_keeps_size_and_mtime_is_reported(tmp_path):
    """os.utime puts back the modification time, not the change time (the file is rewritten with its own bytes)."""
    folder = write_submission(tmp_path, (at_import("ex05_combine_heads.py", KEEP_MTIME),))
    report = grade(folder, only=["ex05"], sandbox_mode=False)
    row = report["exercises"][0]
    if os.geteuid() == 0:  # the worker's user may not open the file for writing: the attack (which hides OSError) fails
        assert row["points"] == FULL["ex05_combine_heads"], row["reason"]
    else:
        assert row["points"] == 0 and "grade/__main__.py while it was graded" in row["reason"], row["reason"]


def test_zz_later_runs_are_unaffected(before, tmp_path):
    """Runs after the attacks: the grader's files are as they were, and grading still tells right from wrong."""
    assert fingerprint() == before
    clean = grade(write_submission(tmp_path / "clean", ()), seed=11)
    assert clean["total"] == clean["max_total"], [r["reason"] for r in clean["exercises"]]
    wrong = grade(write_submission(tmp_path / "wrong", WRONG[1].edits), only=["ex02"], seed=11)
    forward = {c["name"]: c["points"] for c in wrong["exercises"][0]["checks"] if c["name"] != "backward"}
    assert len(forward) == 2 and not any(forward.values()), forward  # a softmax over the wrong axis; its backward is right


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap (bwrap) is not available")
def test_the_sandbox_shows_only_what_a_submission_needs(tmp_path):
    """Inside the sandbox: no solutions/, an empty grader folder, a read-only mhattn and root, loopback only, few
    processes, and mhattn's own dependencies alone in the package folder (numpy, array-api-compat, threadpoolctl)."""
    code = f"""
import os, socket
import mhattn, numpy
pkg = os.path.dirname(os.path.realpath(mhattn.__file__))
site = os.path.dirname(os.path.dirname(os.path.realpath(numpy.__file__)))
net = sorted(name for _, name in socket.if_nameindex())
seen = dict(solutions=os.path.exists({str(ROOT / "solutions")!r}), submission_folder=os.path.exists({str(tmp_path)!r}),
            grader=os.listdir(os.path.join(pkg, "grade")),
            writable=[d for d in (pkg, "/", "/dev", "/run") if os.access(d, os.W_OK)],
            others=[n for n in os.listdir(site) if not n.startswith(("numpy", "mhattn", "array_api_compat", "threadpoolctl"))],
            net=net,
            processes=len([p for p in os.listdir("/proc") if p.isdigit()]))
raise ValueError(repr(seen))
"""
    folder = write_submission(tmp_path / "sub", ())
    (folder / "ex08_count_parameters.py").write_text(code, encoding="utf-8")
    why = grade(folder, only=["ex08"], sandbox_mode=True)["exercises"][0]["reason"]
    for part in (
        "'solutions': False",
        "'submission_folder': False",
        "'grader': []",
        "'writable': []",
        "'others': []",
        "'net': ['lo']",
    ):
        assert part in why, why
    assert int(why.split("'processes': ")[1].split("}")[0]) <= 3, why


def _reasons(report) -> dict:
    return {r["name"]: (r["points"], r["reason"]) for r in report["exercises"]}


@pytest.mark.parametrize("use_sandbox", list(MODES.values()), ids=list(MODES))
def test_a_fork_bomb_is_contained_quickly(use_sandbox, tmp_path, monkeypatch):
    """A submission that forks without end gets a bounded number of processes, scores 0 when its time is up, and
    leaves nothing running."""
    import time

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = write_submission(tmp_path / "sub", BOMB.edits)
    start = time.monotonic()
    report = grade(folder, only=["ex05", "ex01"], timeout=3.0, seed=1, sandbox_mode=use_sandbox)
    rows = _reasons(report)
    assert time.monotonic() - start < 20
    assert rows["ex05_combine_heads"][0] == 0 and rows["ex01_split_heads"][0] == FULL["ex01_split_heads"], rows
    assert not leftovers(tmp_path)


@pytest.mark.parametrize("use_sandbox", list(MODES.values()), ids=list(MODES))
def test_the_worker_runs_isolated_with_a_process_limit(use_sandbox, tmp_path):
    """No start-up file runs in the worker (-I -S: no site, no .pth), only the allowed packages are on its path,
    and its processes are limited (RLIMIT_NPROC, or a pids control group where the grader is root)."""
    code = """
import os, resource, sys
pids = open("/proc/self/cgroup").read() if os.path.exists("/proc/self/cgroup") else ""
seen = dict(isolated=sys.flags.isolated, no_site=sys.flags.no_site, site="site" in sys.modules,
            nproc=resource.getrlimit(resource.RLIMIT_NPROC)[0] != resource.RLIM_INFINITY,
            group="mhattn-grade-" in pids, path=sorted(n for d in sys.path[3:] for n in os.listdir(d)))
raise ValueError(repr(seen))
"""
    folder = write_submission(tmp_path / "sub", ())
    (folder / "ex08_count_parameters.py").write_text(code, encoding="utf-8")
    why = grade(folder, only=["ex08"], sandbox_mode=use_sandbox)["exercises"][0]["reason"]
    for part in ("'isolated': 1", "'no_site': 1", "'site': False", "'nproc': True"):
        assert part in why, why
    if os.geteuid() == 0 and not use_sandbox and reap._pids_base() is not None:  # the sandbox has its own cgroup view
        assert "'group': True" in why, why
    if not use_sandbox:  # the folder of links: mhattn and the allowed packages, nothing else (no torch)
        listed = why.split("'path': ")[1]
        assert "mhattn" in listed and "numpy" in listed and "torch" not in listed, why


def test_without_a_sandbox_a_hook_in_a_module_a_pth_imports_is_reported(tmp_path):
    """A .pth file imports a module at every start-up; a submission that appends an import hook to that module
    would run in every later grader. The grader watches what .pth files import, and says so."""
    site_dir = Path(site.getsitepackages()[0])
    pth, module = site_dir / "zz_mhattn_attack_hook.pth", site_dir / "zz_mhattn_attack_hooked.py"
    module.write_text("# a module a .pth file imports at start-up\n", encoding="utf-8")
    pth.write_text("import zz_mhattn_attack_hooked\n", encoding="utf-8")
    code = f"with open({str(module)!r}, 'a') as f:\n    f.write('import sys  # an import hook would go here\\n')"
    row = _graded_without_sandbox(tmp_path, code, pth, module)
    assert _stopped_or_reported(row, module), row["reason"]
    assert "reinstall" in row["reason"] or os.geteuid() == 0
