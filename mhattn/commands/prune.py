"""``mhattn prune``: remove heads from trained models and answer "why might the loss grow less than expected?"."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import time
from pathlib import Path

from mhattn.commands import UsageError, float_in, int_in, non_negative_int, output_dir, positive_int, range_text
from mhattn.commands.prune_jobs import available_cpus, prune_all
from mhattn.heads.report import PruneReport
from mhattn.training.checkpoint import SHIPPED, CheckpointError, load_checkpoint
from mhattn.training.tasks import task_from_meta

DEFAULTS = {"roles": ["roles-plain", "roles-headdropout"], "text": ["text"], "text-deep": ["text-deep"]}


def _checkpoint(text: str) -> str:
    """argparse type: a shipped checkpoint name or an existing file."""
    if text not in SHIPPED and not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file, and not a shipped name ({', '.join(SHIPPED)}): {text!r}")
    return text


def add_parser(sub, name):
    p = sub.add_parser(name, help="remove heads at random / by importance from trained models; write report.json and plots")
    p.add_argument("--task", choices=list(DEFAULTS), default="roles",
                   help="which shipped checkpoints when no --checkpoint is given (roles: both side by side; "
                        "text-deep: 4 layers x 8 heads, notebook 10)")  # fmt: skip
    p.add_argument("--checkpoint", type=_checkpoint, action="append", default=None,
                   help="a checkpoint file or shipped name (repeatable); default: the --task's shipped ones")  # fmt: skip
    p.add_argument("--remove", type=positive_int, default=6,
                   help="heads removed at once, 1 to the model's number of heads (L*h)")  # fmt: skip
    p.add_argument("--n-random", type=int_in(1, 100_000), default=100, help="random subsets of --remove heads")
    p.add_argument("--eval-size", type=int_in(1, 100_000), default=None,
                   help="evaluation sequences; default: 512 for roles, 256 for text and text-deep")  # fmt: skip
    p.add_argument("--curve-orders", type=int_in(1, 1000), default=3, help="random orders averaged in the pruning curve")
    p.add_argument("--finetune-steps", type=int_in(0, 100_000), default=100, help="fine-tuning steps after pruning")
    p.add_argument("--gate-steps", type=int_in(0, 100_000), default=200, help="hard-concrete gate steps (0 skips)")
    p.add_argument("--l0-lambda", type=float_in(0.0, math.inf), default=0.05, help="L0 penalty weight for the gates")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed for subsets, orders, fine-tuning and gates")
    p.add_argument("--out", type=output_dir, default=Path("prune_report"), help="folder for report.json and PNGs")
    p.add_argument("--no-plots", action="store_true", help="write report.json only, no PNGs")
    p.add_argument("--jobs", type=int_in(1, 64), default=min(2, available_cpus()),
                   help="worker processes (1: none); each model is two tasks (same numbers for any value)")  # fmt: skip


def check(args):
    """Load every checkpoint to prune and check ``--remove`` against its heads, before any work.

    Raises:
        UsageError: a checkpoint does not load or has no usable task, two checkpoints share a file
            name (the report is keyed by it), or ``--remove`` exceeds a model's heads.
    """
    stems = {}
    for name in args.checkpoint or DEFAULTS[args.task]:
        try:
            model, meta = load_checkpoint(name)
            task_from_meta(meta["task"])
        except CheckpointError as err:
            raise UsageError(f"argument --checkpoint: {err}") from None
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"argument --checkpoint: {name} has no usable task description: {err}") from None
        stem = Path(str(name)).stem
        if stem in stems:  # the report, the table and the file names are keyed by stem
            raise UsageError(f"argument --checkpoint: {stems[stem]} and {name} have the same name {stem!r}; rename one")
        stems[stem] = name
        heads = model.cfg.num_layers * model.cfg.num_heads
        if args.remove > heads:
            raise UsageError(f"argument --remove: must be an integer {range_text(1, heads)} ({name} has {heads} heads), "
                             f"got {args.remove}")  # fmt: skip


FORMATS = {  # how a kind of value is printed: levels without a sign, changes with one, as docs/prune_report.md's table
    "loss": "{:.4f}",  # a loss in nats
    "dloss": "{:+.3f}",  # a change of loss (positive = worse)
    "acc": "{:.1%}",  # an accuracy, a share or a fraction, as a percentage
    "dacc": "{:+.1f} points",  # a change of accuracy, in percentage points (the value is a fraction)
    "ratio": "{:.2f}",  # a correlation or a similarity
}


def _fmt(v, kind):
    """One table cell: ``v`` printed as its ``kind`` (a key of FORMATS, or "count") says."""
    if v is None:
        return "n/a"
    if isinstance(v, tuple):
        return " / ".join(str(x) for x in v)
    if kind == "dacc":
        return FORMATS[kind].format(100 * v)
    return FORMATS[kind].format(v) if kind in FORMATS else str(v)


ROWS = [  # (label, dotted field of ModelReport, kind of value: see FORMATS)
    ("baseline loss (nats)", "baseline_loss", "loss"),
    ("baseline accuracy", "baseline_acc", "acc"),
    ("max single-ablation dloss", "q1_unequal_contribution.single_ablation_dloss_max", "dloss"),
    ("median single-ablation dloss", "q1_unequal_contribution.single_ablation_dloss_median", "dloss"),
    ("top-2 share of ablation loss", "q1_unequal_contribution.top2_share_of_single_ablation_loss", "acc"),
    ("spearman(importance, ablation)", "q1_unequal_contribution.spearman_importance_vs_zero_ablation", "ratio"),
    ("remove least important: dloss", "q1_unequal_contribution.least_vs_most_important_dloss.0", "dloss"),
    ("remove most important: dloss", "q1_unequal_contribution.least_vs_most_important_dloss.1", "dloss"),
    ("naive expectation: dloss", "expectation.naive_expected_dloss", "dloss"),
    ("additive expectation: dloss", "expectation.additive_expected_dloss", "dloss"),
    ("random removal: mean dloss", "expectation.observed_dloss_mean", "dloss"),
    ("random removal: median dloss", "q2_compensation.random_dloss_median", "dloss"),
    ("random removal: 90th pct dloss", "expectation.observed_dloss_p90", "dloss"),
    ("random removal: worst dloss", "expectation.observed_dloss_worst", "dloss"),
    ("random removal: median dacc", "q2_compensation.random_dacc_median", "dacc"),
    ("weakest singles: sum of singles", "q2_compensation.lowest_single_sum_of_single_dloss", "dloss"),
    ("weakest singles: removed together", "q2_compensation.lowest_single_joint_dloss", "dloss"),
    ("one-at-a-time pruning: dloss", "q2_compensation.michel_iterative_joint_dloss", "dloss"),
    ("max output similarity", "q2_compensation.max_output_similarity", "ratio"),
    ("fine-tune recovered fraction", "q2_compensation.finetune_recovered_fraction", "acc"),
    ("random subsets improving loss", "q3_removal_improved_loss.n_random_subsets_improved", "count"),
    ("single ablations improving loss", "q3_removal_improved_loss.n_single_ablations_improved", "count"),
    ("gates open after L0 training", "gates_open", "count"),
    ("heads at -1 / +1 / rare (>= 90%)", "role_counts", "count"),
]


def field_value(report, path):
    """``report``'s value at a dotted field path (a numeric part indexes a list)."""
    v = report
    for part in path.split("."):
        v = v[int(part)] if part.isdigit() else getattr(v, part)
    return v


def table(models):
    """Side-by-side text table of the headline numbers (``models``: name -> ModelReport)."""
    names = list(models)
    lines = [f"{'':34s}" + "".join(f"{n:>20s}" for n in names)]
    for label, path, kind in ROWS:
        lines.append(f"{label:34s}" + "".join(f"{_fmt(field_value(models[n], path), kind):>20s}" for n in names))
    return "\n".join(lines)


def run(names, settings_kw, jobs=1):
    """Run the experiment for each checkpoint in ``jobs`` worker processes (see :mod:`mhattn.commands.prune_jobs`).

    Returns:
        ``{stem: ModelReport}`` (each checkpoint's file name without suffix) in ``names`` order.
    """
    return prune_all(names, settings_kw, jobs)[0]


def main(args) -> int:
    check(args)
    names = args.checkpoint or DEFAULTS[args.task]
    kw = {"n_remove": args.remove, "n_random": args.n_random, "curve_orders": args.curve_orders,
          "finetune_steps": args.finetune_steps, "gate_steps": args.gate_steps, "l0_lambda": args.l0_lambda,
          "seed": args.seed}  # fmt: skip
    if args.eval_size:
        kw["eval_size"] = args.eval_size
    plots = not args.no_plots and importlib.util.find_spec("matplotlib") is not None
    t0 = time.perf_counter()
    models, pngs = prune_all(names, kw, jobs=args.jobs, figures=plots)  # the workers draw every figure
    args.out.mkdir(parents=True, exist_ok=True)
    report = PruneReport(models, seconds=round(time.perf_counter() - t0, 1))
    (args.out / "report.json").write_text(json.dumps(report.to_json(), indent=1))
    print(f"Question: {report.question}\n")
    print(table(models))
    for name, m in models.items():
        print(f"\n[{name}] {m.summary}\n[{name}] conclusion: {m.conclusion}")
    if not args.no_plots and not plots:
        print("\nmatplotlib is not installed: no plots (pip install 'mhattn[course]'; --no-plots hides this note)")
    elif plots:
        for file_name, data in pngs.items():  # drawn by the workers (mhattn.commands.prune_jobs)
            (args.out / file_name).write_bytes(data)
    print(f"\nreport written to {args.out / 'report.json'} ({report.seconds} s)")
    return 0
