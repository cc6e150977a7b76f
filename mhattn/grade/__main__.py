"""``python -m mhattn.grade [PATH]``: the same as ``mhattn grade [PATH]``."""

import sys

from mhattn.commands.grade import run

sys.exit(run())
