"""Grade a class: every hand-in under SUBMISSIONS, one at a time per job, each with its own seed.

``OUT`` (mode 0700, every file in it 0600: :mod:`mhattn.classroom.private`) gets ``class.json`` (the class seed),
``results/<id>.json`` (the grader's report of that student, each check included, with the hand-in's hash and
seed), ``feedback/<id>.md`` (no seed), ``gradebook.csv``, ``faults.csv`` and ``summary.md`` (no seed:
:mod:`mhattn.classroom.summary`). A student whose graded files, class seed and mhattn version are those of the
stored result is not graded again (unless ``force``). One student's broken hand-in, crash or timeout costs only
that student; nobody's grade depends on another's or on ``jobs``.

Hand-ins graded at once are kept apart (:func:`isolation`): in the sandbox, and as root (each hand-in runs as a
user of its own: :mod:`mhattn.grade.pool`). As a normal user without a sandbox that is impossible: hand-ins are
then graded one at a time, and no stored result is reused, as a hand-in ran with the instructor's rights and
could have written one with a valid HMAC.

A stored result is reused only as this grader left it: each carries an HMAC keyed by the class seed, all are
read before any worker starts, and all are written again from memory when the run ends.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from mhattn import __version__
from mhattn.classroom import private, summary
from mhattn.classroom.handins import HandinError, class_seed, files_hash, student_seed, unpack
from mhattn.classroom.names import display, file_stem
from mhattn.classroom.private import write_private
from mhattn.grade import grade, sandbox, user
from mhattn.grade.runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT
from mhattn.grade.spec import EXERCISES
from mhattn.grade.verdict import all_failed, row


def find_students(submissions: Path) -> dict[str, Path]:
    """``{student id: hand-in}``: each entry directly under ``submissions`` that is a folder, a ``.zip``, or anything
    that is not a plain file (a FIFO, a link: :func:`unpack` says why it cannot be graded); see :func:`ignored`.
    Where one id has two hand-ins (``heidi/`` and ``heidi.zip``) the folder is graded and :func:`ignored` names
    the other.

    Raises:
        FileNotFoundError: ``submissions`` is not a folder.
    """
    if not submissions.is_dir():
        raise FileNotFoundError(f"no folder {submissions} (give the folder with one folder or .zip per student)")
    found: dict[str, Path] = {}
    for p in sorted(submissions.iterdir()):
        if _ignored(p) is None:
            found.setdefault(_sid(p), p)  # alice/ and alice.zip: the folder (sorted first) is graded
    return found


def _sid(p: Path) -> str:
    return p.stem if p.suffix.lower() == ".zip" and not p.is_dir() else p.name


def ignored(submissions: Path) -> dict[str, str]:
    """``{name: why}``: the entries of ``submissions`` that are not hand-ins (hidden names, plain files not ``.zip``)
    or a second hand-in of one id (not graded)."""
    graded = find_students(submissions)
    out = {p.name: why for p in sorted(submissions.iterdir()) if (why := _ignored(p))}
    for p in sorted(submissions.iterdir()):
        if _ignored(p) is None and graded[_sid(p)] != p:
            out[p.name] = f"a second hand-in of {display(_sid(p))} ({graded[_sid(p)].name} is graded, this one is not)"
    return out


def _ignored(p: Path) -> str | None:
    if p.name.startswith((".", "__")):
        return "a hidden name (starts with . or __)"
    if p.is_file() and not p.is_symlink() and p.suffix.lower() != ".zip":
        return "a file that is neither a folder nor a .zip"
    return None


def failed_report(reason: str, seed: int) -> dict:
    """A report in the grader's shape where every exercise scores 0 for ``reason``."""
    rows = [row(ex.name, all_failed(ex.checks, reason)) for ex in EXERCISES]
    return {"exercises": rows, "total": 0, "max_total": sum(ex.points for ex in EXERCISES), "seed": seed, "sandbox": None}


def grade_student(sid: str, src: Path, class_seed: int, previous: dict | None, options: dict) -> tuple[dict, bool]:
    """``(result, graded now)`` for one student; ``previous``: the stored result, reused when nothing changed."""
    base = {"student": display(sid), "class_seed": class_seed, "mhattn": __version__}  # display: any name as text
    with tempfile.TemporaryDirectory(prefix="mhattn-handin-") as tmp:
        try:
            folder = unpack(src, Path(tmp))
        except HandinError as err:
            seed, why = student_seed(class_seed, display(sid)), display(str(err))  # the name may not be UTF-8
            return {**base, "seed": seed, "hash": None, "error": why, **failed_report(why, seed)}, True
        digest = files_hash(folder)
        seed = student_seed(class_seed, sid, digest)
        same = {**base, "seed": seed, "hash": digest}
        if previous and all(previous.get(k) == v for k, v in same.items()) and not previous.get("error"):
            return previous, False
        try:
            report = grade(folder, seed=seed, jobs=1, **options)
        except Exception as err:  # noqa: BLE001 - one hand-in that breaks the grader costs its student only
            why = display(f"the grader failed on this hand-in ({type(err).__name__}: {str(err)[:200]})")
            return {**same, "error": why, **failed_report(why, seed)}, True
    return {**same, "error": None, **report}, True


def _class_seed(out: Path, seed: int | None) -> tuple[int, bool]:
    """``(class seed, whether it replaces another one)``: ``seed``, else the one this ``out`` was graded with, else a
    fresh one (128 bits); kept in class.json, which only its owner may read."""
    stored = out / "class.json"
    before = int(json.loads(stored.read_text(encoding="utf-8"))["seed"]) if stored.is_file() else None
    seed = (before if before is not None else class_seed()) if seed is None else int(seed)
    write_private(stored, json.dumps({"seed": seed, "mhattn": __version__}, indent=2) + "\n")
    return seed, before is not None and before != seed


def changes_seed(out: Path, seed: int | None) -> bool:
    """Whether grading into ``out`` with ``seed`` replaces the class seed it was graded with (everyone regraded)."""
    stored = Path(out) / "class.json"
    if seed is None or not stored.is_file():
        return False
    try:
        return int(json.loads(stored.read_text(encoding="utf-8"))["seed"]) != int(seed)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _mac(data: dict, key: int) -> str:
    """HMAC-SHA256 of a stored result (without its ``mac``), keyed by the class seed."""
    body = json.dumps({k: v for k, v in data.items() if k != "mac"}, sort_keys=True).encode()
    return hmac.new(b"mhattn-results\0" + str(key).encode(), body, hashlib.sha256).hexdigest()


def _load(path: Path, key: int) -> dict | None:
    """The stored result at ``path`` if this grader wrote it as it is (its HMAC checks), else None: graded again."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if type(data) is not dict or not hmac.compare_digest(str(data.get("mac", "")), _mac(data, key)):
        return None
    return data


def _bar(total: int, show: bool):
    if not show:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # no bar without tqdm (the course extra)
        return None
    return tqdm(total=total, unit="student", desc="grading")


def grade_class(submissions, out, jobs: int = 2, seed: int | None = None, force: bool = False, progress: bool = True,
                timeout: float = DEFAULT_TIMEOUT, memory: int = DEFAULT_MEMORY_MB,
                sandbox_mode: bool | None = None) -> dict:  # fmt: skip
    """Grade every hand-in under ``submissions`` and write the gradebook into ``out``.

    Args:
        submissions: folder with one folder or ``.zip`` per student (its name, without ``.zip``, is the student id).
        out: folder for the results (created; mode 0700, every file in it 0600: :mod:`mhattn.classroom.private`).
        jobs: students graded at the same time (each student's exercises one after another); 1 where hand-ins
            cannot be kept apart (no sandbox, not root: :func:`isolation`).
        seed: class seed; each student's hidden inputs use :func:`~mhattn.classroom.handins.student_seed` of it.
            Default: the seed ``out`` was graded with before, else a fresh one.
        force: grade every student again, also those whose hand-in has not changed.
        progress: show a tqdm bar (when tqdm is installed).
        timeout, memory, sandbox_mode: passed to :func:`mhattn.grade.grade` for each student.

    Returns:
        ``{"class_seed", "students": {id: result}, "graded": [ids graded now], "skipped": [ids unchanged],
        "notes": [how the class was graded, as summary.md says it]}``.

    Raises:
        FileNotFoundError: ``submissions`` is not a folder. ValueError: ``jobs`` < 1. RuntimeError: a sandbox was
        asked for, but bubblewrap does not work here.
    """
    if int(jobs) < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    submissions, out = Path(submissions), Path(out)
    students = find_students(submissions)
    use_sandbox, isolated, notes = isolation(sandbox_mode)
    jobs = int(jobs) if isolated else 1
    private.prepare(out)
    class_seed, replaced = _class_seed(out, seed)
    notes += ["The class seed changed: every hand-in was graded again with the new one."] if replaced else []
    options = {"timeout": timeout, "memory": memory, "sandbox_mode": use_sandbox}
    reuse = isolated and not force and not replaced  # without isolation any stored result could be a hand-in's
    stored = {sid: _load(_result_path(out, sid), class_seed) for sid in students} if reuse else {}  # before any worker
    results, graded, skipped = {}, [], []
    bar = _bar(len(students), progress)
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(grade_student, sid, src, class_seed, stored.get(sid), options): sid
                       for sid, src in students.items()}  # fmt: skip
            for fut in as_completed(futures):
                sid = futures[fut]
                results[sid], now = _outcome(fut, sid, class_seed)
                (graded if now else skipped).append(sid)
                if now:
                    _keep(out, sid, results[sid], class_seed)
                summary.write_gradebook(out / "gradebook.csv", results)  # each row kept as soon as it is graded
                if bar is not None:
                    bar.update(1)
    finally:  # whatever happened (an interrupt, a full disk), the rows graded so far are written out
        if bar is not None:
            bar.close()
        _finish(out, results, class_seed, ignored(submissions), notes)
    results = dict(sorted(results.items()))
    return {"class_seed": class_seed, "students": results, "graded": sorted(graded), "skipped": sorted(skipped),
            "notes": notes}  # fmt: skip


def isolation(sandbox_mode: bool | None) -> tuple[bool, bool, list[str]]:
    """``(sandbox used, hand-ins kept apart, notes)``. Apart: in the sandbox, or as root (each hand-in its own
    user: :mod:`mhattn.grade.pool`). Neither: every hand-in runs with the instructor's rights, so they are graded
    one at a time and no stored result is reused.

    Raises:
        RuntimeError: ``sandbox_mode`` is True, but bubblewrap does not work here.
    """
    use_sandbox = sandbox.available() if sandbox_mode is None else bool(sandbox_mode)
    if use_sandbox and not sandbox.available():
        raise RuntimeError("a sandbox was asked for, but bubblewrap (bwrap) does not work here")
    if use_sandbox or user.worker_ids() is not None:
        how = "in the bubblewrap sandbox" if use_sandbox else "without a sandbox"
        who = ", each as an unprivileged user of its own" if user.worker_ids() is not None else ""
        return use_sandbox, True, [f"Each hand-in ran {how}{who}."]
    return False, False, [NOT_ISOLATED]


NOT_ISOLATED = (
    "No sandbox and not root: each hand-in ran with your rights, so hand-ins were graded one at a time and every "
    "one was graded again (a hand-in could have written a stored result). Install bubblewrap, or run as root, to "
    "keep hand-ins apart."
)


def _finish(out: Path, results: dict, class_seed: int, not_handins: dict, notes: list[str]) -> None:
    """Every stored result as this run holds it (once no worker runs any more), the gradebook, faults and summary."""
    for sid, res in results.items():
        _keep(out, sid, res, class_seed)
    summary.write_gradebook(out / "gradebook.csv", results)
    summary.write_faults(out / "faults.csv", summary.faults(results))
    write_private(out / "summary.md", summary.class_summary(results, not_handins, notes))


def _result_path(out: Path, sid: str) -> Path:
    return out / "results" / f"{file_stem(sid)}.json"


def _outcome(fut, sid: str, class_seed: int) -> tuple[dict, bool]:
    """``(result, graded now)`` of one student's future; an error the grader did not expect costs that student only."""
    try:
        return fut.result()
    except Exception as err:  # noqa: BLE001 - e.g. a hand-in that cannot be read: its student only
        why = f"this hand-in could not be graded ({type(err).__name__}: {str(err)[:200]})"
        seed = student_seed(class_seed, display(sid))
        return {"student": display(sid), "class_seed": class_seed, "seed": seed, "mhattn": __version__, "hash": None,
                "error": why, **failed_report(why, seed)}, True  # fmt: skip


def _keep(out: Path, sid: str, result: dict, key: int) -> None:
    """Write ``results/<stem>.json`` (with its HMAC) and ``feedback/<stem>.md``; a failure to write is noted in the
    student's row."""
    try:
        _write_json(_result_path(out, sid), result, key)
        write_private(out / "feedback" / f"{file_stem(sid)}.md", summary.feedback(result))
    except (OSError, ValueError) as err:
        result["error"] = result.get("error") or f"its results could not be written ({type(err).__name__}: {err})"


def _write_json(path: Path, data: dict, key: int) -> None:
    """Write a result with its HMAC (:func:`_mac`), replacing the file whole."""
    data = {**{k: v for k, v in data.items() if k != "mac"}, "mac": _mac(data, key)}
    write_private(path, json.dumps(data, indent=2) + "\n")
