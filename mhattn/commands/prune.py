"""``mhattn prune``: the course's question asked of a trained model, layer by layer, and answered in a box.

Options in, then :func:`mhattn.heads.sixes_run.run_sixes` (six of one layer's twelve heads removed at random, every
layer) and :func:`mhattn.heads.main_report.model_entry` (the reasons and the box); the report goes to ``--out``.
With no options it runs the shipped 4 x 12-head model (``text-deep12``); ``--task roles`` runs the two one-layer toys.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from dataclasses import replace
from pathlib import Path

from mhattn.commands import UsageError, int_in, non_negative_int, output_dir, positive_int, range_text
from mhattn.heads.box import QUESTION
from mhattn.heads.main_report import model_entry, report_json, report_markdown
from mhattn.heads.reasons import model_reasons
from mhattn.heads.sixes import SixesSettings
from mhattn.heads.sixes_run import run_sixes
from mhattn.training.checkpoint import SHIPPED, CheckpointError, load_checkpoint
from mhattn.training.tasks import task_from_meta

DEFAULTS = {
    "text-deep12": ["text-deep12"],
    "roles": ["roles-plain", "roles-headdropout"],
    "text": ["text"],
    "text-deep": ["text-deep"],
}


def _checkpoint(text: str) -> str:
    """argparse type: a shipped checkpoint name or an existing file."""
    if text not in SHIPPED and not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file, and not a shipped name ({', '.join(SHIPPED)}): {text!r}")
    return text


def add_parser(sub, name):
    p = sub.add_parser(name, help="remove six of one layer's twelve heads at random, in every layer; print the answer box")
    p.add_argument("--task", choices=list(DEFAULTS), default="text-deep12",
                   help="which shipped checkpoints when no --checkpoint is given (text-deep12: 4 layers x 12 heads; "
                        "roles: the two one-layer planted-roles toys; text: one layer x 12 heads on text; text-deep: "
                        "4 layers x 8 heads)")  # fmt: skip
    p.add_argument("--checkpoint", type=_checkpoint, action="append", default=None,
                   help="a checkpoint file or shipped name (repeatable); default: the --task's shipped ones")  # fmt: skip
    p.add_argument("--remove", type=positive_int, default=6, help="heads of one layer removed at once")
    p.add_argument("--n-random", type=int_in(2, 100_000), default=200,
                   help="random subsets per layer: in complement pairs when --remove is half the heads (an odd number "
                        "is rounded down to whole pairs); all of them when it covers them")  # fmt: skip
    p.add_argument("--eval-size", type=int_in(1, 100_000), default=None,
                   help="evaluation sequences; default 64 text windows (4,096 predictions), 512 roles sequences")  # fmt: skip
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random subsets (one stream per layer)")
    p.add_argument("--out", type=output_dir, default=Path("prune_report"), help="folder for report.json, report.md, PNGs")
    p.add_argument("--no-plots", action="store_true", help="write report.json and report.md only, no PNGs")
    p.add_argument("--jobs", type=int_in(1, 64), default=2, help="layers measured at once (same numbers for any value)")


def check(args) -> list:
    """The checkpoints to measure, each loaded once to check ``--remove`` against its heads, before any work.

    Raises:
        UsageError: a checkpoint does not load or has no usable task, two share a file name (the report is keyed
            by it), or ``--remove`` exceeds a layer's heads.
    """
    names, stems = args.checkpoint or DEFAULTS[args.task], {}
    for name in names:
        try:
            model, meta = load_checkpoint(name)
            task_from_meta(meta["task"])
        except CheckpointError as err:
            raise UsageError(f"argument --checkpoint: {err}") from None
        except (KeyError, TypeError, ValueError) as err:
            raise UsageError(f"argument --checkpoint: {name} has no usable task description: {err}") from None
        stem = Path(str(name)).stem
        if stem in stems:
            raise UsageError(f"argument --checkpoint: {stems[stem]} and {name} have the same name {stem!r}; rename one")
        stems[stem] = name
        if args.remove > model.cfg.num_heads:
            raise UsageError(f"argument --remove: must be an integer {range_text(1, model.cfg.num_heads)} ({name} has "
                             f"{model.cfg.num_heads} heads per layer), got {args.remove}")  # fmt: skip
    return names


def _figures(out: Path, report: dict) -> None:
    """One PNG per model (:func:`mhattn.plots.pruning.sixes_figure`), or a note when matplotlib is missing."""
    if importlib.util.find_spec("matplotlib") is None:
        print("\nmatplotlib is not installed: no plots (pip install matplotlib; --no-plots hides this note)")
        return
    from mhattn.plots.png import png_bytes
    from mhattn.plots.pruning import sixes_figure

    for stem, entry in report["models"].items():
        fig = sixes_figure(stem, entry["measurement"], model_reasons(entry["measurement"]))
        (out / f"sixes_{stem}.png").write_bytes(png_bytes(fig, dpi=90))


def main(args) -> int:
    names = check(args)
    settings = replace(SixesSettings(), n_remove=args.remove, n_subsets=args.n_random, eval_size=args.eval_size,
                       seed=args.seed)  # fmt: skip
    t0 = time.perf_counter()
    measured = run_sixes(names, settings, jobs=args.jobs)
    models = {stem: model_entry(stem, m) for stem, m in measured.items()}
    report = report_json(models, round(time.perf_counter() - t0, 1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    (args.out / "report.md").write_text(report_markdown(report), encoding="utf-8")
    print(f"Question: {QUESTION}\n")
    for entry in models.values():
        print(entry["box"] + "\n")
    if not args.no_plots:
        _figures(args.out, report)
    figures = "" if args.no_plots else " and a figure per model (sixes_<model>.png)"
    print(f"report written to {args.out / 'report.json'}, {args.out / 'report.md'}{figures} in {args.out} "
          f"({report['seconds']} s)")  # fmt: skip
    return 0
