"""The worker's sandbox on Linux: bubblewrap (``bwrap``), where it is installed and works.

The worker sees a read-only system (``/usr``, ``/etc``, Python and its packages, the mhattn
package), a private size-limited ``/tmp`` (the only writable folder), no network, its own PID
namespace (everything it starts dies with it), a read-only ``/proc/sys``, of the installed packages only numpy and what mhattn
requires (:mod:`mhattn.grade.imports`: no torch, no scipy), and nothing of the folders around
mhattn: ``solutions/``, ``tests/``, ``exercises_src/``, ``.git``, the learner's other files, other
checkouts. Inside the mhattn package the grader's own files (``mhattn/grade``) are an empty folder,
and each reference module of the step being graded is replaced by its stand-in
(:mod:`mhattn.grade.stubs`), compiled copies included.

Started by root, bubblewrap makes its namespaces without a user namespace (one would map the worker's uid to
root on the host, whatever ``--uid`` it shows) and keeps only the two capabilities that
:mod:`mhattn.grade.user`'s dropper needs to become the unprivileged user before the worker starts.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import site
import subprocess
import sys
import threading
from pathlib import Path

import numpy

import mhattn
from mhattn.grade import imports, pool, user

MISSING = (
    "no sandbox (bubblewrap missing or --no-sandbox): each submission ran with your rights, so it could read solutions/ "
    "and the reference source, write files (a change to mhattn's, numpy's or Python's start-up files scores 0), "
    "and signal or read the grader itself"
)
MISSING_AS_ROOT = (
    "no sandbox (bubblewrap missing or --no-sandbox): each submission ran as an unprivileged user of its own, whose only "
    "writable folder was a private temporary one, so it could read what every user may (solutions/ and the reference "
    "source, where they are readable) but not signal or read the grader or another submission"
)


def missing() -> str:
    """What grading without a sandbox meant here: as root, each worker was a user of its own; else it had your rights."""
    return MISSING if user.worker_ids() is None else MISSING_AS_ROOT


WORKER_DIR = "/run/mhattn-grade"
_LOCK = threading.Lock()
TMP_BYTES = 64 << 20
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
REPO_HIDDEN = ("solutions", "tests", "exercises_src", ".git", "exercises", "notebooks")


def package_dir() -> Path:
    return Path(mhattn.__file__).resolve().parent


def _python_dirs() -> list[Path]:
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    dirs.add(str(Path(numpy.__file__).resolve().parents[1]))
    dirs.add(str(Path(sys.executable).resolve().parent.parent))
    return sorted({Path(d).resolve() for d in dirs if d and Path(d).is_dir()})


@functools.lru_cache(maxsize=1)
def _binds() -> tuple[str, ...]:
    """--ro-bind / --symlink arguments for the system, Python, and the mhattn package."""
    args, bound = [], []
    for root in SYSTEM:
        p = Path(root)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), root]
        elif p.is_dir():
            args += ["--ro-bind", root, root]
            bound.append(p)
    for d in _python_dirs():
        if not any(d == b or b in d.parents for b in bound):
            args += ["--ro-bind", str(d), str(d)]
            bound.append(d)
    pkg = package_dir()
    for d in _site_dirs():  # each package folder: allowed entries only (mhattn too, where it is installed there)
        args += ["--tmpfs", str(d)]
        for entry in [*imports.allowed_entries(d), *([pkg] if d in pkg.parents else [])]:
            args += ["--ro-bind", str(entry), str(entry)]
        args += ["--remount-ro", str(d)]
    return (*args, "--ro-bind", str(pkg), str(pkg))


def _site_dirs() -> list[Path]:
    """The package folders the sandbox shows, each reduced to numpy and mhattn's requirements."""
    return imports.site_dirs([*(Path(r) for r in SYSTEM), *_python_dirs()])


def _hidden_dirs() -> list[Path]:
    """Folders that a bound directory would otherwise show: the grader and the repository around mhattn.

    Folders inside a package folder need nothing: only the allowed entries are bound there.
    """
    pkg = package_dir()
    hidden = [pkg / "grade", *(pkg.parent / n for n in REPO_HIDDEN)]
    visible, sites = [Path(r) for r in SYSTEM] + _python_dirs() + [pkg], _site_dirs()
    return [h for h in hidden if h.is_dir() and any(h == v or v in h.parents for v in visible)
            and (pkg in h.parents or not any(s in h.parents for s in sites))]  # fmt: skip


def namespace_args() -> list[str]:
    """bwrap's namespaces, capabilities, ``/proc`` (its ``sys`` read-only) and ``/dev``.

    As a normal user: every namespace, no capability. As root: no user namespace (with one, the worker's uid
    would be root's on the host: files root owns, ``/proc/sys``), and only ``CAP_SETUID``/``CAP_SETGID``, which
    the dropper uses to become the worker's user and thereby loses (:mod:`mhattn.grade.user`).
    """
    if user.worker_ids() is None:
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    else:
        args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add",
                "CAP_SETGID"]  # fmt: skip
    return [*args, "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]


@functools.lru_cache(maxsize=1)
def base_args() -> tuple[str, ...]:
    """bwrap's arguments up to the hidden modules: namespaces, mounts, hidden folders."""
    # the private /tmp first: binds of a venv or clone that lives under /tmp then land on top of it
    args = [*namespace_args(), *(tmp_args() or ()), *open_parents(_binds()), *_binds()]
    for h in _hidden_dirs():
        args += ["--tmpfs", str(h), "--remount-ro", str(h)]
    return (*args, "--chdir", "/tmp")


def open_parents(binds, extra=()) -> list[str]:
    """As root: ``--dir`` (mode 0755) for each folder above a bound path that no system bind brings, and for ``extra``.

    bwrap makes the folders above a bind's destination with mode 0700, which only root may pass; the
    worker's user must pass them to reach Python, mhattn and its own files. Nothing as a normal user.
    """
    if user.worker_ids() is None:
        return []
    dests = {Path(binds[i + 2]) for i, a in enumerate(binds) if a == "--ro-bind"} | {Path(e) for e in extra}
    system = [Path(r) for r in SYSTEM]
    above = {p for d in dests for p in [d, *d.parents] if p != Path("/")} - (dests - {Path(e) for e in extra})
    above = {p for p in above if p != Path("/tmp") and not any(p == r or r in p.parents for r in system)}  # /tmp: 1777
    return [a for p in sorted(above, key=lambda p: len(p.parts)) for a in ("--perms", "0755", "--dir", str(p))]


def module_file(modname: str) -> Path:
    """The source file of an mhattn module, where a stand-in is bound."""
    rel = modname.split(".")[1:]
    path = package_dir().joinpath(*rel)
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def hide_modules(stub_files: dict[str, Path], empty: Path) -> list[str]:
    """Bind each stand-in over its module's source, and an empty file over its compiled copies."""
    args = []
    for modname, stub in stub_files.items():
        src = module_file(modname)
        args += ["--ro-bind", str(stub), str(src)]
        for pyc in (src.parent / "__pycache__").glob(f"{src.stem}.*.pyc"):
            args += ["--ro-bind", str(empty), str(pyc)]
    return args


def command(
    stub_files: dict[str, Path], empty: Path, worker: Path, submission: Path, argv: list[str], ids: tuple[int, int] | None = None
) -> list[str]:
    """The full bwrap command running ``python worker.py argv...`` on ``submission`` (bound read-only).

    The root and ``/dev`` (tmpfs of up to half the RAM each) are made read-only last: a submission
    that fills them would take the machine's memory; only the size-limited ``/tmp`` stays writable.
    """
    args = [*base_args(), *open_parents([], [f"{WORKER_DIR}/submission"]), *hide_modules(stub_files, empty)]
    args += ["--ro-bind", str(worker), f"{WORKER_DIR}/worker.py"]
    args += ["--ro-bind", str(submission), f"{WORKER_DIR}/submission/{submission.name}"]
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    return [*args, *user.drop(ids), *PYTHON, f"{WORKER_DIR}/worker.py", *argv, json.dumps(_worker_path())]


# isolated (no PYTHON* variables, no user site, no script folder on the path) and without site: no .pth file
# or sitecustomize runs in the worker, whatever a submission wrote there (:mod:`mhattn.grade.worker`)
PYTHON = (sys.executable, "-I", "-S", "-B")  # -B: -I drops PYTHONDONTWRITEBYTECODE


def _worker_path() -> list[str]:
    """The worker's import path in the sandbox: mhattn's folder, then the package folders on the grader's path."""
    return [str(package_dir().parent), *map(str, _searched_site_dirs())]


def _searched_site_dirs() -> list[Path]:
    """The package folders the sandbox shows that are on ``sys.path``, in its order (where this Python finds numpy)."""
    shown, out = set(_site_dirs()), []
    for d in sys.path:
        p = Path(d or ".").resolve()
        if p in shown and p not in out:
            out.append(p)
    return out


@functools.lru_cache(maxsize=1)
def _worker_source() -> str:
    """The worker's text, read once per grader process (not again after a submission could have changed it)."""
    return Path(__file__).with_name("worker.py").read_text(encoding="utf-8")


def plain_command(tmp: Path, ids: tuple[int, int] | None, workdir: Path):
    """``make_cmd(argv)`` without a sandbox: the worker's source passed as ``-c`` (no file a submission could rewrite
    for the next worker), imports from a folder of links to mhattn and the allowed packages only (``tmp/imports``).
    As root (``ids``) it runs as that user, in a mount namespace whose only writable folder is ``workdir``."""
    source, prefix = _worker_source(), user.drop(ids, str(workdir))
    folder = tmp / "imports"
    with _LOCK:  # the exercises of one grade start from threads
        if not folder.exists():
            folder.mkdir()
            for entry in [package_dir(), *(e for d in _searched_site_dirs() for e in imports.allowed_entries(d))]:
                if not (folder / entry.name).exists():
                    (folder / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    user.check_plain(ids, json.dumps([str(package_dir().parent), *map(str, _searched_site_dirs())]))
    return lambda argv: [*prefix, *PYTHON, "-c", source, *argv, json.dumps([str(folder)])]


def submission_path(submission: Path) -> str:
    return f"{WORKER_DIR}/submission/{submission.name}"


def _probe(extra: list[str]) -> bool:
    if user.worker_ids() is None:
        return _probe_as(extra, None)
    with pool.lease() as ids:  # as root: as a user of the pool no hand-in holds
        return _probe_as(extra, ids)


def _probe_as(extra: list[str], ids) -> bool:
    drop = user.drop(ids)
    code = f"import os, sys; sys.path += {_worker_path()!r}; import numpy" + ("; assert 0 not in os.getresuid()" if drop else "")
    args = [*namespace_args(), *extra, *open_parents(_binds()), *_binds(), *drop, *PYTHON, "-c", code]
    try:
        res = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0


@functools.lru_cache(maxsize=1)
def tmp_args() -> tuple[str, ...] | None:
    """Arguments for the private /tmp, or None: no working sandbox here.

    Size-limited where bwrap has ``--size``; with an older bwrap it is read-only, as an unlimited
    tmpfs would let a submission fill the machine's memory.
    """
    if shutil.which("bwrap") is None or not sys.platform.startswith("linux"):
        return None
    perms = ("--perms", "1777") if user.worker_ids() is not None else ()  # bwrap's tmpfs is root's 0755 otherwise
    for extra in ((*perms, "--size", str(TMP_BYTES), "--tmpfs", "/tmp"), ("--tmpfs", "/tmp", "--remount-ro", "/tmp")):
        if _probe(list(extra)):
            return extra
    return None


def available() -> bool:
    """Whether bwrap runs Python in the sandbox on this machine (checked once per process)."""
    return tmp_args() is not None
