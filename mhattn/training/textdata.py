"""The deep model's text: CPython's documentation that ships with Python, character by character.

The corpus (:func:`load_python_text`) is, in this order and joined by blank lines:

1. every entry of ``pydoc_data.topics`` in sorted key order (about 465 K characters: the language reference's
   topics that ``help()`` shows);
2. the docstrings (``inspect.getdoc``) of the standard-library modules in :data:`DOC_MODULES` (sorted), each
   module's own docstring first, then those of its public classes and functions (sorted by name) and of
   those classes' public methods (about 244 K characters on CPython 3.11);

cut to its first :data:`N_CHARS` characters. Characters outside printable ASCII and newline become ``"?"``
(a fixed 96-character vocabulary). Validation is every tenth block of :data:`BLOCK` characters (blocks 9, 19,
...), so both parts of the corpus are in both splits; training is the other blocks, joined in order.

The text depends on the Python version (the documentation changes between releases): :func:`text_sha256`
names it, and the deep model's data file records the hash it was measured on.
"""

from __future__ import annotations

import functools
import hashlib
import string
import subprocess
import sys
from pathlib import Path

import numpy as np

from mhattn.training.tasks import TextTask, load_topics_text, register

DOC_MODULES = ("argparse", "collections", "contextlib", "csv", "dataclasses", "difflib", "email.message", "fractions",
               "functools", "heapq", "inspect", "json", "logging", "os", "pathlib", "pickle", "random", "re", "shutil",
               "statistics", "string", "subprocess", "textwrap", "threading", "typing", "unittest", "urllib.parse",
               "zipfile")  # fmt: skip
N_CHARS = 700_000  # characters of the corpus used (train + validation)
BLOCK = 10_000  # validation is every tenth block of this many characters
CHARSET = "\n" + "".join(c for c in string.printable if c.isprintable())  # 96 characters: newline and printable ASCII
UNKNOWN = "?"


@functools.cache
def stdlib_docstrings():
    """The docstrings of :data:`DOC_MODULES` as one string, collected by :mod:`mhattn.training.stdlib_docs` in a
    fresh interpreter that imports nothing else (see there for the order, and why).

    Raises:
        RuntimeError: the interpreter failed (its error output is in the message).
    """
    script = Path(__file__).with_name("stdlib_docs.py")
    proc = subprocess.run([sys.executable, "-I", str(script), *DOC_MODULES], capture_output=True, timeout=120)
    if proc.returncode:
        raise RuntimeError(f"collecting the standard library's docstrings failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode("utf-8")


def load_python_text(n_chars=N_CHARS):
    """The first ``n_chars`` characters of the corpus, with characters outside :data:`CHARSET` as ``"?"``."""
    text = (load_topics_text() + "\n\n" + stdlib_docstrings())[:n_chars]
    allowed = set(CHARSET)
    return "".join(c if c in allowed else UNKNOWN for c in text)


def text_sha256(n_chars=N_CHARS) -> str:
    """SHA-256 of :func:`load_python_text`'s UTF-8 bytes: which text (which Python's documentation) a number is on."""
    return hashlib.sha256(load_python_text(n_chars).encode()).hexdigest()


def split_blocks(data, block=BLOCK):
    """``(train, val)`` of a ``(N,)`` array: validation is blocks ``9, 19, 29, ...`` of ``block`` items."""
    idx = np.arange(len(data)) // block
    val = idx % 10 == 9
    return data[~val], data[val]


def bigram_logprobs(train, vocab_size: int, alpha: float = 1.0):
    """``(V, V)`` float64 log P(next | previous) counted on the ``(N,)`` ids ``train``, add-``alpha`` smoothed: the
    bigram model, which sees one character back and attends to nothing."""
    counts = np.zeros((vocab_size, vocab_size)) + alpha
    np.add.at(counts, (train[:-1], train[1:]), 1.0)
    return np.log(counts / counts.sum(axis=1, keepdims=True))


@register
class DeepTextTask(TextTask):
    """Character-level language modelling on :func:`load_python_text` (the ``text-deep`` model's task).

    Args:
        seq_len: T. n_chars: characters of the corpus used. block: the validation block size.

    ``sample``, ``eval_set``, ``rarity`` and ``decode`` are :class:`TextTask`'s.
    """

    name = "text-deep"

    def __init__(self, seq_len=64, n_chars=N_CHARS, block=BLOCK):  # noqa: D107 (TextTask.__init__ is not called)
        if seq_len < 2 or n_chars < 20 * block:
            raise ValueError(f"text-deep needs seq_len >= 2 and n_chars >= 20 * block, got {seq_len}, {n_chars}, {block}")
        self.charset = CHARSET
        lookup = {c: i for i, c in enumerate(CHARSET)}
        self.data = np.array([lookup[c] for c in load_python_text(n_chars)], dtype=np.int64)  # (N,)
        self.train, self.val = split_blocks(self.data, block)
        self.seq_len, self.n_chars, self.block = int(seq_len), int(n_chars), int(block)
        self.vocab_size = len(CHARSET)
        self.output_names = ("next_char",)
        self.output_sizes = (self.vocab_size,)
        self.causal = True

    def bigram_loss(self, ids, targets, alpha=1.0):
        """Validation loss (nats) of the bigram model counted on the training text, add-``alpha`` smoothed:
        ``-mean log P(target | previous character)`` over the ``(N, T)`` ``ids`` and ``targets``."""
        return float(-bigram_logprobs(self.train, self.vocab_size, alpha)[ids, targets].mean())

    def to_meta(self):
        return {"name": self.name, "seq_len": self.seq_len, "n_chars": self.n_chars, "block": self.block}
