"""The ``mhattn`` command. Each subcommand lives in its own module with ``add_parser`` and ``main``."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> module that defines add_parser(subparsers) and main(args)
SUBCOMMANDS = {
    "walkthrough": "mhattn.commands.walkthrough",
    "train": "mhattn.commands.train",
    "prune": "mhattn.commands.prune",
    "grade": "mhattn.commands.grade",
    "course": "mhattn.commands.course",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mhattn", description="Multi-head attention built by hand: library and course.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in SUBCOMMANDS.items():
        importlib.import_module(module).add_parser(sub, name)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(importlib.import_module(SUBCOMMANDS[args.command]).main(args) or 0)
    except (ValueError, TypeError, KeyError, FileNotFoundError) as err:  # bad input: a message, not a traceback
        parser.exit(2, f"mhattn {args.command}: error: {err}\n")


if __name__ == "__main__":
    sys.exit(main())
