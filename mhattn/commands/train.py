"""``mhattn train --task {roles,text}``: train a 12-head model and write a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from mhattn.commands import UsageError, checkpoint_out, float_in, int_in, non_negative_float, non_negative_int, positive_int
from mhattn.training.recipes import RECIPES, run_recipe


def add_parser(sub, name):
    p = sub.add_parser(name, help="train a model on the planted-roles task or on CPython's text")
    p.add_argument("--task", choices=["roles", "text"], default="roles", help="what to learn")
    p.add_argument("--head-dropout", type=float_in(0.0, 1.0, high_open=True), default=None,
                   help="head dropout p in [0, 1); with --task roles, p > 0 trains the roles-headdropout recipe "
                        "(which uses 0.3); default: no head dropout")  # fmt: skip
    p.add_argument("--steps", type=positive_int, default=None, help="training steps; default: the recipe's")
    p.add_argument("--batch-size", type=int_in(1, 65536), default=None, help="sequences per step; default: the recipe's")
    p.add_argument("--lr", type=non_negative_float, default=None, help="peak learning rate; default: the recipe's")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed for the weights and the batches")
    p.add_argument("--out", type=checkpoint_out, default=None,
                   help="checkpoint file to write; default: <recipe>.npz in the current folder")  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no tqdm bar")


def recipe_name(args) -> str:
    """The recipe behind the options: text, roles-headdropout (roles with head dropout > 0) or roles-plain."""
    if args.task == "text":
        return "text"
    return "roles-headdropout" if (args.head_dropout or 0) > 0 else "roles-plain"


def main(args) -> int:
    name = recipe_name(args)
    overrides = {k: v for k, v in (("steps", args.steps), ("batch_size", args.batch_size), ("lr", args.lr),
                                   ("head_dropout", args.head_dropout)) if v is not None}  # fmt: skip
    out = args.out or Path(RECIPES[name]["file"])
    if out.is_dir():
        raise UsageError(f"argument --out: {out} is a folder; give a file name such as {out / 'model.npz'}")
    _, meta = run_recipe(name, out, seed=args.seed, progress=not args.no_progress, **overrides)
    print(json.dumps(meta["training"], indent=1))
    print(f"checkpoint written to {out}")
    return 0
