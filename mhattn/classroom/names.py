"""Student ids as the file system gives them, made safe to show, to name a file after and to put in a CSV cell.

A hand-in's name is its student id, and may be anything a file system allows: bytes that are not UTF-8 (as
``unzip`` leaves Latin-1 names; Python holds them as lone surrogates), 255 bytes, a leading dash, control
characters. :func:`display` is the id as text anyone can read; :func:`file_stem` the name of that student's
files under ``results/`` and ``feedback/``; :func:`csv_cell` a cell no spreadsheet runs as a formula.
"""

from __future__ import annotations

import hashlib
import os

from mhattn.grade.harness import one_line

MAX_STEM = 200  # bytes: results/<stem>.json.tmp stays under the usual 255-byte limit on a file name
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list of what makes a spreadsheet cell a formula


def display(sid: str) -> str:
    """``sid`` as printable text: undecodable bytes as ``\\xe9``, control characters escaped, on one line."""
    text = os.fsencode(sid).decode("utf-8", "backslashreplace")
    return one_line(text, limit=10_000)


def file_stem(sid: str) -> str:
    """The name of the student's files (``results/<stem>.json``): ``sid`` itself when it is printable UTF-8 of at
    most :data:`MAX_STEM` bytes that does not start with a dot or a dash; else a readable prefix and a hash of it."""
    raw = os.fsencode(sid)
    if display(sid) == sid and len(raw) <= MAX_STEM and not sid.startswith((".", "-")) and "/" not in sid:
        return sid
    readable = "".join(c if c.isalnum() or c in "_." else "_" for c in display(sid).lstrip(".-"))[:40]
    return f"{readable or 'student'}-{hashlib.sha256(raw).hexdigest()[:16]}"


def csv_cell(value):
    """``value`` for a CSV cell: text shown as by :func:`display`, with a ``'`` in front when it starts with
    ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP, "CSV Injection"); numbers as they are."""
    if not isinstance(value, str):
        return value
    text = os.fsencode(value).decode("utf-8", "backslashreplace")
    return "'" + text if text.startswith(FORMULA_START) else text
