"""A Gradescope autograder: the zip to upload, and the grading of one upload inside Gradescope.

:func:`build` writes the zip that Gradescope's autograder specification asks for
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): ``setup.sh`` (run once when the image
is built: installs Python, bubblewrap and this mhattn from the wheel inside the zip) and
``run_autograder`` (run for every upload). Written for Gradescope's Ubuntu 22.04 base image.

:func:`run` is what ``run_autograder`` calls: it grades the uploaded ``ex*.py`` files (or a zip of them)
in ``ROOT/submission`` with a seed derived from the class seed and the student, and writes
``ROOT/results/results.json``: ``score``, ``execution_time``, ``output`` and one test per named check
(``name``, ``number``, ``score``, ``max_score``, ``status``, ``output``, ``visibility``). The reasons are the
grader's: they name shapes and errors, never expected values. ``ROOT`` is ``/autograder`` unless the first
argument or ``MHATTN_AUTOGRADER_ROOT`` says otherwise (for a test).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from mhattn import __version__
from mhattn.classroom.handins import HandinError, files_hash, student_seed, unpack
from mhattn.classroom.wheel import build_wheel
from mhattn.grade import grade
from mhattn.grade.spec import EXERCISES
from mhattn.grade.verdict import all_failed, row

CONFIG = "mhattn_autograder.json"
SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (base image: Ubuntu 22.04).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-pip bubblewrap
python3 -m pip install --no-cache-dir /autograder/source/{wheel}
"""
RUN = """#!/usr/bin/env bash
# Gradescope runs this for every upload: grade /autograder/submission, write /autograder/results/results.json.
# The root moves with the first argument or MHATTN_AUTOGRADER_ROOT (tests); MHATTN_AUTOGRADER_PYTHON picks Python.
exec "${MHATTN_AUTOGRADER_PYTHON:-python3}" -m mhattn.classroom.gradescope "${1:-${MHATTN_AUTOGRADER_ROOT:-/autograder}}"
"""


def build(out, wheel=None, seed: int | None = None) -> Path:
    """Write the autograder zip ``out``: setup.sh, run_autograder, the mhattn wheel and the class seed.

    Args:
        out: the zip to write (replaced).
        wheel: a wheel of mhattn to ship; default one packed from the mhattn being run (:func:`build_wheel`).
        seed: class seed of the hidden inputs (each upload's seed derives from it and the student); default fresh.

    Returns:
        ``out`` as a Path.
    """
    out = Path(out)
    seed = secrets.randbits(31) if seed is None else int(seed)
    with tempfile.TemporaryDirectory(prefix="mhattn-wheel-") as tmp:
        wheel = Path(wheel) if wheel else build_wheel(Path(tmp))
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            _add(z, "setup.sh", SETUP.format(wheel=wheel.name), 0o755)
            _add(z, "run_autograder", RUN, 0o755)
            _add(z, CONFIG, json.dumps({"class_seed": seed, "mhattn": __version__}, indent=2) + "\n", 0o644)
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


def results(report: dict, seed: int, seconds: float, error: str | None) -> dict:
    """Gradescope's results.json from the grader's report: one test per named check."""
    tests = []
    for i, r in enumerate(report["exercises"], 1):
        for j, c in enumerate(r["checks"], 1):
            tests.append({"name": f"{r['name']}: {c['name']}", "number": f"{i}.{j}", "score": c["points"],
                          "max_score": c["max_points"], "status": "passed" if c["points"] == c["max_points"] else "failed",
                          "output": c["reason"], "visibility": "visible"})  # fmt: skip
    head = f"{report['total']}/{report['max_total']} points. "
    head += f"Your hand-in could not be graded: {error}. " if error else ""
    head += f"The hidden tests used seed {seed} (mhattn grade --seed {seed} repeats them)."
    head += " Graded without the bubblewrap sandbox (not available here)." if report.get("sandbox") is False else ""
    return {"score": report["total"], "execution_time": round(seconds, 3), "output": head, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}  # fmt: skip


def run(root) -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; returns what was written."""
    start, root = time.monotonic(), Path(root)
    try:
        class_seed = int(json.loads((root / "source" / CONFIG).read_text(encoding="utf-8"))["class_seed"])
    except (OSError, ValueError, KeyError, TypeError):
        class_seed = 0
    seed = student_seed(class_seed, _student(root))
    error = None
    with tempfile.TemporaryDirectory(prefix="mhattn-upload-") as tmp:
        try:
            folder = unpack(root / "submission", Path(tmp))
            report = grade(folder, seed=seed, jobs=2)
            report["hash"] = files_hash(folder)
        except HandinError as err:
            error = str(err)
        except Exception as err:  # noqa: BLE001 - Gradescope must get a results.json whatever happened
            error = f"the grader failed ({type(err).__name__}: {str(err)[:200]})"
    if error:
        rows = [row(ex.name, all_failed(ex.checks, error)) for ex in EXERCISES]
        report = {"exercises": rows, "total": 0, "max_total": sum(ex.points for ex in EXERCISES)}
    data = results(report, seed, time.monotonic() - start, error)
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = argv[0] if argv else os.environ.get("MHATTN_AUTOGRADER_ROOT", "/autograder")
    data = run(root)
    print(data["output"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
