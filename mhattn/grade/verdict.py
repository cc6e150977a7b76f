"""Turn a worker's reply into points and a one-line reason: the grader's side of the comparison.

The reply is untrusted data. It is checked against the shape this module expects; anything else
is a malformed reply and scores 0 for that exercise only. Points come from the exercise spec,
never from the reply: each named check of the exercise scores its points when every call (or part
of a call) counting for it passes. A submission that reaches for a hidden reference (mhattn's own
step, another library, the grader) forfeits the whole exercise, whatever its other checks say.
"""

from __future__ import annotations

import errno
import signal

from mhattn.grade.harness import QUALIFIED, Call, GradeFailure, one_line
from mhattn.grade.launch import Limits, Outcome
from mhattn.grade.worker import EXIT_TOO_LARGE, read_frame

RAISED = {"type": str, "mro": list, "message": str, "function": str, "line": (int, type(None))}


class Malformed(ValueError):
    """The reply does not have the shape a worker writes."""


def _check(value, kinds, what):
    if not isinstance(value, kinds):
        raise Malformed(what)


def _raised(r) -> dict:
    _check(r, dict, "an exception that is not a record")
    if set(r) != set(RAISED):
        raise Malformed("an exception record with other fields")
    for key, kinds in RAISED.items():
        _check(r[key], kinds, f"an exception's {key}")
    if not all(isinstance(c, str) for c in r["mro"]):
        raise Malformed("an exception's classes")
    return r


def validate(reply, n_calls: int) -> dict:
    """``reply`` if it has the worker's shape; raises Malformed otherwise."""
    _check(reply, dict, "not a record")
    if set(reply) != {"load", "missing", "outcomes"}:
        raise Malformed("a record with other fields")
    if reply["load"] is not None:
        _raised(reply["load"])
        return reply
    _check(reply["missing"], list, "missing functions")
    if not all(isinstance(m, str) for m in reply["missing"]):
        raise Malformed("missing functions")
    _check(reply["outcomes"], list, "outcomes")
    if not reply["missing"] and len(reply["outcomes"]) != n_calls:
        raise Malformed(f"{len(reply['outcomes'])} results for {n_calls} calls")
    for res in reply["outcomes"]:
        _check(res, dict, "a result that is not a record")
        if len(res) != 1 or next(iter(res)) not in ("value", "raised", "mutated"):
            raise Malformed("a result with other fields")
        if "raised" in res:
            _raised(res["raised"])
        if "mutated" in res:
            _check(res["mutated"], str, "a mutated input's name")
    return reply


def exception_text(r: dict, filename: str, memory: int, memory_note: str = "") -> str:
    where = f" ({filename} line {r['line']})" if r["line"] else ""
    text = f"{r['type']}: {r['message']}" if r["message"] else r["type"]
    out_of_memory = r["type"] == "MemoryError" or (r["type"] == "OSError" and f"[Errno {errno.ENOMEM}]" in r["message"])
    if out_of_memory:
        text += f" ({memory_note})" if memory_note else f" (the memory limit is {memory >> 20} MiB; --memory changes it)"
    if r["type"] == "OSError" and f"[Errno {errno.EFBIG}]" in r["message"]:
        text += f" (results and output written straight to a file are limited to {Limits.file_size >> 20} MiB)"
    return f"exception {text}{where}"


# what a hidden reference says when it is used (stubs.py, the worker's import hook): the exercise is forfeit
FORFEIT = ("is hidden while", "is not available while grading")


def _not_a_value(call: Call, res: dict, stage: str, filename: str, memory: int) -> tuple[bool, str | None]:
    """``(decided, reason)`` for a call that raised, modified an input, or had to raise."""
    if "raised" in res:
        r = res["raised"]
        if call.raises and call.raises in r["mro"]:
            return True, None
        if "NotImplementedError" in r["mro"]:
            return True, f"not implemented yet: {r['function'] or call.fn} raises NotImplementedError"
        if call.raises:
            return True, f"{stage} failed: {call.what}: raised {r['type']}, expected {call.raises}"
        return True, f"{stage}: {exception_text(r, filename, memory, call.memory_note)}"
    if "mutated" in res:
        return True, f"{stage} failed: {call.fn} modified its input {res['mutated']} in place (inputs must be left unchanged)"
    if call.raises:
        return True, f"{stage} failed: {call.what}: no {call.raises} raised"
    return False, None


def judge_parts(call: Call, res: dict, stage: str, filename: str, memory: int) -> list[tuple[str, str | None]]:
    """``[(check, reason or None when it passed), ...]``: one entry per part of this call."""
    decided, why = _not_a_value(call, res, stage, filename, memory)
    if decided:
        return [(check, why) for check, _ in call.judged()]
    out = []
    for check, judge in call.judged():
        try:
            judge(res["value"])
            out.append((check, None))
        except GradeFailure as err:
            out.append((check, f"{stage} failed: {err}"))
        except Exception as err:  # noqa: BLE001 - a value no judge expects (e.g. an array of dates)
            out.append((check, f"{stage} failed: {call.fn} returned a value the grader cannot compare ({type(err).__name__})"))
    return out


def judge_one(call: Call, res: dict, stage: str, filename: str, memory: int) -> str | None:
    """The reason this call failed (its first failing part), or None when it passed."""
    return next((why for _, why in judge_parts(call, res, stage, filename, memory) if why), None)


def ended(outcome: Outcome, limits: Limits) -> str:
    """Why a worker ended without a complete reply."""
    if outcome.timed_out and outcome.clock == "wall":
        return f"timed out after {limits.wall:g} s on the clock, waiting on something (input(), a sleep, a lock?)"
    if outcome.timed_out:
        return f"timed out after {limits.timeout:g} s of CPU time (an endless loop, or far too slow?)"
    rc = outcome.returncode
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if rc is not None and rc > 128 else None)
    if sig == signal.SIGXFSZ or rc == EXIT_TOO_LARGE:
        return (
            f"its results were larger than the {limits.file_size >> 20} MiB limit (print's output is cut, not "
            "counted; output written straight to a file descriptor is counted)"
        )
    if sig in (signal.SIGXCPU, signal.SIGKILL):
        return f"used more than {limits.cpu} s of CPU time (an endless loop, or far too slow?)"
    lines = [ln for ln in outcome.stderr_tail.splitlines() if ln.strip()]
    if lines and "MemoryError" in lines[-1]:
        return f"ran out of memory (the limit is {limits.memory >> 20} MiB; --memory changes it)"
    last = f"; the last line it wrote to stderr: {lines[-1].strip()}" if lines else ""
    return f"the grading process ended before its reply was complete (exit code {rc}){last}"


PASSED = "all visible and hidden tests passed"


def checks_row(checks, failed: dict[str, str]) -> list[dict]:
    """``[{"name", "points", "max_points", "reason"}, ...]``: the exercise's checks, each failed one with its reason."""
    return [{"name": name, "points": 0 if name in failed else pts, "max_points": pts,
             "reason": one_line(failed.get(name, PASSED))} for name, pts in checks]  # fmt: skip


def row(name: str, checks: list[dict]) -> dict:
    """``{"name", "points", "max_points", "reason", "checks"}`` of one exercise from its scored checks."""
    reasons = [c["reason"] for c in checks if c["points"] < c["max_points"]]
    return {"name": name, "points": sum(c["points"] for c in checks), "max_points": sum(c["max_points"] for c in checks),
            "reason": reasons[0] if reasons else PASSED, "checks": checks}  # fmt: skip


def all_failed(checks, reason: str) -> list[dict]:
    """Every check scores 0 for one reason (a file that did not load, a refused import, a timeout)."""
    return checks_row(checks, {name: reason for name, _ in checks})


def score(checks, calls: list[Call], n_visible: int, outcome: Outcome, limits: Limits, filename: str) -> list[dict]:
    """The exercise's checks (``checks``: ``((name, points), ...)``), scored from the worker's outcome.

    Each failed check's reason is the first failure among its calls; :func:`first_reason` gives the exercise's.
    """
    if outcome.reply is None:
        return all_failed(checks, ended(outcome, limits))
    try:
        reply = validate(read_frame(outcome.reply), len(calls))
    except Exception as err:  # noqa: BLE001 - whatever the reply holds, it is only data
        return all_failed(checks, f"the grading process sent a malformed reply ({type(err).__name__}: {err})")
    if reply["load"] is not None:
        return all_failed(checks, f"loading the file: {exception_text(reply['load'], filename, limits.memory)}")
    if reply["missing"]:
        return all_failed(checks, f"missing function(s): {', '.join(reply['missing'])}")
    failed: dict[str, str] = {}
    for i, (call, res) in enumerate(zip(calls, reply["outcomes"], strict=True)):
        for check, why in judge_parts(call, res, "visible test" if i < n_visible else "hidden test", filename, limits.memory):
            if why and "raised" in res and any(word in res["raised"]["message"] for word in FORFEIT):
                return all_failed(checks, why)
            if why:
                failed.setdefault(check, why)
    return checks_row(checks, failed)


def qualify(checks: list[dict], qualifiers: dict, source_failed: dict | None = None) -> list[dict]:
    """``checks`` (scored rows) where a qualifying check scores only beside right values.

    ``qualifiers``: ``{check: (value checks it qualifies, ...)}`` (e.g. exercise 11's memory and warning checks
    qualify its out and lse checks): a qualifier that passed scores 0 when one of its value checks failed, so a stub
    that returns nothing keeps no "no warning" point. ``source_failed``: ``{check: reason}`` found in the file's text
    by the grader (e.g. silenced warnings, :func:`mhattn.grade.scan.silencing`); each such check fails first.
    """
    failed = {c["name"]: c["reason"] for c in checks if c["points"] < c["max_points"]}
    for name, why in (source_failed or {}).items():
        failed.setdefault(name, why)
    for name, values in qualifiers.items():
        broken = [v for v in values if v in failed]
        if name not in failed and broken:
            failed[name] = f"{QUALIFIED} ({', '.join(values)}); failed: {broken[0]}: {failed[broken[0]]}"
    return checks_row([(c["name"], c["max_points"]) for c in checks], failed)
