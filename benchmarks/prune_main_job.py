"""Wall time of the main job, ``mhattn prune`` with its defaults, as a user runs it.

Median of ``--runs`` runs of the whole command in a fresh process (imports, the shipped 4 x 12-head
model's every layer, report and figure; the goal is a minute on 2 cores), optionally pinned to the first
``--cores`` CPUs, and, with ``--compare REF``, the same for the package as it was at git ref REF, side by side::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/prune_main_job.py --runs 3 --cores 2

Record the printed block in benchmarks/RESULTS.md with the machine line it prints.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    """CPU model, cores seen, and the load average when the benchmark started (noise)."""
    model = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        model = names[0] if names else model
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{model}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, load average {load:.1f}"


def time_prune(pythonpath: Path, cores: int | None, out: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, all its processes) of one ``mhattn prune --out OUT``
    in a new process importing mhattn from ``pythonpath``. On a busy machine the CPU seconds vary less."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    # exit 3 (check=True raises) if mhattn came from anywhere but pythonpath
    code = (f"import sys, pathlib, mhattn; home = pathlib.Path({str(pythonpath.resolve())!r}); "
            f"sys.exit(3) if not pathlib.Path(mhattn.__file__).resolve().is_relative_to(home) else None; "
            f"from mhattn.cli import main; sys.exit(main(['prune', '--out', {str(out)!r}]))")  # fmt: skip
    pin = (lambda: os.sched_setaffinity(0, range(cores))) if cores else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # cwd: ``python -c`` puts the working directory first on sys.path, so run from the output's parent,
    # not from the repository, or every version would import this tree's mhattn
    subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL, preexec_fn=pin, cwd=out.parent)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def checkout(ref: str, into: Path) -> Path:
    """The ``mhattn`` package as it was at git ``ref``, unpacked under ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "ref.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref, "mhattn"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="runs per version (the median is reported)")
    p.add_argument("--cores", type=int, default=2, help="pin each run to the first N CPUs (0: no pinning)")
    p.add_argument("--compare", metavar="REF", default=None, help="also time the package at this git ref")
    args = p.parse_args()
    print(f"machine: {machine()}; pinned to {args.cores or 'all'} cores; {args.runs} runs each")
    with tempfile.TemporaryDirectory() as tmp:
        versions = {"this tree": ROOT}
        if args.compare:
            versions[args.compare] = checkout(args.compare, Path(tmp) / "ref")
        runs = {name: [] for name in versions}
        for i in range(args.runs):  # the versions take turns, so a change in the machine's load hits both alike
            for j, (name, path) in enumerate(versions.items()):
                runs[name].append(time_prune(path, args.cores, Path(tmp) / f"out-{j}-{i}"))
        medians = {name: statistics.median(w for w, _ in rs) for name, rs in runs.items()}
        for name, rs in runs.items():
            cpu = statistics.median(c for _, c in rs)
            print(f"{name:>12s}: median {medians[name]:6.1f} s wall, {cpu:6.1f} CPU s  "
                  f"(wall runs: {', '.join(f'{w:.1f}' for w, _ in rs)})", flush=True)  # fmt: skip
    if args.compare:
        print(f"ratio this tree / {args.compare}: {medians['this tree'] / medians[args.compare]:.2f}")


if __name__ == "__main__":
    main()
