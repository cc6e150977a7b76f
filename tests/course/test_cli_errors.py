"""Every bad option fails at once: one line naming the option, exit status 2, no traceback, no files.

Every numeric option is checked by one helper and phrases its range the same way for every bad value, and a
command given without its subcommand lists the choices and an example.
"""

from __future__ import annotations

import shutil
import time

import pytest

from mhattn import __version__, cli


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Readable checkpoints that ``mhattn prune`` must still refuse: ``odd_task.npz`` (a task it does not know)
    and ``a/x.npz``, ``b/x.npz`` (two models under one name)."""
    from mhattn.training.checkpoint import load_checkpoint, save_checkpoint

    root = tmp_path_factory.mktemp("checkpoints")
    model, meta = load_checkpoint("roles-plain")
    save_checkpoint(root / "odd_task.npz", model, {"name": "bogus"}, meta["training"])
    save_checkpoint(root / "a" / "x.npz", model, meta["task"], meta["training"])
    save_checkpoint(root / "b" / "x.npz", model, meta["task"], meta["training"])
    return root


@pytest.fixture
def workdir(tmp_path, monkeypatch, checkpoints):
    """An empty current folder holding one file, ``a_file``, one corrupt checkpoint, ``bad.npz``, and the
    readable but refused ones of :func:`checkpoints`."""
    shutil.copytree(checkpoints, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "bad.npz").write_bytes(b"not a zip archive")
    return tmp_path


# (argv, the option the message must name, a fragment of the message)
BAD = [
    # out of range
    (["prune", "--remove", "13"], "--remove", "[1, 12]"),
    (["prune", "--remove", "0"], "--remove", ">= 1"),
    (["prune", "--remove", "-2"], "--remove", ">= 1"),
    (["prune", "--n-random", "-5"], "--n-random", "[2, 100000]"),
    (["prune", "--n-random", "1"], "--n-random", "[2, 100000]"),
    (["prune", "--eval-size", "0"], "--eval-size", "[1, 100000]"),
    (["prune", "--seed", "-1"], "--seed", ">= 0"),
    (["train", "--steps", "-1"], "--steps", ">= 1"),
    (["train", "--steps", "0"], "--steps", ">= 1"),
    (["train", "--head-dropout", "1.5"], "--head-dropout", "[0, 1)"),
    (["train", "--head-dropout", "1"], "--head-dropout", "[0, 1)"),
    (["train", "--head-dropout", "-0.1"], "--head-dropout", "[0, 1)"),
    (["train", "--batch-size", "0"], "--batch-size", "[1, 65536]"),
    (["train", "--lr", "-1"], "--lr", ">= 0"),
    (["train", "--lr", "nan"], "--lr", "finite"),
    (["train", "--seed", "-3"], "--seed", ">= 0"),
    (["walkthrough", "--d-model", "0"], "--d-model", "[1, 4096]"),
    (["walkthrough", "--d-model", "100000"], "--d-model", "[1, 4096]"),
    (["walkthrough", "--num-heads", "0"], "--num-heads", "[1, 4096]"),
    (["walkthrough", "--num-heads", "7"], "--num-heads", "must divide --d-model=512"),
    (["walkthrough", "--seed", "-1"], "--seed", ">= 0"),
    (["walkthrough", "--sentence", "   "], "--sentence", "1 to 512"),
    # wrong type
    (["prune", "--remove", "six"], "--remove", "'six'"),
    (["prune", "--n-random", "2.5"], "--n-random", "'2.5'"),
    (["prune", "--task", "vision"], "--task", "invalid choice"),
    (["train", "--lr", "fast"], "--lr", "'fast'"),
    (["train", "--steps", "1e3"], "--steps", "'1e3'"),
    (["walkthrough", "--d-model", "big"], "--d-model", "'big'"),
    # missing or unusable files
    (["prune", "--checkpoint", "missing.npz"], "--checkpoint", "no such file"),
    (["prune", "--checkpoint", "bad.npz"], "--checkpoint", "corrupt"),
    (["prune", "--checkpoint", "odd_task.npz"], "--checkpoint", "no usable task"),
    (["prune", "--checkpoint", "a/x.npz", "--checkpoint", "b/x.npz"], "--checkpoint", "the same name 'x'"),
    (["prune", "--out", "a_file"], "--out", "existing file"),
    (["prune", "--out", "a_file/report"], "--out", "is a file"),
    (["train", "--out", "."], "--out", "is a folder"),
    (["train", "--out", "a_file/model.npz"], "--out", "is a file"),
    (["walkthrough", "--out", "a_file"], "--out", "existing file"),
    (["walkthrough", "--out", "a_file/pictures"], "--out", "is a file"),
    (["train", "--out", "a_file"], "--out", "does not end in .npz"),
    (["train", "--out", "bad.npz"], "--out", "not a checkpoint"),
    (["course", "init", "a_file"], "DIR", "existing file"),
    (["grade", "--seed", "-5"], "--seed", ">= 0"),
    (["grade", "--memory", "1"], "--memory", ">= 256"),
    (["grade", "--timeout", "0"], "--timeout", "> 0"),
]


def test_course_init_into_an_unwritable_place_is_one_line(tmp_path, capsys):
    assert cli.main(["course", "init", "/proc/no/such/place"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "cannot write into /proc/no/such/place" in err and "Traceback" not in err


@pytest.mark.parametrize(("argv", "option", "fragment"), BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_bad_option_fails_at_once_with_one_line(workdir, capsys, argv, option, fragment):
    before = sorted(p.name for p in workdir.iterdir())
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    seconds = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    command = " ".join(argv[:2]) if argv[0] == "course" else argv[0]
    assert lines[0].startswith(f"mhattn {command}: error: argument {option}") and fragment in lines[0], lines[0]
    assert "Traceback" not in err + out and out == ""
    assert sorted(p.name for p in workdir.iterdir()) == before  # nothing written, no stray .tmp
    assert seconds < 5.0, f"{seconds:.1f} s: the check must come before any work (training takes minutes)"


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"mhattn {__version__}"


@pytest.mark.parametrize("command", ["walkthrough", "train", "prune"])
def test_every_option_has_help_and_shows_its_default(command, capsys):
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{command} {action.option_strings} has no help text"
        text = sub.formatter_class(prog="x")._get_help_string(action)
        assert "%(default)" in text or "default" in action.help, f"{command} {action.option_strings} hides its default"
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    assert "(default: " in capsys.readouterr().out


def test_a_bug_inside_a_command_keeps_its_traceback(monkeypatch):
    """Only usage errors become messages: a ValueError from deep inside propagates."""
    from mhattn.commands import walkthrough

    def broken(*args, **kwargs):
        raise ValueError("a bug deep inside")

    monkeypatch.setattr(walkthrough.walkthrough, "run", broken)
    with pytest.raises(ValueError, match="a bug deep inside"):
        cli.main(["walkthrough"])


def test_text_head_dropout_is_honoured(tmp_path):
    from mhattn.training.checkpoint import load_checkpoint

    out = tmp_path / "text-hd.npz"
    argv = ["train", "--task", "text", "--head-dropout", "0.3", "--steps", "2", "--batch-size", "2", "--no-progress"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    _, meta = load_checkpoint(out)
    assert meta["training"]["head_dropout"] == 0.3 and meta["training"]["recipe"] == "text"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text-hd.npz"]  # no stray .tmp


def test_gitignore_lists_the_quickstart_outputs():
    from pathlib import Path

    lines = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().split()
    assert "prune_report/" in lines and "walkthrough_out/" in lines


# --- numeric options: one helper, one phrasing --------------------------------------------------------------------------


def _numeric_options():
    """(command, option, the range text) of every option whose value is a number."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    found = []
    for command, p in sub.choices.items():
        for action in p._actions:
            numeric_default = isinstance(action.default, int | float) and not isinstance(action.default, bool)
            if action.type in (int, float) or numeric_default or hasattr(action.type, "range_text"):
                assert hasattr(action.type, "range_text"), f"mhattn {command} {action.option_strings}: use number_in"
                found.append((command, action.option_strings[0], action.type.range_text))
    return found


def test_every_numeric_option_uses_the_one_range_helper():
    options = {(c, o) for c, o, _ in _numeric_options()}
    assert {("train", "--lr"), ("train", "--steps"), ("prune", "--remove"), ("grade", "--timeout")} <= options


@pytest.mark.parametrize(("command", "option", "where"), _numeric_options(), ids=lambda v: str(v))
def test_every_bad_value_of_a_numeric_option_reads_the_same(command, option, where, capsys):
    messages = []
    for value in ("-1000000000", "-1", "abc", "nan", "inf"):  # out of range for every option (all ranges are >= 0)
        with pytest.raises(SystemExit) as exc:
            cli.main([command, option, value])
        assert exc.value.code == 2
        messages.append(capsys.readouterr().err)
    for err in messages:
        head = f"mhattn {command}: error: argument {option}: must be "
        assert err.startswith(head) and f" {where}, got " in err, err
    assert len({err.split(", got ")[0] for err in messages}) == 1, messages  # one phrasing, whatever the value


def test_lr_zero_is_accepted_and_negative_values_get_one_message(capsys):
    """Warm-up schedules produce lr = 0, so the optimisers and ``--lr`` accept it;
    a negative value gets the one ">= 0" message the optimisers give."""
    assert cli.build_parser().parse_args(["train", "--lr", "0"]).lr == 0.0  # parsed only: no training run
    errs = []
    for value in ("-1", "-0.5"):
        with pytest.raises(SystemExit):
            cli.main(["train", "--lr", value])
        errs.append(capsys.readouterr().err)
    assert errs == [f"mhattn train: error: argument --lr: must be a finite number >= 0, got {v} (see mhattn train --help)\n"
                    for v in ("-1", "-0.5")]  # fmt: skip


# --- a command without its subcommand ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "choices", "example"), [
    (["course"], ["init"], "mhattn course init my-course"),
    ([], ["walkthrough", "train", "prune", "grade", "course"], "mhattn course init my-course"),
])  # fmt: skip
def test_a_missing_subcommand_lists_the_choices_and_an_example(argv, choices, example, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "required" not in err
    assert all(f"{c} (" in err for c in choices) and f"Example: {example}" in err, err
