"""One module per ``mhattn`` subcommand (see mhattn/cli.py), and the checks their options share.

Every option is checked when the command line is parsed, before any work: the ``type=``
helpers below name the valid range; what needs two options or a checkpoint at once is
checked first thing in the command's ``main`` and raised as :class:`UsageError`. Both
end as one line ``mhattn <command>: error: argument --x: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import zipfile
from pathlib import Path

from mhattn.backend.argtypes import number_in, range_text  # noqa: F401  (the commands import them from here)


class UsageError(Exception):
    """Bad command-line input found after parsing (it needs several options or a file): exit 2, one line."""


def int_in(low, high=None):
    """argparse type: an integer in ``[low, high]`` (no upper bound when ``high`` is None)."""
    return number_in(int, low, high)


def float_in(low, high, *, high_open=False):
    """argparse type: a finite float in ``[low, high]`` (``[low, high)`` when ``high_open``; ``high`` may be inf)."""
    return number_in(float, low, high, high_open=high_open)


positive_float = number_in(float, 0.0, low_open=True)
non_negative_float = number_in(float, 0.0)  # learning rates: 0 allowed (warm-up reaches it); -1 reads ">= 0", as in optim
positive_int = int_in(1)
non_negative_int = int_in(0)


def _writable_place(path: Path, what: str) -> None:
    """Raise unless ``path`` can be created: its nearest existing ancestor is a writable folder."""
    parent = path.parent.resolve()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create {what} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot create {what} {path}: no permission to write in {parent}")


def output_dir(text: str) -> Path:
    """argparse type: a folder to write into (existing, or one that can be created); not an existing file."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is an existing file; give a folder")
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"no permission to write in {path}")
    if not path.exists():
        _writable_place(path, "folder")
    return path


def output_file(text: str) -> Path:
    """argparse type: a file to write (new or replaced), not a folder, in a place that can be created."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a folder; give a file name such as {path / 'model.npz'}")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"no permission to replace {path}")
    _writable_place(path, "file")
    return path


def checkpoint_out(text: str) -> Path:
    """argparse type: a ``.npz`` checkpoint to write; an existing file is replaced only if it is a zip (a checkpoint)."""
    path = output_file(text)
    if path.suffix != ".npz":
        raise argparse.ArgumentTypeError(f"{path} does not end in .npz; give a checkpoint name such as model.npz")
    if path.exists() and not zipfile.is_zipfile(path):
        raise argparse.ArgumentTypeError(f"{path} exists and is not a checkpoint; refusing to overwrite it")
    return path
