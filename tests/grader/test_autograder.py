"""mhattn autograder gradescope: the zip follows Gradescope's layout, its wheel installs, and run_autograder
writes a results.json that validates against the documented format (tests/data/gradescope_results.schema.json)
for a right, a partly right and a broken hand-in, one test per named check, reasons without expected values."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mhattn import __version__, cli
from mhattn.classroom import gradescope
from mhattn.grade import EXERCISES

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS, TOTAL, partly, zip_bytes  # noqa: E402

SCHEMA = json.loads((ROOT / "tests" / "data" / "gradescope_results.schema.json").read_text(encoding="utf-8"))
N_CHECKS = sum(len(ex.checks) for ex in EXERCISES)
pytestmark = pytest.mark.grader


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """The zip built by the command, unpacked as Gradescope does into ROOT/source."""
    tmp = tmp_path_factory.mktemp("autograder")
    (tmp / "seed.json").write_text('{"seed": 11}')
    assert (
        cli.main(["autograder", "gradescope", "--out", str(tmp / "autograder.zip"), "--seed-file", str(tmp / "seed.json")]) == 0
    )
    with zipfile.ZipFile(tmp / "autograder.zip") as z:
        z.extractall(tmp / "source")
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    return tmp / "autograder.zip", tmp / "source", modes


def run_autograder(source: Path, root: Path, upload: dict[str, bytes], by_env: bool) -> dict:
    """Lay out ``root`` as Gradescope's /autograder (source/, submission/ with ``upload``) and run run_autograder."""
    shutil.copytree(source, root / "source")
    source = root / "source"
    (root / "submission").mkdir(parents=True)
    for name, data in upload.items():
        (root / "submission" / name).write_bytes(data)
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": 4242, "email": "a@b.c"}]}))
    env = {**os.environ, "MHATTN_AUTOGRADER_PYTHON": sys.executable}
    argv = ["bash", str(source / "run_autograder")]
    if by_env:
        env["MHATTN_AUTOGRADER_ROOT"] = str(root)
    else:
        argv.append(str(root))
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def test_the_zip_has_gradescopes_layout(autograder):
    path, source, modes = autograder
    wheel = f"mhattn-{__version__}-py3-none-any.whl"
    assert {"setup.sh", "run_autograder", wheel, gradescope.CONFIG} == set(modes)
    assert all(modes[n] & stat.S_IXUSR for n in ("setup.sh", "run_autograder"))
    setup = (source / "setup.sh").read_text()
    assert f'pip install --no-cache-dir "$SOURCE/{wheel}"' in setup and "bubblewrap" in setup
    assert "Ubuntu 22.04" in setup and "externally-managed-environment" in setup
    assert json.loads((source / gradescope.CONFIG).read_text())["class_seed"] == 11
    assert modes[gradescope.CONFIG] & 0o077 == 0  # the class seed: root's alone


def test_the_wheel_installs_and_holds_the_grader(autograder, tmp_path):
    _, source, _ = autograder
    wheel = next(source.glob("*.whl"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True, timeout=120)  # fmt: skip
    probe = "import mhattn, mhattn.classroom.gradescope, importlib.metadata as md; print(mhattn.__file__, md.version('mhattn'))"
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(target)}, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    assert out.startswith(str(target)) and out.split()[-1] == __version__
    assert (target / "mhattn" / "grade" / "worker.py").is_file() and (target / "bin" / "mhattn").is_file()


UPLOADS = {
    "right": ({n: t.encode() for n, t in SOLUTIONS.items()}, TOTAL),
    "partly_right_zip": ({"handin.zip": zip_bytes(partly())}, sum(ex.points for ex in EXERCISES[:5])),
    "broken_zip": ({"handin.zip": b"PK\x03\x04 not a zip"}, 0),
}


@pytest.mark.parametrize("kind", list(UPLOADS))
def test_run_autograder_writes_valid_results(autograder, tmp_path, kind):
    _, source, _ = autograder
    upload, total = UPLOADS[kind]
    data = run_autograder(source, tmp_path / "root", upload, by_env=kind == "right")
    jsonschema.validate(data, SCHEMA)
    assert data["score"] == total == sum(t["score"] for t in data["tests"])
    assert len(data["tests"]) == N_CHECKS and sum(t["max_score"] for t in data["tests"]) == TOTAL
    assert all((t["status"] == "passed") == (t["score"] == t["max_score"]) for t in data["tests"])
    assert all("[" not in t["output"] for t in data["tests"])  # shapes and errors, never an array of values
    if kind == "broken_zip":
        assert "not a readable zip file" in data["output"]
    assert "seed" not in json.dumps(data)  # the seed is the instructor's (run_autograder's standard output)


def test_results_without_score_are_refused_by_the_schema():
    """The schema is not vacuous: a test with a wrong status or a results.json with no score fails it."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tests": [{"name": "x", "status": "ok"}]}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"output": "no score anywhere"}, SCHEMA)
