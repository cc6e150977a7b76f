"""``mhattn train --task {roles,text}``: train a 12-head model and write a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from mhattn.training.recipes import RECIPES, run_recipe


def add_parser(sub, name):
    p = sub.add_parser(name, help="train a model on the planted-roles task or on CPython's text")
    p.add_argument("--task", choices=["roles", "text"], default="roles")
    p.add_argument("--head-dropout", type=float, default=None, help="roles only: head dropout p (0.3 for roles-headdropout)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the recipe's)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="checkpoint path (default: <recipe>.npz in the current folder)")
    p.add_argument("--no-progress", action="store_true", help="no tqdm bar")


def main(args) -> int:
    name = "text" if args.task == "text" else ("roles-headdropout" if (args.head_dropout or 0) > 0 else "roles-plain")
    overrides = {k: v for k, v in (("steps", args.steps), ("batch_size", args.batch_size), ("lr", args.lr)) if v is not None}
    if args.task == "roles" and args.head_dropout is not None:
        overrides["head_dropout"] = args.head_dropout
    out = args.out or Path(RECIPES[name]["file"])
    _, meta = run_recipe(name, out, seed=args.seed, progress=not args.no_progress, **overrides)
    print(json.dumps(meta["training"], indent=1))
    print(f"checkpoint written to {out}")
    return 0
