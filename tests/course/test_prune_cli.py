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

SMALL = ["--n-random", "12", "--eval-size", "64", "--curve-orders", "1", "--finetune-steps", "5", "--gate-steps", "5"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("prune")
    assert cli.main(["prune", *SMALL, "--out", str(out)]) == 0
    return out, json.loads((out / "report.json").read_text())


@pytest.mark.slow  # over 10 s on 2 loaded cores
def test_prune_writes_the_report_keys_for_both_roles_models(report):
    out, rep = report
    assert set(rep["models"]) == {"roles-plain", "roles-headdropout"}
    assert rep["report_version"] == 4 and "six are removed at random" in rep["question"]
    for m in rep["models"].values():
        assert {"q1_unequal_contribution", "q2_compensation", "q3_removal_improved_loss", "summary", "details"} <= set(m)
        assert {"expectation", "verdicts", "conclusion"} <= set(m)
        e = m["expectation"]
        assert e["additive_expected_dloss"] == pytest.approx(e["sum_single_dloss"] * 6 / 12)
        assert e["observed_dloss_median"] == m["q2_compensation"]["random_dloss_median"]
        assert m["q3_removal_improved_loss"]["n_random"] == 12
        assert len(m["details"]["random"]["subsets"][0]) == 6 and len(m["details"]["importance"][0]) == 12
        assert m["details"]["curve"]["fraction_removed"][0] == 0.0 and m["details"]["curve"]["fraction_removed"][-1] == 1.0
    for png in (
        "importance.png",
        "random_removal_hist.png",
        "pruning_curves.png",
        "similarity.png",
        "attention_roles-plain_layer0.png",
    ):
        assert (out / png).stat().st_size > 5000


def test_prune_report_shows_head_dropout_made_heads_redundant(report):
    """The plain model has a head it cannot lose; the head-dropout model has none (see docs/prune_report.md)."""
    _, rep = report
    plain, hd = rep["models"]["roles-plain"], rep["models"]["roles-headdropout"]
    assert plain["q1_unequal_contribution"]["single_ablation_dloss_max"] > 0.5
    assert hd["q1_unequal_contribution"]["single_ablation_dloss_max"] < 0.1
    assert plain["q2_compensation"]["random_dloss_median"] > 10 * hd["q2_compensation"]["random_dloss_median"]
    # in the plain model, removing the most important heads hurts far more than removing the least important
    least, most = plain["q1_unequal_contribution"]["least_vs_most_important_dloss"]
    assert most > 3 * least


def test_prune_table_is_printed(capsys, tmp_path):
    assert (
        cli.main(["prune", "--checkpoint", "roles-plain", *SMALL, "--gate-steps", "0", "--no-plots", "--out", str(tmp_path)]) == 0
    )
    text = capsys.readouterr().out
    assert "random removal: median dloss" in text and "roles-plain: 6 of 12 heads removed at random" in text
    assert text.startswith("Question: A layer has twelve heads") and "report.md" in text
    box = text.split("\n\n")[1]  # the answer box comes first, at most 120 words, loss and accuracy
    assert box.startswith("roles-plain: 6 of 12") and len(box.split()) <= 120 and "accuracy" in box
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert box in md and "Answer:" in md  # the details stay in report.md
    assert "additive expectation: dloss" in text and "naive expectation: dloss" in text
    assert not (tmp_path / "importance.png").exists()


def test_train_cli_writes_a_loadable_checkpoint(tmp_path, capsys):
    path = tmp_path / "hd.npz"
    args = ["train", "--task", "roles", "--head-dropout", "0.3", "--steps", "20", "--batch-size", "16", "--no-progress"]
    assert cli.main([*args, "--out", str(path)]) == 0
    model, meta = load_checkpoint(path)
    assert meta["training"]["head_dropout"] == 0.3 and meta["training"]["steps"] == 20
    assert model.cfg.num_heads == 12 and "checkpoint written" in capsys.readouterr().out


@pytest.mark.slow  # over 10 s on 2 loaded cores
def test_one_job_draws_the_same_figures_and_numbers_as_two(report, tmp_path):
    """--jobs 1 runs and draws everything in this process; --jobs 2 splits the tasks over two workers."""
    out, rep = report
    assert cli.main(["prune", *SMALL, "--jobs", "1", "--out", str(tmp_path)]) == 0
    one = json.loads((tmp_path / "report.json").read_text())
    assert {p.name for p in tmp_path.glob("*.png")} == {p.name for p in out.glob("*.png")} != set()
    assert_close_tree(one["models"], rep["models"])  # two workers' BLAS threads may sum in another order


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


@pytest.mark.slow  # over 10 s on 2 loaded cores
def test_the_report_figures_do_not_read_the_gates(report):
    """``mhattn prune`` draws the report's figures before the gates are trained: they must not depend on them."""
    from mhattn.plots.pruning import figure_pngs

    details = {
        name: {**m["details"], "additive": m["expectation"]["additive_expected_dloss"],
               "naive": m["expectation"]["naive_expected_dloss"]}
        for name, m in report[1]["models"].items()
    }  # fmt: skip
    assert all("gates" in d for d in details.values())
    without = {name: {k: v for k, v in d.items() if k != "gates"} for name, d in details.items()}
    assert figure_pngs(details) == figure_pngs(without)
    changed = {
        name: {**d, "random": {**d["random"], "dloss": [x + 1.0 for x in d["random"]["dloss"]]}} for name, d in without.items()
    }
    assert figure_pngs(changed)["random_removal_hist.png"] != figure_pngs(without)["random_removal_hist.png"]


def test_prune_option_defaults_are_the_prune_settings_defaults():
    """The command and the library (and so notebook 07, which asserts PruneSettings) run the same experiment."""
    from mhattn.commands.prune import options
    from mhattn.heads.prune import PruneSettings

    args = cli.build_parser().parse_args(["prune"])
    s = PruneSettings()
    fields = ["curve_orders", "finetune_steps", "l0_lambda", "seed"]
    assert {f: getattr(args, f) for f in fields} == {f: getattr(s, f) for f in fields}
    assert options(args) == {"n_random": s.n_random, "gate_steps": s.gate_steps, "layer": s.layer}
    deep = options(cli.build_parser().parse_args(["prune", "--task", "text-deep12"]))
    assert deep == {"n_random": 200, "gate_steps": 0, "layer": "each"}  # the course's question in every layer
    given = options(cli.build_parser().parse_args(["prune", "--task", "text-deep12", "--layer", "2", "--n-random", "7"]))
    assert given == {"n_random": 7, "gate_steps": 0, "layer": 2}
    assert args.remove == s.n_remove
    assert args.eval_size is None  # the task decides: 512 roles sequences = PruneSettings.eval_size
    assert s.eval_size == 512


def test_prune_command_takes_the_deep_task():
    """``--task text-deep`` loads the deep model (4 layers x 8 heads) and bounds ``--remove`` by its 32 heads."""
    import argparse

    from mhattn.commands import UsageError
    from mhattn.commands.prune import DEFAULTS, add_parser, check

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), "prune")
    args = parser.parse_args(["prune", "--task", "text-deep", "--remove", "32"])
    check(args)  # loads the shipped checkpoint and its task
    assert DEFAULTS["text-deep"] == ["text-deep"] and DEFAULTS["roles"] == ["roles-plain", "roles-headdropout"]
    with pytest.raises(UsageError, match="has 32 heads"):
        check(parser.parse_args(["prune", "--task", "text-deep", "--remove", "33"]))


def test_prune_command_asks_the_question_of_one_layer_of_the_twelve_head_deep_model():
    """``--task text-deep12`` removes from one layer at a time: ``--remove`` is bounded by a layer's 12 heads and
    ``--layer`` by its 4 layers; a bad ``--layer`` names the option and what it takes."""
    import argparse

    from mhattn.commands import UsageError
    from mhattn.commands.prune import add_parser, check

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), "prune")
    check(parser.parse_args(["prune", "--task", "text-deep12", "--remove", "12"]))
    with pytest.raises(UsageError, match="has 12 heads"):
        check(parser.parse_args(["prune", "--task", "text-deep12", "--remove", "13"]))
    with pytest.raises(UsageError, match=r"argument --layer: .*has 4 layers\), got 4"):
        check(parser.parse_args(["prune", "--task", "text-deep12", "--layer", "4"]))
    check(parser.parse_args(["prune", "--task", "text-deep12", "--layer", "none", "--remove", "48"]))  # any layer


@pytest.mark.parametrize("bad", ["-1", "two", "1.5"])
def test_a_bad_layer_option_says_what_it_takes(bad, capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(["prune", "--layer", bad])
    assert err.value.code == 2 and "must be a layer number (0, 1, ...), 'each' or 'none'" in capsys.readouterr().err
