"""Grade a folder of exercise files: the trusted half of ``mhattn grade``.

This process never imports or runs a learner's file. For each exercise it reads the file's text
(syntax and imports: :mod:`mhattn.grade.scan`), draws the inputs, computes the expected results
with mhattn's own functions, and starts a worker (:mod:`mhattn.grade.worker`, in the sandbox where
there is one: :mod:`mhattn.grade.sandbox`) that imports the file, makes the calls and sends back
plain data. The comparison and the points happen here (:mod:`mhattn.grade.verdict`).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import secrets
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.lib.format  # noqa: F401 - loaded before any worker runs (plain mode watches numpy's files)

from mhattn.grade import guard, imports, launch, pool, probe, sandbox, scan, user, verdict
from mhattn.grade.harness import one_line
from mhattn.grade.spec import EXERCISES, Exercise, find
from mhattn.grade.stubs import stubs_for
from mhattn.grade.watch import snapshot as files_state  # without a sandbox: what a later run executes
from mhattn.grade.worker import write_frame

DEFAULT_TIMEOUT = 30.0
DEFAULT_MEMORY_MB = 2048
ENV_KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class Session:
    """One grading run's private folder: the worker's copy, the stand-in modules, and the worker's environment."""

    def __init__(self, tmp: Path, use_sandbox: bool):
        self.tmp, self.sandbox = tmp, use_sandbox
        (tmp / "worker").mkdir()
        self.worker = tmp / "worker" / "worker.py"
        shutil.copyfile(Path(__file__).with_name("worker.py"), self.worker)
        self.empty = tmp / "empty"
        self.empty.write_bytes(b"")
        (tmp / "path").mkdir()
        (tmp / "path" / "mhattn").symlink_to(sandbox.package_dir(), target_is_directory=True)
        if user.worker_ids() is not None and not use_sandbox:  # as root: workers pass through (not list) this folder
            tmp.chmod(0o711)  # to their imports and each to its own working folder, the only one here it may write

    def workdir(self, ex: Exercise, ids: tuple[int, int] | None) -> Path:
        """The worker's working folder (also its HOME and TMPDIR without a sandbox): as root, its own user's alone."""
        folder = self.tmp / f"cwd-{ex.name}"
        folder.mkdir(exist_ok=True)
        if ids is not None and not self.sandbox:
            os.chown(folder, *ids)
            folder.chmod(0o700)
        return folder

    def env(self, workdir: Path) -> dict:
        env = {k: os.environ[k] for k in ENV_KEPT if k in os.environ}
        path = str(sandbox.package_dir().parent) if self.sandbox else str(self.tmp / "path")
        home = "/tmp" if self.sandbox else str(workdir)
        env.update(PYTHONPATH=path, HOME=home, TMPDIR=home, PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1",
                   MHATTN_BACKEND="numpy", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # fmt: skip
        return env

    def stub_files(self, ex: Exercise, stubs: dict) -> dict:
        folder = self.tmp / "stubs" / ex.name
        folder.mkdir(parents=True, exist_ok=True)
        files = {}
        for modname, text in stubs.items():
            files[modname] = folder / f"{modname}.py"
            files[modname].write_text(text, encoding="utf-8")
        return files

    def command(self, ex: Exercise, submission: Path, stubs: dict, ids, workdir: Path):
        """``(make_cmd, path of the file as the worker sees it)``; ``ids``: the worker's user as root, else None."""
        if not self.sandbox:
            return sandbox.plain_command(self.tmp, ids, workdir), str(submission)
        files = self.stub_files(ex, stubs)
        make = lambda argv: sandbox.command(files, self.empty, self.worker, submission, argv, ids)  # noqa: E731
        return make, sandbox.submission_path(submission)


def plan(ex: Exercise, seed: int):
    """``(calls, number of visible calls)``: the inputs and, in each judge, the expected results."""
    visible = [c for c in ex.visible() if not c.local]  # a local call's hidden twin has inputs drawn from the seed
    return visible + ex.hidden(np.random.default_rng(seed)), len(visible)


def run_one(ex: Exercise, folder: Path, seed: int, limits: launch.Limits, session: Session) -> dict:
    """``{"name", "points", "max_points", "reason", "checks"}`` for one exercise of ``folder`` (see :func:`verdict.row`)."""
    path, source, refused = scan.read_exercise(folder, ex.filename)  # links and non-files checked before reading
    refused = refused or scan.scan_imports(source, ex.banned)
    if refused:
        return verdict.row(ex.name, verdict.all_failed(ex.checks, refused))
    calls, n_visible = plan(ex, seed)
    stubs = stubs_for(ex.hidden_modules, ex.name)
    before = None if session.sandbox else files_state()
    with _own_user() as ids:  # as root, a user of its own for this worker alone (and its retry)
        workdir = session.workdir(ex, ids)
        make_cmd, seen_as = session.command(ex, path, stubs, ids, workdir)
        request = frame({"file": seen_as, "source": source, "functions": list(ex.functions), "stubs": stubs,
                         "cap": _cap(ex), "allowed": list(imports.allowed_modules()), "guard": guard.SOURCE,
                         "probe": probe.SOURCE, "calls": [{"fn": c.fn, "args": list(c.args), "probe": c.probe}
                                                          for c in calls]})  # fmt: skip
        outcome = launch.run(make_cmd, request, limits, session.env(workdir), str(workdir))
        if outcome.clock == "wall" and outcome.crowded:  # starved beside another worker? again, alone, before it costs
            outcome = launch.run(make_cmd, request, limits, session.env(workdir), str(workdir), alone=True)
    checks = verdict.score(ex.checks, calls, n_visible, outcome, limits, path.name)
    checks = verdict.qualify(checks, dict(ex.qualifiers), {c: why for c, rule in ex.source_rules if (why := rule(source))})
    changed = [] if before is None else sorted(set(before.items()) ^ set(files_state(before).items()))
    if changed:  # only without a sandbox can a submission write there; later runs would use the files
        why = (
            f"changed {changed[0][0]} while it was graded: reinstall mhattn before grading again (from the wheel: pip "
            "install --force-reinstall PATH/TO/mhattn-VERSION-py3-none-any.whl; in a clone: pip install -e .)"
        )
        checks = verdict.all_failed(ex.checks, why)
    return verdict.row(ex.name, checks)


def _cap(ex: Exercise) -> int:
    """The exercise's memory cap (:func:`mhattn.grade.guard.cap_memory`) where the worker can set one: Linux."""
    return ex.memory_cap if sys.platform.startswith("linux") else 0


def frame(tree) -> bytes:
    import io

    buf = io.BytesIO()
    write_frame(buf, tree)
    return buf.getvalue()


def grade(path="exercises", only=None, timeout: float = DEFAULT_TIMEOUT, seed: int | None = None, jobs: int = 2,
          memory: int = DEFAULT_MEMORY_MB, sandbox_mode: bool | None = None) -> dict:  # fmt: skip
    """Grade every exercise file under ``path``.

    Args:
        path: folder holding the exercise files (``ex01_split_heads.py``, ...: one per entry of ``spec.EXERCISES``),
            or one exercise file (that exercise only, unless ``only`` says otherwise).
        only: names of exercises to grade (full or short, e.g. ``"ex03"``); default all.
        timeout: CPU seconds per exercise, of its worker's whole process tree (and twice that, plus 5 s, on the wall
            clock); an exercise that ran out of wall-clock time beside another is run again alone before it costs.
        seed: seed of the hidden tests' random inputs; default a fresh one every run.
        jobs: exercises graded at the same time.
        memory: MiB of address space per worker.
        sandbox_mode: None: bubblewrap where it works; False: never; True: required.

    Returns:
        ``{"exercises": [{"name", "points", "max_points", "reason", "checks"}, ...], "total", "max_total", "seed",
        "sandbox"}``; ``checks``: ``[{"name", "points", "max_points", "reason"}, ...]``, the exercise's named checks.

    Raises:
        FileNotFoundError: ``path`` is neither a folder nor an exercise file (:func:`where`). KeyError: an unknown
            name in ``only``.
        ValueError: ``timeout``, ``memory`` or ``jobs`` not positive. RuntimeError: a sandbox is required but unavailable.
    """
    folder, one = where(path)
    only = [one] if one and not only else only
    for name, value in (("timeout", timeout), ("memory", memory), ("jobs", jobs)):
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be > 0, got {value}")
    chosen = list(dict.fromkeys(find(n) for n in only)) if only else list(EXERCISES)  # "ex05 ex05" grades it once
    use_sandbox = sandbox.available() if sandbox_mode is None else bool(sandbox_mode)
    if use_sandbox and not sandbox.available():
        raise RuntimeError("a sandbox was asked for, but bubblewrap (bwrap) does not work here")
    seed = secrets.randbits(31) if seed is None else int(seed)
    limits = launch.Limits(float(timeout), int(memory) << 20)
    for modname in {m for ex in chosen for m in ex.hidden_modules}:  # imported (compiled) now, not while a worker runs
        importlib.import_module(modname)
    parent = user.session_parent(user.worker_ids(), use_sandbox)
    with tempfile.TemporaryDirectory(prefix="mhattn-grade-", dir=parent) as tmp:
        session = Session(Path(tmp), use_sandbox)
        with ThreadPoolExecutor(max_workers=int(jobs)) as pool:
            rows = list(pool.map(lambda ex: run_one(ex, folder, seed, limits, session), chosen))
    return {
        "exercises": rows,
        "total": sum(r["points"] for r in rows),
        "max_total": sum(r["max_points"] for r in rows),
        "seed": seed,
        "sandbox": use_sandbox,
    }


def _own_user():
    """As root, a user of the pool that no other worker has now (:func:`mhattn.grade.pool.lease`); else None
    (workers run as this process)."""
    return pool.lease() if user.worker_ids() is not None else contextlib.nullcontext(None)


def where(path) -> tuple[Path, str | None]:
    """``(folder to grade, exercise name or None)`` for ``path``: a folder of exercise files, one exercise file,
    or the default ``exercises`` when the current folder is that folder itself (``mhattn grade`` inside it).

    Raises:
        FileNotFoundError: none of these (the message says what to give).
    """
    target = Path(path).absolute()  # the sandbox binds absolute paths; links are kept (the grader checks them)
    if target.is_file():
        ex = next((e for e in EXERCISES if e.filename == target.name), None)
        if ex is None:
            raise FileNotFoundError(f"{target} is not an exercise file (expected one of {EXERCISES[0].filename} ... "
                                    f"{EXERCISES[-1].filename}, or the folder that holds them)")  # fmt: skip
        return target.parent, ex.name
    if target.is_dir():
        return target, None
    here = Path.cwd()
    if str(path) == "exercises" and any((here / e.filename).is_file() for e in EXERCISES):
        return here, None  # run inside exercises/ itself
    raise FileNotFoundError(f"no folder {path} here (give the folder that holds your exercise files, or one "
                            f"exercise file such as {Path('exercises') / EXERCISES[0].filename})")  # fmt: skip


def format_table(report: dict) -> str:
    """The report as a plain-text table: one row per exercise, then the total (and what no sandbox means)."""
    width = max(len(r["name"]) for r in report["exercises"]) + 2
    lines = [f"{'exercise':<{width}}{'points':>8}  reason", "-" * (width + 40)]
    for r in report["exercises"]:
        score = f"{r['points']}/{r['max_points']}"
        lines.append(f"{r['name']:<{width}}{score:>8}  {one_line(r['reason'])}")
        if 0 < r["points"] < r["max_points"]:  # partly right: each check that failed, under its exercise
            for c in r.get("checks", []):
                if c["points"] < c["max_points"]:
                    lines.append(f"{'  - ' + c['name']:<{width}}{'0/' + str(c['max_points']):>8}  {one_line(c['reason'])}")
    lines.append("-" * (width + 40))
    lines.append(f"{'total':<{width}}{str(report['total']) + '/' + str(report['max_total']):>8}")
    lines.append(f"(hidden tests used seed {report['seed']}; pass --seed {report['seed']} to rerun them)")
    if not report.get("sandbox", True):
        lines.append(sandbox.missing())
    return "\n".join(lines)


def to_json(report: dict) -> str:
    return json.dumps(report, indent=2)
