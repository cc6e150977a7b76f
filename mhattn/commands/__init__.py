"""One module per ``mhattn`` subcommand (see mhattn/cli.py)."""

import argparse


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {n}")
    return n


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (seeds)."""
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {n}")
    return n
