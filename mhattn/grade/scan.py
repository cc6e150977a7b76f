"""What the grader learns from a learner's file without running it: its text, syntax and imports.

The grader (the trusted process) reads the file as bytes and parses it; it never imports it.
A file that is not UTF-8, holds a NUL byte, does not parse, or imports the reference for its
own step, anything under ``solutions/`` or the grader itself, scores 0 with the line named.

Links and other files that are not plain files are checked before anything is read
(:func:`read_exercise`): a link out of the folder (to ``/proc/self/mem``, ``/proc/kmsg``, a device,
the solutions), a link loop, a FIFO, a device or a folder under an exercise's name scores 0 for
that exercise, and an error while reading one file costs that file only.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import stat
from pathlib import Path

MAX_BYTES = 1 << 20  # a learner's exercise file is a few kB


def read_exercise(folder: Path, filename: str) -> tuple[Path, str | None, str | None]:
    """``(path, source, None)``, or ``(path, None, reason)`` for the exercise file ``filename`` of ``folder``.

    The entry is looked at without following it (``lstat``): a link must lead, without a loop, to a file
    in the same folder; ``folder`` may be a link, but not to mhattn's ``solutions/``. Nothing is opened before.
    """
    entry = folder / filename
    try:
        st = os.lstat(entry)
        path = Path(os.path.realpath(entry, strict=True)) if stat.S_ISLNK(st.st_mode) else entry
        here = Path(os.path.realpath(folder, strict=True))
    except FileNotFoundError:
        return entry, None, f"file not found: {filename}"
    except (OSError, RuntimeError, ValueError) as err:  # a link loop (ELOOP), a name too long, ...
        return entry, None, f"{filename} cannot be read ({_why(err)}): hand in the file itself"
    if path.parent.resolve() != here:
        return entry, None, f"{filename} is a link to a file outside the folder graded: hand in the file itself"
    if folder.is_symlink() and here == (Path(__file__).resolve().parents[2] / "solutions").resolve():
        return entry, None, f"{folder} is a link to mhattn's solutions/: hand in your own files"
    source, reason = read_source(path)
    return path, source, reason


def _why(err: BaseException) -> str:
    return getattr(err, "strerror", None) or type(err).__name__


def read_bytes(path: Path) -> tuple[bytes | None, str | None]:
    """The bytes of a plain file of at most :data:`MAX_BYTES`, opened without following a link and without
    waiting (a FIFO); ``(None, reason)`` for anything else or any error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, f"file not found: {path.name}"
    except OSError as err:
        return None, f"{path.name} cannot be read ({_why(err)}): hand in the file itself"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"{path.name} is not a plain file (a folder, a FIFO or a device?): hand in the file itself"
        if st.st_size > MAX_BYTES:
            return None, f"{path.name} is larger than {MAX_BYTES >> 20} MiB: not an exercise file"
        chunks, size = [], 0
        while size <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        return None, f"{path.name} cannot be read ({_why(err)}): hand in the file itself"
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_BYTES:
        return None, f"{path.name} is larger than {MAX_BYTES >> 20} MiB: not an exercise file"
    return data, None


def read_source(path: Path) -> tuple[str | None, str | None]:
    """``(source, None)``, or ``(None, reason)`` when the file cannot be graded as Python text."""
    data, reason = read_bytes(path)
    if data is None:
        return None, reason
    try:
        source = importlib.util.decode_source(data)  # as Python reads a file: a BOM or a coding line, else UTF-8
    except (SyntaxError, LookupError, UnicodeDecodeError) as err:  # e.g. a coding line naming no codec
        bad = err
        try:
            data.decode("utf-8-sig")
        except UnicodeDecodeError as utf8:
            bad = utf8
        if not isinstance(bad, UnicodeDecodeError):
            return None, f"{path.name}: {getattr(bad, 'msg', None) or bad} (save the file as UTF-8)"
        line = data[: bad.start].count(b"\n") + 1
        return None, f"{path.name} line {line}: not valid UTF-8 text (save the file as UTF-8)"
    if "\0" in source:
        line = source[: source.index("\0")].count("\n") + 1
        return None, f"{path.name} line {line}: a NUL byte (the file does not parse)"
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as err:
        return None, f"{path.name} line {err.lineno}: {type(err).__name__}: {err.msg} (the file does not parse)"
    except (ValueError, RecursionError, MemoryError) as err:
        return None, f"{path.name}: the file does not parse ({type(err).__name__})"
    return source, None


def scan_imports(source: str, banned: tuple[str, ...]) -> str | None:
    """Reason to refuse the file if it imports a reference for this step, solutions/ or the grader."""
    banned_names = {p.split(":")[1].split(".")[-1] for p in banned}
    aliases: set[str] = set()
    try:
        nodes = list(ast.walk(ast.parse(source)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "the file does not parse"
    for node in nodes:
        reason = _import_reason(node, banned_names, aliases)
        if reason:
            return f"line {getattr(node, 'lineno', '?')}: {reason}"
    return None


def _import_reason(node, banned_names, aliases) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            reason = _module_reason(alias.name)
            if reason:
                return reason
            if alias.name.startswith("mhattn"):
                aliases.add(alias.asname or alias.name.split(".")[0])
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
        mod = node.module or ""
        reason = _module_reason(mod) or (_module_reason("mhattn.grade") if mod == "mhattn" and any(
            a.name == "grade" for a in node.names) else None)  # fmt: skip
        if reason:
            return reason
        if mod.startswith("mhattn"):
            for alias in node.names:
                if alias.name in banned_names:
                    return f"imports {alias.name} from {mod}: that is mhattn's own reference for this exercise"
                aliases.add(alias.asname or alias.name)
    elif isinstance(node, ast.Attribute) and node.attr in banned_names and _root(node) in aliases:
        return f"uses mhattn's {node.attr}: that is mhattn's own reference for this exercise"
    return None


def _module_reason(name: str) -> str | None:
    if name.split(".")[0] == "solutions":
        return f"imports {name}: submissions may not use anything under solutions/"
    if name == "mhattn.grade" or name.startswith("mhattn.grade."):
        return f"imports {name}: submissions may not use the grader's code"
    return None


def _root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# what silences a floating-point warning or hides it from the grader (numpy's error state, the warning filters)
SILENCERS = ("errstate", "seterr", "seterrcall", "_extobj_contextvar", "catch_warnings", "filterwarnings",
             "simplefilter", "resetwarnings", "showwarning", "setprofile", "settrace")  # fmt: skip


def silencing(source: str) -> str | None:
    """Why the file silences floating-point warnings (exercise 11's "no warning" check), or None.

    Read from the text, so nothing the submission does at run time hides it: the ``warnings`` module imported,
    or one of :data:`SILENCERS` named (an attribute, a name, an imported name, or a string that is just that name,
    as in ``getattr(np, "errstate")``; a docstring that mentions one is fine).
    The worker also watches the calls themselves (:class:`mhattn.grade.probe.QuietWatch`).
    """
    try:
        nodes = list(ast.walk(ast.parse(source)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the file does not load at all: every check fails anyway
    for node in nodes:
        names = []
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value.strip()]  # a name spelled as a string, e.g. getattr(np, "errstate")
        hit = next((n for n in names if n in SILENCERS or n.split(".")[0] == "warnings"), None)
        if hit:
            return (f"line {node.lineno}: the file uses {hit}: silencing a floating-point warning does not avoid it "
                    "(avoid -inf - (-inf), 0/0 and log(0) instead)")  # fmt: skip
    return None
