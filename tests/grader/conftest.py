"""Fixtures shared by the grader's tests."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def open_dir():
    """A folder every user may pass through and read (0755, under /tmp): only ownership keeps a worker out."""
    path = Path(tempfile.mkdtemp(prefix="mhattn-open-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
