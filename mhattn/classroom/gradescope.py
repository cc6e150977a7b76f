"""A Gradescope autograder: the zip to upload, and the grading of one upload inside Gradescope.

:func:`build` writes the zip that Gradescope's autograder specification asks for
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): ``setup.sh`` (run once, as root, when the
image is built: installs Python, bubblewrap and this mhattn from the wheel inside the zip, into the system
Python on Ubuntu 22.04, into a venv it creates where the image refuses that (PEP 668: Ubuntu 24.04, Debian 12))
and ``run_autograder`` (run for every upload, as root).

:func:`run` is what ``run_autograder`` calls. Before anything of the upload runs it takes ``ROOT`` from other
users (:func:`close_root`) and writes a "grading did not finish" result of 0. It grades the uploaded ``ex*.py``
files (or a zip of them) in ``ROOT/submission``, each worker as an unprivileged user
(:mod:`mhattn.grade.user`), with a seed derived from the class seed, the student and the files, and replaces
``ROOT/results/results.json`` whole: ``score``, ``execution_time``, ``output`` and one test per named check
(``name``, ``number``, ``score``, ``max_score``, ``status``, ``output``, ``visibility``). The reasons are the
grader's: they name shapes and errors, never expected values. The seed goes to the standard output only,
which Gradescope shows the instructor (``stdout_visibility`` hidden). ``ROOT`` is ``/autograder`` unless the
first argument or ``MHATTN_AUTOGRADER_ROOT`` says otherwise (for a test).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from mhattn import __version__
from mhattn.classroom.handins import HandinError, class_seed, files_hash, student_seed, unpack
from mhattn.classroom.wheel import build_wheel
from mhattn.grade import grade
from mhattn.grade.spec import EXERCISES
from mhattn.grade.verdict import all_failed, row

CONFIG = "mhattn_autograder.json"
VENV = "/opt/mhattn-venv"  # outside /autograder, which run_autograder closes to other users
SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu 22.04; newer images too).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SOURCE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
VENV="${{MHATTN_AUTOGRADER_VENV:-{venv}}}"
apt-get update
apt-get install -y --no-install-recommends python3 python3-pip python3-venv bubblewrap
chmod 600 "$SOURCE/{config}"  # the class seed: root's alone
# Ubuntu 22.04: into the system Python. An image that refuses that (PEP 668, "externally-managed-environment",
# as Ubuntu 24.04 and Debian 12 do): into a venv, which run_autograder then uses.
if log="$(python3 -m pip install --no-cache-dir "$SOURCE/{wheel}" 2>&1)"; then
  echo "$log"
elif grep -q externally-managed-environment <<<"$log"; then
  echo "this Python is externally managed (PEP 668): installing into the venv $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --no-cache-dir "$SOURCE/{wheel}"
else
  echo "$log" >&2
  exit 1
fi
"""
RUN = """#!/usr/bin/env bash
# Gradescope runs this for every upload, as root: grade /autograder/submission, write /autograder/results/results.json.
# The root moves with the first argument or MHATTN_AUTOGRADER_ROOT (tests). Python: MHATTN_AUTOGRADER_PYTHON, else
# the venv that setup.sh made on a PEP 668 image, else python3.
VENV="${{MHATTN_AUTOGRADER_VENV:-{venv}}}"
PY="${{MHATTN_AUTOGRADER_PYTHON:-}}"
if [ -z "$PY" ]; then
  if [ -x "$VENV/bin/python" ]; then PY="$VENV/bin/python"; else PY=python3; fi
fi
exec "$PY" -m mhattn.classroom.gradescope "${{1:-${{MHATTN_AUTOGRADER_ROOT:-/autograder}}}}"
"""
PENDING = "Grading did not finish (the autograder stopped before it wrote a result): 0 points. Submit again."


def build(out, wheel=None, seed: int | None = None) -> Path:
    """Write the autograder zip ``out`` (mode 0600: it holds the class seed): setup.sh, run_autograder, the mhattn
    wheel and the class seed.

    Args:
        out: the zip to write (replaced).
        wheel: a wheel of mhattn to ship; default one packed from the mhattn being run (:func:`build_wheel`).
        seed: class seed of the hidden inputs (each upload's seed derives from it, the student and the files);
            default 128 fresh random bits.

    Returns:
        ``out`` as a Path.
    """
    out = Path(out)
    seed = class_seed() if seed is None else int(seed)
    with tempfile.TemporaryDirectory(prefix="mhattn-wheel-") as tmp:
        wheel = Path(wheel) if wheel else build_wheel(Path(tmp))
        out.unlink(missing_ok=True)  # it holds the class seed: a new file, its owner's alone (0600)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
            _add(z, "setup.sh", SETUP.format(wheel=wheel.name, venv=VENV, config=CONFIG), 0o755)
            _add(z, "run_autograder", RUN.format(venv=VENV), 0o755)
            _add(z, CONFIG, json.dumps({"class_seed": seed, "mhattn": __version__}, indent=2) + "\n", 0o600)
            z.write(wheel, wheel.name)
    return out


def _add(z: zipfile.ZipFile, name: str, text: str, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, text)


def _student(root: Path) -> str:
    """Who uploaded: the user ids in ``submission_metadata.json`` (a group: all of them), else ``"submission"``."""
    try:
        meta = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        ids = sorted(str(u.get("id") or u.get("email")) for u in meta.get("users", []))
        return "+".join(ids) or "submission"
    except (OSError, ValueError, AttributeError, TypeError):
        return "submission"


def results(report: dict, seconds: float, error: str | None) -> dict:
    """Gradescope's results.json from the grader's report: one test per named check, and no seed."""
    tests = []
    for i, r in enumerate(report["exercises"], 1):
        for j, c in enumerate(r["checks"], 1):
            tests.append({"name": f"{r['name']}: {c['name']}", "number": f"{i}.{j}", "score": c["points"],
                          "max_score": c["max_points"], "status": "passed" if c["points"] == c["max_points"] else "failed",
                          "output": c["reason"], "visibility": "visible"})  # fmt: skip
    head = f"{report['total']}/{report['max_total']} points. "
    head += f"Your hand-in could not be graded: {error}. " if error else ""
    head += "The hidden tests drew new inputs for these files."
    head += " Graded without the bubblewrap sandbox (not available here)." if report.get("sandbox") is False else ""
    return {"score": report["total"], "execution_time": round(seconds, 3), "output": head, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}  # fmt: skip


def close_root(root: Path) -> None:
    """Take ``root`` from other users, the results folder from writers but its owner, the configuration from readers.

    Run as root, each worker runs as an unprivileged user, who then cannot reach the class configuration, the
    results or the upload, whatever modes Gradescope gave them (course autograders do ``chmod -R o= /autograder``).
    """
    (root / "results").mkdir(parents=True, exist_ok=True)
    for path, strip in ((root, 0o077), (root / "results", 0o022), (root / "source" / CONFIG, 0o077)):
        if path.exists() and not path.is_symlink():
            path.chmod(path.stat().st_mode & ~strip & 0o7777)


def write_results(folder: Path, data: dict) -> None:
    """Replace ``folder/results.json`` whole (a new file renamed over it): never half-written, never another's file."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".results-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, folder / "results.json")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _zero(error: str) -> dict:
    rows = [row(ex.name, all_failed(ex.checks, error)) for ex in EXERCISES]
    return {"exercises": rows, "total": 0, "max_total": sum(ex.points for ex in EXERCISES)}


def _grade_upload(root: Path, tmp: Path) -> tuple[dict | None, str | None]:
    """``(report, None)`` or ``(None, why it could not be graded)``; prints the hand-in's seed (for the instructor)."""
    try:
        seed0 = int(json.loads((root / "source" / CONFIG).read_text(encoding="utf-8"))["class_seed"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        return None, f"the autograder's {CONFIG} could not be read ({type(err).__name__}): tell the instructor"
    try:
        folder = unpack(root / "submission", tmp)
        digest, student = files_hash(folder), _student(root)
        seed = student_seed(seed0, student, digest)
        print(f"student {student}, files {digest[:16]}: seed {seed} (in a file, mhattn grade FOLDER --seed-file FILE repeats it)")
        return grade(folder, seed=seed, jobs=2), None
    except HandinError as err:
        return None, str(err)
    except Exception as err:  # noqa: BLE001 - Gradescope must get a results.json whatever happened
        return None, f"the grader failed ({type(err).__name__}: {str(err)[:200]})"


def run(root) -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; returns what was written.

    First, before anything of the upload runs: :func:`close_root`, and a result of 0 (:data:`PENDING`) that stays
    if the grader is stopped. The hand-in's seed is printed, never written into the result.
    """
    start, root = time.monotonic(), Path(root)
    close_root(root)
    write_results(root / "results", {"score": 0, "execution_time": 0, "output": PENDING, "visibility": "visible",
                                     "stdout_visibility": "hidden", "tests": []})  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="mhattn-upload-") as tmp:
        report, error = _grade_upload(root, Path(tmp))
    data = results(_zero(error) if error else report, time.monotonic() - start, error)
    write_results(root / "results", data)
    return data


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = argv[0] if argv else os.environ.get("MHATTN_AUTOGRADER_ROOT", "/autograder")
    data = run(root)
    print(data["output"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
