"""How a test submission is made: small edits of a freshly generated solutions/ (cases: cases.py).

Each case is a list of edits ``(file, old text, new text)`` applied to a freshly generated copy of
``solutions/`` (``old`` must occur exactly once), the one exercise it attacks, and what the grader
must answer: 0 points with ``words`` in the reason (or, with ``full``, the exercise's full points: a
correct answer that also starts a child or a thread). ``modes`` says where the grader must hold:
``"sandbox"`` (bubblewrap) and/or ``"plain"`` (no sandbox); see the trust model in docs/grading.md.
Every process a case starts carries :data:`MARKER` in its command line, so a test can look for it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

MARKER = "mhattn-attack-marker"
BOTH = ("sandbox", "plain")
SANDBOX = ("sandbox",)

EX05 = "ex05_combine_heads.py"
EX05_BODY = "    out = x.transpose(0, 2, 1, 3)  # (B, T, h, d_k)\n"
EX05_RETURN = "    return np.ascontiguousarray(out).reshape(B, T, h * d_k)  # (B, T, d_model)\n"
EX02 = "ex02_softmax.py"
EX11 = "ex11_online_softmax.py"
EX02_BODY = "    z = scores if mask is None else np.where(mask, -np.inf, scores).astype(scores.dtype)\n"
EX08 = "ex08_count_parameters.py"
EX08_CHECKED = (  # in count_parameters: the arguments are checked, kdim is set
    '        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")\n'
    "    kdim = d_model if kdim is None else kdim\n"
)
IMPORTS = "\nimport numpy as np\n"
ZEROS = "return np.zeros((B, T, h * d_k), dtype=x.dtype)"
SLEEPER = f"[sys.executable, '-c', 'import time; time.sleep(60)', '{MARKER}']"


@dataclass(frozen=True)
class Edit:
    file: str
    old: str
    new: str


@dataclass(frozen=True)
class Case:
    name: str
    exercise: str  # the exercise this case is about (full name)
    edits: tuple[Edit, ...]
    words: str = ""  # must appear in that exercise's reason
    modes: tuple[str, ...] = BOTH
    full: bool = False  # the exercise keeps its full points (a correct answer with a harmless extra)


def _code(code: str, indent: str) -> str:
    return textwrap.indent(textwrap.dedent(code).strip("\n") + "\n", indent)


def at_import(file: str, code: str) -> Edit:
    """``code`` runs when the file is imported (after ``import numpy as np``)."""
    return Edit(file, IMPORTS, IMPORTS + _code(code, ""))


def ex05_first(code: str) -> Edit:
    """``code`` runs at the start of ``combine_heads`` (after the shape checks); the correct answer follows."""
    return Edit(EX05, EX05_BODY, _code(code, "    ") + EX05_BODY)


def ex05_instead(code: str) -> Edit:
    """``code`` replaces the answer of ``combine_heads`` (``B, h, T, d_k`` are set)."""
    return Edit(EX05, EX05_BODY + EX05_RETURN, _code(code, "    "))


def ex02_instead(code: str) -> Edit:
    """``code`` replaces the body of ``softmax_forward`` (arguments ``scores, mask``)."""
    body = EX02_BODY + (
        "    m = z.max(axis=-1, keepdims=True)  # (..., 1)\n"
        "    m = np.where(np.isfinite(m), m, 0)  # a fully masked row has max -inf\n"
        "    e = np.exp(z - m)  # (..., S), masked entries are exp(-inf) = 0\n"
        "    s = e.sum(axis=-1, keepdims=True)  # (..., 1)\n"
        "    return (e / np.where(s == 0, 1, s)).astype(scores.dtype)\n"
    )
    return Edit(EX02, body, _code(code, "    "))


def apply(files: dict[str, str], edits) -> dict[str, str]:
    """``files`` (name -> text) with ``edits`` applied; each ``old`` must occur exactly once."""
    out = dict(files)
    for e in edits:
        count = out[e.file].count(e.old)
        if count != 1:
            raise ValueError(f"{e.file}: the edit's old text occurs {count} times (expected once): {e.old[:60]!r}")
        out[e.file] = out[e.file].replace(e.old, e.new)
    return out
