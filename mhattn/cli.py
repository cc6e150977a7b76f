"""The ``mhattn`` command. Each subcommand lives in its own module with ``add_parser`` and ``main``.

Usage errors (a bad option, found while parsing or as :class:`mhattn.commands.UsageError`
before any work) end as one line on stderr and exit status 2. Any other exception is a
bug or a failure of the machine and keeps its traceback.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys

from mhattn import __version__
from mhattn.commands import UsageError

# subcommand -> module that defines add_parser(subparsers) and main(args)
SUBCOMMANDS = {
    "walkthrough": "mhattn.commands.walkthrough",
    "train": "mhattn.commands.train",
    "prune": "mhattn.commands.prune",
    "grade": "mhattn.commands.grade",
    "gradebook": "mhattn.commands.gradebook",
    "autograder": "mhattn.commands.autograder",
    "course": "mhattn.commands.course",
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, except where the help text already explains a ``None`` default."""

    def _get_help_string(self, action):
        if action.default is None and "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: ``<prog>: error: <message> (see <prog> --help)``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {self._choose(message) or message} (see {self.prog} --help)\n")

    def _choose(self, message):
        """For a missing subcommand, instead of argparse's "required: action": the choices, their help, an example."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and message.endswith(f"required: {action.dest}"):
                listed = "; ".join(f"{c.dest} ({c.help})" for c in action._choices_actions)
                example = getattr(action, "example", f"{self.prog} {next(iter(action.choices))} --help")
                return f"choose {'an' if action.dest[0] in 'aeiou' else 'a'} {action.dest}: {listed}. Example: {example}"
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mhattn", description="Multi-head attention built by hand: library and course.",
                    formatter_class=HelpFormatter)  # fmt: skip
    parser.add_argument("--version", action="version", version=f"mhattn {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=functools.partial(Parser, formatter_class=HelpFormatter)
    )
    sub.example = "mhattn course init my-course"  # shown when no command is given (Parser._choose)
    for name, module in SUBCOMMANDS.items():
        importlib.import_module(module).add_parser(sub, name)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(importlib.import_module(SUBCOMMANDS[args.command]).main(args) or 0)
    except UsageError as err:
        parser.exit(2, f"mhattn {args.command}: error: {err} (see mhattn {args.command} --help)\n")


if __name__ == "__main__":
    sys.exit(main())
