"""``python -m mhattn.grade [PATH]``: the same as ``mhattn grade [PATH]``."""

import sys

from mhattn.grade.cli import run

sys.exit(run())
