"""Michel et al. 2019 on the deep text model: importance, single-head ablation and pruning curves, per training seed.

For each seed of the ``text-deep`` recipe (4 layers x 8 heads; seed 0 is the shipped ``mhattn/data/text-deep.npz``,
the others are trained into ``--checkpoints`` when missing, about 5-10 minutes each on 2 cores) this measures, on
the validation windows ``mhattn prune --task text-deep`` uses (``eval_set(256)``):

* the bigram baseline (counted on the training text, add-one) on the same windows;
* importance ``I_h = E_x |∂L(x)/∂ξ_h|``, raw and normalised per layer by its ℓ2 norm (Michel et al. 2019, §4.1);
* every single-head ablation (ξ_h = 0) and Spearman's rank correlation of importance with it;
* the global pruning curve at 0, 10, ..., 90% of the 32 heads: by importance, re-scored after every 10% as
  Michel et al. (§4.2) do, and along ``--orders`` random orders (median and 10th/90th percentile);
* how many heads of each layer survive when half are pruned by importance;
* Voita et al. 2019's hard-concrete gates, trained as ``mhattn prune`` trains them (``--gates-only`` adds them to
  the seeds already in the file);
* notebook 07's test-yourself experiment with half the heads removed (``--halves`` adds it to the seeds already in
  the file): the report ``mhattn prune --task text-deep --remove 16 --gate-steps 0`` makes for the seed's model,
  under ``half_removal`` (random halves, with the survivors free and frozen, and the conclusion).

Writes ``mhattn/data/text-deep-pruning.json`` (notebook 10 reads it; ``tests/lib/test_deep_model.py`` re-computes a
slice of seed 0)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/deep_pruning.py --seeds 0 1 2
    python benchmarks/deep_pruning.py --halves --seeds 0 1 2   # only notebook 07's part, into the file
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from mhattn.heads.importance import ablation_deltas, normalise_importance, spearman
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import PruneSettings, _mask, gate_experiment, michel_iterative
from mhattn.training.checkpoint import DATA_DIR, load_checkpoint, shipped_path
from mhattn.training.recipes import RECIPES, run_recipe
from mhattn.training.tasks import task_from_meta
from mhattn.training.textdata import text_sha256

OUT = DATA_DIR / "text-deep-pruning.json"
EVAL_SIZE = 256  # windows of 64 characters: mhattn prune's default for text tasks
FRACTIONS = [i / 10 for i in range(10)]  # 0 ... 90% of the heads


def checkpoint_for(seed, folder, recipe="text-deep"):
    """The seed's checkpoint of ``recipe``: the shipped one for seed 0, else ``folder/seed<N>.npz`` (trained when
    missing). ``benchmarks/sixes_data.py`` uses it for ``text-deep12``."""
    if seed == 0:
        return shipped_path(recipe)
    path = Path(folder) / f"seed{seed}.npz"
    if not path.is_file():
        run_recipe(recipe, path, seed=seed, progress=False)
    return path


def curves(model, ev, orders, rng):
    """The pruning curves: by importance (re-scored at each point) and along ``orders`` random orders."""
    L, h = model.cfg.num_layers, model.cfg.num_heads
    counts = [round(f * L * h) for f in FRACTIONS]
    removed, by_imp, order_at = [], [], {}
    for k in counts:
        removed = michel_iterative(model, None, k, step=max(1, k - len(removed)), start=removed, evaluator=ev)
        by_imp.append(ev.evaluate(_mask(L, h, removed))["loss"])
        order_at[k] = list(removed)
    perms = [rng.permutation(L * h) for _ in range(orders)]
    rand = np.array([[ev.evaluate(_mask(L, h, p[:k]))["loss"] for k in counts] for p in perms])  # (orders, points)
    half = order_at[counts[5]]
    return {
        "heads_removed": counts,
        "fraction_removed": FRACTIONS,
        "importance_loss": by_imp,
        "importance_order": order_at[counts[-1]],
        "random_loss_median": np.median(rand, axis=0).tolist(),
        "random_loss_p10": np.percentile(rand, 10, axis=0).tolist(),
        "random_loss_p90": np.percentile(rand, 90, axis=0).tolist(),
        "random_loss_all": rand.round(6).tolist(),
        "survivors_per_layer_at_50": (_mask(L, h, half).sum(axis=1)).astype(int).tolist(),
    }


def measure(seed, folder, orders):
    path = checkpoint_for(seed, folder)
    model, meta = load_checkpoint(path)
    task = task_from_meta(meta["task"])
    ids, targets = task.eval_set(EVAL_SIZE)
    t0 = time.perf_counter()
    ev = HeadMaskEvaluator(model, ids, targets)
    base = ev.evaluate()
    raw = ev.importance_grads()
    imp = normalise_importance(raw)
    zero_dl, _ = ablation_deltas(model, ids, targets, mode="zero", evaluator=ev)
    out = {
        "seed": seed,
        "training_seconds": meta["training"]["seconds"],
        "val_loss_recipe": meta["training"]["val"]["loss"],
        "loss": base["loss"],
        "acc": base["acc"],
        "bigram_loss": task.bigram_loss(ids, targets[0]),
        "importance_raw": raw.tolist(),
        "importance": imp.tolist(),
        "ablation_zero_dloss": zero_dl.tolist(),
        "spearman_importance_vs_ablation": spearman(imp, zero_dl),
        "spearman_raw_importance_vs_ablation": spearman(raw, zero_dl),
        "curve": curves(model, ev, orders, np.random.default_rng(seed)),
    }
    out["measure_seconds"] = round(time.perf_counter() - t0, 1)
    return out


def cross_eval():
    """The 1-layer ``text`` model and seed 0 of ``text-deep``, each on the other's validation windows and its own
    (characters mapped between the two vocabularies; ``$`` and backquote, absent from ``text``'s, become its last id).
    Neither is clean: each model trained on some of the other's validation text."""
    from mhattn.training.loop import evaluate

    one, meta1 = load_checkpoint("text")
    deep, meta_d = load_checkpoint(shipped_path("text-deep"))
    t1, td = task_from_meta(meta1["task"]), task_from_meta(meta_d["task"])
    to1 = np.array([t1.charset.index(c) if c in t1.charset else len(t1.charset) - 1 for c in td.charset])
    to_d = np.array([td.charset.index(c) if c in td.charset else td.charset.index("?") for c in t1.charset])
    ids, (tg,) = td.eval_set(EVAL_SIZE)
    ids1, (tg1,) = t1.eval_set()
    on_deep = {"text-deep": evaluate(deep, ids, (tg,))["loss"], "text": evaluate(one, to1[ids], (to1[tg],))["loss"]}
    on_text = {"text-deep": evaluate(deep, to_d[ids1], (to_d[tg1],))["loss"], "text": evaluate(one, ids1, (tg1,))["loss"]}
    return {"deep_val": on_deep, "text_val": on_text}


def gates(seed, folder):
    """Voita et al.'s hard-concrete gates on the seed's model, exactly as ``mhattn prune`` trains them (its
    defaults: 200 steps, λ = 0.05, gate seed 0): ``{"values": (L, h) test-time gates, "open": count}``."""
    model, meta = load_checkpoint(checkpoint_for(seed, folder))
    g = gate_experiment(model, task_from_meta(meta["task"]), PruneSettings())
    return {"values": g["values"], "open": g["open"], "steps": g["steps"], "lambda": g["lambda"]}


def half_removal(seed, folder):
    """``mhattn prune --task text-deep --remove 16 --gate-steps 0`` on the seed's model: its report as JSON."""
    from mhattn.heads.jobs import settings_for
    from mhattn.heads.prune import run_prune
    from mhattn.heads.report import PruneReport, model_report

    model, meta = load_checkpoint(checkpoint_for(seed, folder))
    task = task_from_meta(meta["task"])
    details = run_prune(model, task, settings_for(task, HALVES), gates=False)
    return PruneReport({"text-deep": model_report(details)}).to_json()["models"]["text-deep"]


HALVES = {"n_remove": 16, "gate_steps": 0}  # the command's other defaults


def add_to_seeds(args, key, measure):
    """``measure(seed, folder)`` stored under ``key`` for each of ``--seeds`` already in ``--out``."""
    result = json.loads(Path(args.out).read_text())
    for s in result["seeds"]:
        if s["seed"] in args.seeds:
            s[key] = measure(s["seed"], args.checkpoints)
            print(f"seed {s['seed']}: {key} done", flush=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--orders", type=int, default=25, help="random removal orders per seed (the band)")
    p.add_argument("--checkpoints", default="build/text-deep-seeds", help="folder for the seeds other than 0")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--merge", action="store_true", help="keep the other seeds already in --out")
    p.add_argument("--gates-only", action="store_true", help="add the gates of --seeds to the seeds already in --out")
    p.add_argument("--halves", action="store_true", help="add the half-removal report of --seeds to the seeds in --out")
    args = p.parse_args()
    if args.gates_only or args.halves:
        if args.gates_only:
            add_to_seeds(args, "gates", gates)
        else:
            add_to_seeds(args, "half_removal", half_removal)
        return
    _, text_meta = load_checkpoint(shipped_path("text-deep"))
    one_layer = load_checkpoint("text")[1]["training"]["val"]["loss"]
    result = {"recipe": RECIPES["text-deep"], "task": text_meta["task"], "text_sha256": text_sha256(),
              "eval_size": EVAL_SIZE, "orders": args.orders, "one_layer_text_val_loss": one_layer, "cross_eval": cross_eval(),
              "seeds": []}  # fmt: skip
    if args.merge and Path(args.out).is_file():
        result["seeds"] = [s for s in json.loads(Path(args.out).read_text())["seeds"] if s["seed"] not in args.seeds]
    for seed in args.seeds:
        result["seeds"].append(
            {
                **measure(seed, args.checkpoints, args.orders),
                "gates": gates(seed, args.checkpoints),
                "half_removal": half_removal(seed, args.checkpoints),
            }
        )
        r = result["seeds"][-1]
        print(f"seed {seed}: loss {r['loss']:.4f} (bigram {r['bigram_loss']:.4f}), spearman "
              f"{r['spearman_importance_vs_ablation']:.2f}, {r['measure_seconds']} s", flush=True)  # fmt: skip
    result["seeds"].sort(key=lambda s: s["seed"])
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
