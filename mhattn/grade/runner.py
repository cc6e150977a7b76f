"""Grade a folder of exercise files, each in its own subprocess with a time limit.

The subprocess gets no stdin (``input()`` raises EOFError), runs in an empty temporary
folder (the learner's folder cannot shadow a module), never writes bytecode, and is killed
with its whole process group when it runs past ``timeout`` seconds.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mhattn.grade.spec import EXERCISES, Exercise, find

DEFAULT_TIMEOUT = 30.0


def run_one(ex: Exercise, folder: Path, seed: int, timeout: float) -> dict:
    """``{"name", "points", "max_points", "reason"}`` for one exercise of ``folder``."""
    row = {"name": ex.name, "points": 0, "max_points": ex.points}
    path = (folder / ex.filename).resolve()
    with tempfile.TemporaryDirectory(prefix="mhattn-grade-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "mhattn.grade.worker", ex.name, str(path), str(seed), str(out)]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MHATTN_BACKEND="numpy", PYTHONPATH=_pythonpath())
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp, env=env,
            start_new_session=True,
        )  # fmt: skip
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return {**row, "reason": f"timed out after {timeout:g} s (an endless loop, or far too slow?)"}
        if out.is_file():
            result = json.loads(out.read_text(encoding="utf-8"))
            return {**row, "points": int(result["points"]), "reason": result["reason"]}
        lines = stderr.decode(errors="replace").strip().splitlines()
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        return {**row, "reason": f"the grading process ended without a result: {last}"}


def _pythonpath() -> str:
    """The child imports the very mhattn this process runs (its folder first, made absolute)."""
    import mhattn

    here = str(Path(mhattn.__file__).resolve().parents[1])
    rest = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([here, *rest])


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def grade(path="exercises", only=None, timeout: float = DEFAULT_TIMEOUT, seed: int | None = None, jobs: int = 2) -> dict:
    """Grade every exercise file under ``path``.

    Args:
        path: folder holding ``ex01_split_heads.py`` ... ``ex10_random_removal.py``.
        only: names of exercises to grade (full or short, e.g. ``"ex03"``); default all.
        timeout: seconds per exercise.
        seed: seed of the hidden tests' random inputs; default a fresh one every run.
        jobs: exercises graded at the same time.

    Returns:
        ``{"exercises": [{"name", "points", "max_points", "reason"}, ...], "total", "max_total", "seed"}``.

    Raises:
        FileNotFoundError: ``path`` is not a folder. KeyError: an unknown name in ``only``.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {folder} (give the folder that holds your exercise files)")
    chosen = [find(n) for n in only] if only else list(EXERCISES)
    seed = secrets.randbits(31) if seed is None else int(seed)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        rows = list(pool.map(lambda ex: run_one(ex, folder, seed, timeout), chosen))
    return {
        "exercises": rows,
        "total": sum(r["points"] for r in rows),
        "max_total": sum(r["max_points"] for r in rows),
        "seed": seed,
    }


def format_table(report: dict) -> str:
    """The report as a plain-text table: one row per exercise, then the total."""
    width = max(len(r["name"]) for r in report["exercises"]) + 2
    lines = [f"{'exercise':<{width}}{'points':>8}  reason", "-" * (width + 40)]
    for r in report["exercises"]:
        score = f"{r['points']}/{r['max_points']}"
        lines.append(f"{r['name']:<{width}}{score:>8}  {r['reason']}")
    lines.append("-" * (width + 40))
    lines.append(f"{'total':<{width}}{str(report['total']) + '/' + str(report['max_total']):>8}")
    lines.append(f"(hidden tests used seed {report['seed']}; pass --seed {report['seed']} to rerun them)")
    return "\n".join(lines)


def to_json(report: dict) -> str:
    return json.dumps(report, indent=2)
