"""``mhattn grade [PATH]``: grade the exercise files under PATH (default ``exercises/``); see :mod:`mhattn.grade.cli`."""

from __future__ import annotations

import argparse

from mhattn.grade import cli


def add_parser(sub, name):
    p = sub.add_parser(
        name,
        help="grade your exercise files: visible + hidden tests, points per exercise",
        description=cli.DESCRIPTION,
        epilog=cli.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_arguments(p)


def main(args) -> int:
    return cli.main(args)
