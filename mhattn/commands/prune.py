"""``mhattn prune``: remove heads from trained models and answer "why might the loss grow less than expected?".

Options in, then :func:`mhattn.heads.jobs.prune_all` (the experiment and its figures) and
:func:`mhattn.heads.table.table` (the printed table); the report goes to ``--out``."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import time
from pathlib import Path

from mhattn.commands import UsageError, float_in, int_in, non_negative_int, output_dir, positive_int, range_text
from mhattn.heads.answer_box import model_box
from mhattn.heads.jobs import available_cpus, prune_all
from mhattn.heads.report import PruneReport, report_markdown
from mhattn.heads.table import table
from mhattn.training.checkpoint import SHIPPED, CheckpointError, load_checkpoint
from mhattn.training.tasks import task_from_meta

DEFAULTS = {
    "roles": ["roles-plain", "roles-headdropout"],
    "text": ["text"],
    "text-deep": ["text-deep"],
    "text-deep12": ["text-deep12"],
}
# the command's defaults, and where a task differs: text-deep12 asks the course's question in every layer (notebook 07)
OPTION_DEFAULTS = {"n_random": 100, "gate_steps": 200, "layer": None}
TASK_DEFAULTS = {"text-deep12": {"n_random": 200, "gate_steps": 0, "layer": "each"}}


def _layer(text: str):
    """argparse type: a layer number, ``each`` (every layer in turn) or ``none`` (from any layer)."""
    if text in ("each", "none"):
        return text
    try:
        return non_negative_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a layer number (0, 1, ...), 'each' or 'none', got {text!r}") from None


def _checkpoint(text: str) -> str:
    """argparse type: a shipped checkpoint name or an existing file."""
    if text not in SHIPPED and not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file, and not a shipped name ({', '.join(SHIPPED)}): {text!r}")
    return text


def add_parser(sub, name):
    p = sub.add_parser(name, help="remove heads at random / by importance from trained models; write report.json and plots")
    p.add_argument("--task", choices=list(DEFAULTS), default="roles",
                   help="which shipped checkpoints when no --checkpoint is given (roles: both side by side; "
                        "text-deep: 4 layers x 8 heads, notebook 10; text-deep12: 4 layers x 12 heads, notebook 07)")  # fmt: skip
    p.add_argument("--checkpoint", type=_checkpoint, action="append", default=None,
                   help="a checkpoint file or shipped name (repeatable); default: the --task's shipped ones")  # fmt: skip
    p.add_argument("--remove", type=positive_int, default=6,
                   help="heads removed at once, 1 to the model's number of heads (L*h; with --layer, h)")  # fmt: skip
    p.add_argument("--layer", type=_layer, default=None,
                   help="remove heads of this layer only, of each layer in turn ('each') or of any layer ('none'); "
                        "default: none (text-deep12: each)")  # fmt: skip
    p.add_argument("--n-random", type=int_in(1, 100_000), default=None,
                   help="random subsets of --remove heads; default 100 (text-deep12: 200)")  # fmt: skip
    p.add_argument("--eval-size", type=int_in(1, 100_000), default=None,
                   help="evaluation sequences; default: 512 for roles, 256 for text and text-deep")  # fmt: skip
    p.add_argument("--curve-orders", type=int_in(1, 1000), default=3, help="random orders averaged in the pruning curve")
    p.add_argument("--finetune-steps", type=int_in(0, 100_000), default=100, help="fine-tuning steps after pruning")
    p.add_argument("--gate-steps", type=int_in(0, 100_000), default=None,
                   help="hard-concrete gate steps (0 skips); default 200 (text-deep12: 0)")  # fmt: skip
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
        layer = options(args)["layer"]
        if isinstance(layer, int) and layer >= model.cfg.num_layers:
            raise UsageError(f"argument --layer: must be 'each' or an integer {range_text(0, model.cfg.num_layers - 1)} "
                             f"({name} has {model.cfg.num_layers} layers), got {layer}")  # fmt: skip
        heads = heads if layer is None else model.cfg.num_heads
        if args.remove > heads:
            raise UsageError(f"argument --remove: must be an integer {range_text(1, heads)} ({name} has {heads} heads), "
                             f"got {args.remove}")  # fmt: skip


def options(args) -> dict:
    """``--n-random``, ``--gate-steps`` and ``--layer`` as given, else the task's defaults (:data:`TASK_DEFAULTS`)."""
    given = {"n_random": args.n_random, "gate_steps": args.gate_steps, "layer": args.layer}
    task = TASK_DEFAULTS.get(args.task, {}) if not args.checkpoint else {}
    chosen = {k: v if v is not None else task.get(k, OPTION_DEFAULTS[k]) for k, v in given.items()}
    return {**chosen, "layer": None if chosen["layer"] == "none" else chosen["layer"]}


def main(args) -> int:
    check(args)
    names = args.checkpoint or DEFAULTS[args.task]
    kw = {"n_remove": args.remove, "curve_orders": args.curve_orders, "finetune_steps": args.finetune_steps,
          "l0_lambda": args.l0_lambda, "seed": args.seed, **options(args)}  # fmt: skip
    if args.eval_size:
        kw["eval_size"] = args.eval_size
    plots = not args.no_plots and importlib.util.find_spec("matplotlib") is not None
    t0 = time.perf_counter()
    models, pngs = prune_all(names, kw, jobs=args.jobs, figures=plots)  # the workers draw every figure
    args.out.mkdir(parents=True, exist_ok=True)
    report = PruneReport(models, seconds=round(time.perf_counter() - t0, 1))
    (args.out / "report.json").write_text(json.dumps(report.to_json(), indent=1))
    print(f"Question: {report.question}\n")
    for name, m in models.items():
        print(model_box(name, m) + "\n")
    print(table(models))
    print(f"\nEach model's conclusion, its numbers and what they mean: {args.out / 'report.md'}")
    (args.out / "report.md").write_text(report_markdown(report), encoding="utf-8")
    if not args.no_plots and not plots:
        print("\nmatplotlib is not installed: no plots (pip install 'mhattn[course]'; --no-plots hides this note)")
    elif plots:
        for file_name, data in pngs.items():  # drawn by the workers (mhattn.heads.jobs)
            (args.out / file_name).write_bytes(data)
    print(f"\nreport written to {args.out / 'report.json'} ({report.seconds} s)")
    return 0
