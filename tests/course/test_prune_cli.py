"""``mhattn prune`` and ``mhattn train`` end to end, on small settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from xp_testing import assert_close_tree

from mhattn import cli
from mhattn.training.checkpoint import load_checkpoint

SMALL = ["--n-random", "4", "--eval-size", "4"]  # two complement pairs per layer, four windows


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("prune")
    assert cli.main(["prune", *SMALL, "--out", str(out)]) == 0
    return out, json.loads((out / "report.json").read_text())


def test_prune_with_no_options_asks_the_twelve_head_model_in_every_layer(report):
    """The main job: text-deep12, every layer, complement pairs of sixes, the three levels, a box and a figure."""
    out, rep = report
    assert rep["report_version"] == 5 and "two distinct reasons" in rep["question"]
    assert set(rep["models"]) == {"text-deep12"}
    m = rep["models"]["text-deep12"]
    layers = m["measurement"]["layers"]
    assert [x["layer"] for x in layers] == [0, 1, 2, 3] and len(m["reasons"]) == 4
    for x in layers:
        a, b = x["subsets"][0], x["subsets"][1]
        assert x["paired"] and sorted(a + b) == list(range(12)) and len(a) == 6  # a six and its complement
        assert set(x["sixes"]) == {"total", "heads-only", "direct"} and len(x["sixes"]["total"]["dloss"]) == 4
        assert len(x["single"]["direct"]["dloss"]) == 12 and {"total", "mean"} <= set(x["all"])
    last = layers[-1]  # no head reads the last layer: heads-only is the total there
    assert last["sixes"]["heads-only"] == last["sixes"]["total"]
    r0 = m["reasons"][0]
    for key in ("six_dloss", "six_dacc", "pair_ratio", "pair_ratio_acc", "indirect", "indirect_acc", "median_over_mean"):
        assert {"median", "ci", "p5", "p95", "mean", "n"} <= set(r0[key]) and r0[key]["ci"][0] <= r0[key]["ci"][1]
    assert r0["overlap"] in ("supported", "not supported", "unclear") and r0["heads"] != "none after"
    assert m["reasons"][-1]["heads"] == "none after"
    assert m["measurement"]["ngram"]["bigram"]["loss"] > m["measurement"]["baseline"]["loss"]
    assert (out / "sixes_text-deep12.png").stat().st_size > 5000
    md = (out / "report.md").read_text(encoding="utf-8")
    assert m["box"] in md and rep["question"] in md


def test_prune_prints_the_question_then_the_box(capsys, tmp_path):
    assert cli.main(["prune", *SMALL, "--no-plots", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Question: If a model has twelve attention heads per layer")
    box = text.split("\n\n")[1]
    assert box.startswith("text-deep12 (4 x 12 heads)") and "Answer:" in box and "report.md" in text
    assert not list(tmp_path.glob("*.png"))


def test_the_progress_bar_shows_when_piped_and_under_a_pty(tmp_path):
    """Progress is written to stderr whether it is a pipe or a terminal (the main job takes a minute)."""
    import pty

    cmd = [
        sys.executable,
        "-c",
        "import sys; from mhattn.cli import main; sys.exit(main())",
        "prune",
        "--n-random",
        "2",
        "--eval-size",
        "2",
        "--no-plots",
    ]
    piped = subprocess.run([*cmd, "--out", str(tmp_path / "a")], capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "sixes evaluated" in piped.stderr, piped.stderr[-2000:]
    main, sub = pty.openpty()
    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "b")], stdout=subprocess.DEVNULL, stderr=sub)
    os.close(sub)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the pty closes when the command ends
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=300) == 0 and b"sixes evaluated" in seen


def test_one_job_gives_the_same_numbers_as_two(report, tmp_path):
    """The layers run side by side in threads, one BLAS thread each: the numbers do not depend on --jobs."""
    assert cli.main(["prune", *SMALL, "--jobs", "1", "--no-plots", "--out", str(tmp_path)]) == 0
    one = json.loads((tmp_path / "report.json").read_text())
    assert one["models"]["text-deep12"]["measurement"] == report[1]["models"]["text-deep12"]["measurement"]


def test_the_toys_stay_a_task_option(tmp_path):
    """``--task roles``: the two one-layer models, with the same measurements; no head reads another's output."""
    assert cli.main(["prune", "--task", "roles", "--n-random", "4", "--eval-size", "16", "--no-plots", "--out",
                     str(tmp_path)]) == 0  # fmt: skip
    rep = json.loads((tmp_path / "report.json").read_text())
    assert list(rep["models"]) == ["roles-plain", "roles-headdropout"]
    for m in rep["models"].values():
        assert m["measurement"]["num_layers"] == 1 and m["reasons"][0]["heads"] == "none after"
        assert m["measurement"]["ngram"] is None  # no training text: the mean-output anchor only


def test_prune_options_are_the_settings_defaults():
    """The command and the library (and so notebook 07's shipped data) run the same experiment."""
    from mhattn.heads.sixes import SixesSettings

    args, s = cli.build_parser().parse_args(["prune"]), SixesSettings()
    assert (args.task, args.remove, args.n_random, args.seed, args.eval_size) == ("text-deep12", s.n_remove,
                                                                                 s.n_subsets, s.seed, None)  # fmt: skip


def test_remove_is_bounded_by_a_layers_heads():
    import argparse

    from mhattn.commands import UsageError
    from mhattn.commands.prune import add_parser, check

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), "prune")
    check(parser.parse_args(["prune", "--remove", "12"]))
    with pytest.raises(UsageError, match=r"argument --remove: .*has 12 heads per layer\), got 13"):
        check(parser.parse_args(["prune", "--remove", "13"]))
    with pytest.raises(UsageError, match="has 8 heads per layer"):
        check(parser.parse_args(["prune", "--task", "text-deep", "--remove", "9"]))


@pytest.mark.parametrize("gone", ["--layer", "--gate-steps", "--curve-orders", "--finetune-steps"])
def test_the_old_options_are_refused(gone, capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(["prune", gone, "1"])
    assert err.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_train_cli_writes_a_loadable_checkpoint(tmp_path, capsys):
    path = tmp_path / "hd.npz"
    args = ["train", "--task", "roles", "--head-dropout", "0.3", "--steps", "20", "--batch-size", "16", "--no-progress"]
    assert cli.main([*args, "--out", str(path)]) == 0
    model, meta = load_checkpoint(path)
    assert meta["training"]["head_dropout"] == 0.3 and meta["training"]["steps"] == 20
    assert model.cfg.num_heads == 12 and "checkpoint written" in capsys.readouterr().out


def test_run_prune_is_the_measurements_plus_the_gate_experiment():
    """``mhattn prune`` runs the gates as a task of its own; ``run_prune`` (the notebooks') gives the same dict."""
    from mhattn.heads.prune import PruneSettings, gate_experiment, run_prune
    from mhattn.training.checkpoint import load_checkpoint
    from mhattn.training.tasks import task_from_meta

    model, meta = load_checkpoint("roles-plain")
    task = task_from_meta(meta["task"])
    s = PruneSettings(n_random=4, eval_size=32, curve_orders=1, finetune_steps=2, gate_steps=3)
    whole = run_prune(model, task, s)
    parts = {**run_prune(model, task, s, gates=False), "gates": gate_experiment(model, task, s)}
    assert list(whole) == list(parts) and list(whole)[-1] == "gates"
    assert json.dumps(whole) == json.dumps(parts)
    assert whole["gates"]["steps"] == 3 and len(whole["gates"]["values"][0]) == 12
    assert "gates" not in run_prune(
        model, task, PruneSettings(n_random=4, eval_size=32, curve_orders=1, finetune_steps=2, gate_steps=0)
    )


def test_one_model_uses_two_workers_with_the_same_numbers(tmp_path):
    """One checkpoint is still two tasks (its gates and the rest): --jobs 2 gives --jobs 1's report."""
    from mhattn.heads.jobs import prune_all

    kw = {"n_random": 4, "eval_size": 32, "curve_orders": 1, "finetune_steps": 2, "gate_steps": 3}
    one, _ = prune_all(["roles-headdropout"], kw, jobs=1)
    two, _ = prune_all(["roles-headdropout"], kw, jobs=2)
    assert list(one) == list(two) == ["roles-headdropout"]
    assert_close_tree(one["roles-headdropout"].details, two["roles-headdropout"].details)
    assert two["roles-headdropout"].details["gates"]["steps"] == 3


def test_a_failing_task_stops_every_worker_at_once(tmp_path):
    """A task that fails ends the run with its error at once: the other model's long gate training
    (10^5 steps, over an hour) is not waited for, and no worker is left running."""
    code = (
        "import multiprocessing, sys\n"
        "from mhattn.heads.jobs import prune_all\n"
        "kw = {'gate_steps': 10**5, 'n_random': 4, 'eval_size': 32, 'curve_orders': 1, 'finetune_steps': 2}\n"
        "try:\n"
        "    prune_all(['roles-plain', 'no-such-checkpoint.npz'], kw, jobs=2)\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err, 'children', len(multiprocessing.active_children()))\n"
        "    sys.exit(3)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the workers too, not only the main process
        proc.communicate()
        pytest.fail("the run went on after a task had failed")
    assert proc.returncode == 3, err[-2000:]
    assert "no-such-checkpoint" in out and out.rstrip().endswith("children 0"), out
    assert "leaked semaphore" not in err, err[-2000:]


def test_terminated_workers_leave_nothing_for_the_resource_tracker(tmp_path):
    """Workers terminated mid-task (an error or Ctrl-C in the main process), after their progress bars
    were made, leave no semaphore behind: no "leaked semaphore" warning at exit, nor after a normal run."""
    code = (
        "import sys, time\n"
        "from mhattn.heads.jobs import gates_one, worker_pool\n"
        "with worker_pool(2) as pool:  # a normal run: closed and joined\n"
        "    assert pool.apply(gates_one, ('roles-plain', {'gate_steps': 2, 'eval_size': 8}))['steps'] == 2\n"
        "try:\n"
        "    with worker_pool(2) as pool:\n"
        "        busy = [pool.apply_async(gates_one, ('roles-plain', {'gate_steps': 10**5})) for _ in range(2)]\n"
        "        time.sleep(5)  # both workers are training gates, each with its bar made\n"
        "        assert not any(t.ready() for t in busy)\n"
        "        raise RuntimeError('stop')  # leaving the block terminates both workers\n"
        "except RuntimeError:\n"
        "    sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "leaked" not in proc.stderr and "resource_tracker" not in proc.stderr, proc.stderr[-2000:]
