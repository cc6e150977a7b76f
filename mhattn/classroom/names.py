"""Student ids as the file system gives them, made safe to show, to name a file after and to put in a CSV cell.

A hand-in's name is its student id, and may be anything a file system allows: bytes that are not UTF-8 (as
``unzip`` leaves Latin-1 names; Python holds them as lone surrogates), 255 bytes, a leading dash, control
characters. :func:`display` is the id as text anyone can read; :func:`file_stem` the name of that student's
files under ``results/`` and ``feedback/``; :func:`csv_cell` a cell no spreadsheet runs as a formula.
"""

from __future__ import annotations

import hashlib
import os
import re

from mhattn.grade.harness import one_line

MAX_STEM = 200  # bytes: results/<stem>.json.tmp stays under the usual 255-byte limit on a file name
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list of what makes a spreadsheet cell a formula


def display(sid: str) -> str:
    """``sid`` as printable text: undecodable bytes as ``\\xe9``, control characters escaped, on one line."""
    text = os.fsencode(sid).decode("utf-8", "backslashreplace")
    return one_line(text, limit=10_000)


def file_stem(sid: str) -> str:
    """The name of the student's files (``results/<stem>.json``): ``sid`` itself when it is printable UTF-8 of at
    most :data:`MAX_STEM` bytes, without capitals (two ids that differ in case only would share a file where names
    ignore case, as on macOS), ``/`` or ``~``, that does not start with a dot or a dash; else a readable prefix,
    ``~`` and a hash of its exact bytes. No id kept as it is holds a ``~``, so none meets another's hashed stem."""
    raw = os.fsencode(sid)
    plain = display(sid) == sid and sid == sid.casefold() and not any(c in sid for c in "/~")
    if plain and len(raw) <= MAX_STEM and not sid.startswith((".", "-")):
        return sid
    readable = "".join(c if c.isalnum() or c in "_." else "_" for c in display(sid).lstrip(".-"))[:40]
    return f"{readable or 'student'}~{hashlib.sha256(raw).hexdigest()[:24]}"


MD_SPECIAL = re.compile(r"([\\`*_\[\]<>!|~&])")  # what acts mid-line (CommonMark escapes any ASCII punctuation)


def md_text(text: str) -> str:
    """``text`` (a reason that may quote a learner's message) as Markdown that shows it as written: on one line,
    each character that Markdown or HTML would act on escaped (no link, image, emphasis, HTML or entity)."""
    return MD_SPECIAL.sub(r"\\\1", one_line(str(text), limit=10_000))


def md_code(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds (a fence longer than its longest run)."""
    text = one_line(str(text), limit=10_000)
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def csv_cell(value):
    """``value`` for a CSV cell: text shown as by :func:`display`, with a ``'`` in front when it starts with
    ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP, "CSV Injection"); numbers as they are."""
    if not isinstance(value, str):
        return value
    text = os.fsencode(value).decode("utf-8", "backslashreplace")
    return "'" + text if text.startswith(FORMULA_START) else text
