"""``mhattn grade`` as a learner or a script calls it: ``--only`` before or after the folder, ``--fail-under`` and
its exit status, a submission's own printed output cut rather than scored 0, and plain-text ``--help`` for every
``mhattn`` command (no reStructuredText markup such as double backquotes or ``:func:`` roles)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from mhattn import cli
from mhattn.grade import cli as grade_cli
from mhattn.grade import grade

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from classroom_cases import SOLUTIONS, STUBS  # noqa: E402

EX08 = "ex08_count_parameters.py"
MARKUP = re.compile(r"``|:(func|mod|class|meth|data|attr|doc|ref|exc):`|\{doc\}")


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    """``tmp_path/exercises`` with ex08 solved and ex01 a stub; the current folder is ``tmp_path``."""
    sub = tmp_path / "exercises"
    sub.mkdir()
    (sub / EX08).write_text(SOLUTIONS[EX08], encoding="utf-8")
    (sub / "ex01_split_heads.py").write_text(STUBS["ex01_split_heads.py"], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return sub


@pytest.mark.grader
@pytest.mark.parametrize("argv", [["--only", "ex08", "exercises"], ["exercises", "--only", "ex08"],
                                  ["--only", "ex08"], ["--only", "ex08", "ex08"]])  # fmt: skip
def test_only_takes_the_folder_before_or_after_it(folder, argv, capsys):
    assert cli.main(["grade", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert '"name": "ex08_count_parameters"' in out and '"total": 5' in out and "ex01" not in out


def test_a_folder_that_cannot_be_read_as_the_path_says_which_order_works(folder, capsys):
    (folder.parent / "other").mkdir()
    assert cli.main(["grade", "exercises", "--only", "ex08", "other"]) == 2
    err = capsys.readouterr().err
    assert "no exercise 'other'" in err and "put a folder before --only" in err
    assert cli.main(["grade", "--only", "ex08", "nothing"]) == 2 and "no exercise 'nothing'" in capsys.readouterr().err


@pytest.mark.grader
@pytest.mark.parametrize("percent, status", [(None, 0), ("5", 0), ("50", 0), ("51", 1), ("100", 1)])
def test_fail_under_sets_the_exit_status(folder, percent, status, capsys):
    """ex08 solved (5 points) and ex01 a stub (5 points): 50% of the points graded."""
    extra = [] if percent is None else ["--fail-under", percent]
    assert cli.main(["grade", "--only", "ex01", "ex08", *extra]) == status
    err = capsys.readouterr().err
    assert ("below --fail-under" in err) == (status == 1)


@pytest.mark.parametrize("bad", ["-1", "101", "nan", "lots"])
def test_fail_under_is_a_percentage(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["grade", "--fail-under", bad])
    assert exit_.value.code == 2 and "--fail-under" in capsys.readouterr().err


@pytest.mark.grader
def test_printed_output_past_the_limit_is_cut_not_scored(tmp_path):
    """20 MiB of debug prints (past the 16 MiB file-size limit) keep the points; an exception after them still shows."""
    line = "    kdim = d_model if kdim is None else kdim\n"
    text = SOLUTIONS[EX08].replace(line, "    for _ in range(20):\n        print('debug ' * (1 << 17))\n" + line)
    assert text.count("print('debug '") == 1
    (tmp_path / EX08).write_text(text, encoding="utf-8")
    report = grade(tmp_path, only=["ex08"], seed=1)
    assert report["total"] == 5, report["exercises"][0]["reason"]


def _parsers(parser, prog="mhattn"):
    """``(prog, parser)`` for ``parser`` and every subcommand under it, at any depth."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prog} {name}")


def test_every_help_is_plain_text():
    parsers = dict(_parsers(cli.build_parser()))
    assert {"mhattn grade", "mhattn gradebook", "mhattn autograder", "mhattn course"} <= set(parsers)
    standalone = argparse.ArgumentParser(prog="python -m mhattn.grade", description=grade_cli.DESCRIPTION,
                                         epilog=grade_cli.EPILOG)  # fmt: skip
    grade_cli.add_arguments(standalone)
    for prog, parser in [*parsers.items(), ("python -m mhattn.grade", standalone)]:
        text = parser.format_help()
        assert not MARKUP.search(text), f"{prog} --help shows markup: {MARKUP.search(text).group(0)!r}"
