"""Gradescope as deployed: setup.sh on both kinds of image, and a simulated run that a forging hand-in cannot win.

- ``setup.sh`` on Ubuntu 22.04 installs into the system Python; on an image whose pip refuses that (PEP 668,
  ``externally-managed-environment``: Ubuntu 24.04, Debian 12) it creates a venv, installs the wheel there, and
  ``run_autograder`` uses it. ``apt-get`` and ``python3`` are stand-ins on ``PATH`` (this machine is neither image):
  the 22.04 ``python3`` records its pip install; the PEP 668 one refuses it and runs the real Python otherwise.
- The simulated run: the exported zip unpacked into a temporary root, ``setup.sh`` on the PEP 668 path (the real
  venv and pip, installing the real wheel; to stay offline and quick its dependencies are not downloaded: pip runs
  with ``PIP_NO_DEPS``/``PIP_NO_INDEX`` and a ``.pth`` file points the venv at this Python's numpy), then a hand-in
  in ``submission/`` that on import writes ``results/results.json`` with score 100, reads the class seed and kills
  every process above it. It scores 0, results.json is valid and the grader's, the seed is nowhere in it. Run as
  root (as Gradescope does), in the sandbox and without it (a ``bwrap`` on ``PATH`` that fails).
- ``run`` itself: the 0 result is there before the upload runs, and a results.json someone else left is replaced.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mhattn import __version__
from mhattn.classroom import gradescope
from mhattn.classroom.handins import class_seed
from mhattn.grade import sandbox, user

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests" / "data" / "gradescope_results.schema.json").read_text(encoding="utf-8"))
WHEEL = f"mhattn-{__version__}-py3-none-any.whl"
pytestmark = pytest.mark.grader
IS_ROOT = os.geteuid() == 0


def _script(path: Path, text: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + text, encoding="utf-8")
    path.chmod(0o755)


def fake_bin(folder: Path, pep668: bool, bwrap_fails: bool = False) -> Path:
    """Stand-ins: apt-get (records), python3 (PEP 668: refuses a system pip install; 22.04: records it), bwrap."""
    folder.mkdir(parents=True, exist_ok=True)
    _script(folder / "apt-get", f'echo "$*" >> {folder}/apt.log\n')
    refuse = 'echo "error: externally-managed-environment" >&2; exit 1' if pep668 else f'echo "$*" >> {folder}/pip.log; exit 0'
    base = Path(sys.executable)
    _script(folder / "python3", f'if [ "$1 $2 $3" = "-m pip install" ]; then {refuse}; fi\nexec {base} "$@"\n')
    if bwrap_fails:
        _script(folder / "bwrap", "exit 1\n")
    return folder


def unpack_zip(zip_path: Path, root: Path) -> Path:
    """As Gradescope does: the zip's files in ROOT/source, with their modes."""
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            z.extract(info, root / "source")
            (root / "source" / info.filename).chmod((info.external_attr >> 16) & 0o777)
    return root / "source"


def run_setup(source: Path, bin_dir: Path, venv: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", MHATTN_AUTOGRADER_VENV=str(venv), PIP_NO_DEPS="1",
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")  # fmt: skip
    return subprocess.run(["bash", str(source / "setup.sh")], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("zip")
    seed = class_seed()
    return gradescope.build(tmp / "autograder.zip", seed=seed), seed


def test_setup_on_ubuntu_22_04_installs_into_the_system_python(autograder_zip, tmp_path):
    source = unpack_zip(autograder_zip[0], tmp_path / "root")
    res = run_setup(source, fake_bin(tmp_path / "bin", pep668=False), tmp_path / "venv")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "bin" / "pip.log").read_text().split() == ["-m", "pip", "install", "--no-cache-dir", str(source / WHEEL)]
    assert "python3-venv" in (tmp_path / "bin" / "apt.log").read_text() and not (tmp_path / "venv").exists()
    assert (source / gradescope.CONFIG).stat().st_mode & 0o077 == 0


def test_setup_fails_loudly_when_pip_fails_otherwise(autograder_zip, tmp_path):
    source = unpack_zip(autograder_zip[0], tmp_path / "root")
    bin_dir = fake_bin(tmp_path / "bin", pep668=False)
    _script(bin_dir / "python3", 'echo "ERROR: no space left" >&2; exit 1\n')
    res = run_setup(source, bin_dir, tmp_path / "venv")
    assert res.returncode == 1 and "no space left" in res.stderr and not (tmp_path / "venv").exists()


@pytest.fixture(scope="module")
def pep668_install(autograder_zip, tmp_path_factory):
    """setup.sh on a PEP 668 image: the venv (in a folder every user may pass, as /opt is) with the wheel in it."""
    base = Path(tempfile.mkdtemp(prefix="mhattn-gs-", dir="/tmp"))
    base.chmod(0o755)
    source = unpack_zip(autograder_zip[0], base / "pristine")
    res = run_setup(source, fake_bin(base / "bin668", pep668=True), base / "venv")
    yield base, source, res
    shutil.rmtree(base, ignore_errors=True)


def test_setup_on_a_pep668_image_installs_into_a_venv(pep668_install):
    base, source, res = pep668_install
    assert res.returncode == 0, res.stdout + res.stderr
    assert "externally managed" in res.stdout and not (base / "bin668" / "pip.log").exists()
    probe = "import importlib.metadata as md, sys; print(md.version('mhattn'), sys.prefix)"
    out = subprocess.run([str(base / "venv" / "bin" / "python"), "-I", "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()  # fmt: skip
    assert out == [__version__, str(base / "venv")]


FORGER = """
import json, os, signal
root = {root!r}
done = []
for path in (root + "/results/results.json", "/autograder/results/results.json"):
    try:
        with open(path, "w") as f:
            json.dump({{"score": 100, "output": "FORGED", "tests": []}}, f)
        done.append("WROTE")
    except OSError as err:
        done.append(f"w{{err.errno}}")
try:
    done.append("SEED" + open(root + "/source/mhattn_autograder.json").read())
except OSError as err:
    done.append(f"s{{err.errno}}")
pid = os.getpid()
while pid > 1:
    try:
        pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
        os.kill(pid, signal.SIGKILL)
        done.append("KILLED")
    except (OSError, ValueError, IndexError) as err:
        done.append(f"k{{getattr(err, 'errno', 0)}}")
raise RuntimeError(" ".join(done))
"""


def _worker_can_start(python: Path) -> bool:
    try:
        user.check_plain(user.worker_ids(), json.dumps([str(sandbox.package_dir().parent), str(Path(np.__file__).parents[1])]))
    except RuntimeError:
        return False
    return os.access(python, os.X_OK)


@pytest.mark.skipif(not IS_ROOT, reason="Gradescope runs run_autograder as root; so does this test")
@pytest.mark.parametrize("use_sandbox", [True, False], ids=["sandbox", "plain"])
def test_a_simulated_gradescope_run_scores_a_forger_0(pep668_install, autograder_zip, use_sandbox):
    base, source, setup = pep668_install
    assert setup.returncode == 0, setup.stderr
    if use_sandbox and not sandbox.available():
        pytest.skip("no working bubblewrap")
    if not use_sandbox and not _worker_can_start(base / "venv" / "bin" / "python"):
        pytest.skip("the worker's user cannot start this Python")
    site = next((base / "venv" / "lib").glob("python3*/site-packages"))
    (site / "zz_numpy_from_the_test_python.pth").write_text(str(Path(np.__file__).parents[1]) + "\n")  # no download
    root = base / ("sandbox" if use_sandbox else "plain")
    shutil.copytree(source, root / "source", symlinks=True)
    (root / "submission").mkdir()
    (root / "submission" / "ex01_split_heads.py").write_text(FORGER.format(root=str(root)), encoding="utf-8")
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": 777}]}))
    bin_dir = fake_bin(base / f"bin-{root.name}", pep668=True, bwrap_fails=not use_sandbox)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "MHATTN"))}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", MHATTN_AUTOGRADER_VENV=str(base / "venv"))
    res = subprocess.run(["bash", str(root / "source" / "run_autograder"), str(root)], env=env, capture_output=True,
                         text=True, timeout=300, cwd=root)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    text = (root / "results" / "results.json").read_text(encoding="utf-8")
    data = json.loads(text)
    jsonschema.validate(data, SCHEMA)
    assert data["score"] == 0 and all(t["score"] == 0 for t in data["tests"]) and data["output"].startswith("0/")
    assert (" without the bubblewrap sandbox" in data["output"]) != use_sandbox
    reason = next(t["output"] for t in data["tests"] if t["name"].startswith("ex01"))
    assert "RuntimeError" in reason and not {"WROTE", "SEED", "KILLED", "FORGED"} & set(reason.replace(":", " ").split())
    assert str(autograder_zip[1]) not in text and "seed" not in text.lower()
    assert "seed" in res.stdout and str(autograder_zip[1]) not in res.stdout  # the instructor's: the hand-in's seed
    assert sorted(p.name for p in (root / "results").iterdir()) == ["results.json"]


def test_run_writes_its_0_before_the_upload_runs_and_replaces_what_was_there(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "source").mkdir(parents=True)
    (root / "source" / gradescope.CONFIG).write_text(json.dumps({"class_seed": 3}))
    (root / "submission").mkdir()
    (root / "submission" / "ex01_split_heads.py").write_text("x = 1\n")
    (root / "results").mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    (root / "results" / "results.json").symlink_to(elsewhere)  # left by someone: replaced, its target untouched
    seen = []

    def fake_grade(folder, seed, jobs):
        seen.append(json.loads((root / "results" / "results.json").read_text(encoding="utf-8")))
        raise RuntimeError("stopped here")

    monkeypatch.setattr(gradescope, "grade", fake_grade)
    data = gradescope.run(root)
    assert seen and seen[0]["score"] == 0 and seen[0]["output"] == gradescope.PENDING
    jsonschema.validate(seen[0], SCHEMA)
    assert data["score"] == 0 and "stopped here" in data["output"] and elsewhere.read_text() == "{}"
    assert not (root / "results" / "results.json").is_symlink() and root.stat().st_mode & 0o077 == 0
    assert json.loads((root / "results" / "results.json").read_text(encoding="utf-8")) == data
