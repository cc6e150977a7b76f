"""One module per ``mhattn`` subcommand (see mhattn/cli.py)."""
