"""The recipes of the shipped checkpoints (``mhattn/data/*.npz``), in one place.

``python -m mhattn.training.recipes`` re-trains them all into (or name some: ``... recipes roles-6heads``) ``mhattn/data``.
"""

from __future__ import annotations

import sys

from mhattn.nn.transformer import ModelConfig
from mhattn.training.checkpoint import DATA_DIR, save_checkpoint
from mhattn.training.loop import evaluate, train
from mhattn.training.tasks import RolesTask, TextTask

# the roles models: one recipe, each model changing only what it names
_ROLES = dict(
    task="roles", d_model=96, num_heads=12, num_layers=1, d_ff=384, steps=3500, batch_size=128, lr=3e-3, head_dropout=0.0
)
RECIPES = {
    "roles-plain": {**_ROLES, "file": "roles-plain.npz"},
    "roles-headdropout": {**_ROLES, "head_dropout": 0.3, "file": "roles-headdropout.npz"},
    # training may need heads the final model does not: 6 heads of d_k = 16 from scratch (notebook 07)
    "roles-6heads": {**_ROLES, "num_heads": 6, "file": "roles-6heads.npz"},
    "text": dict(task="text", d_model=96, num_heads=12, num_layers=1, d_ff=384, steps=2500, batch_size=32,
                 lr=3e-3, head_dropout=0.0, file="text.npz"),
    # 4 layers x 8 heads (d_k 8) on 700 K characters of Python's documentation (textdata.py; notebook 10)
    "text-deep": dict(task="text-deep", d_model=64, num_heads=8, num_layers=4, d_ff=256, steps=1000, batch_size=32,
                      lr=3e-3, head_dropout=0.0, file="text-deep.npz"),
    # 4 layers x 12 heads (d_k 8) on the same text: the course's question (6 of a layer's 12 heads) on a deep model
    "text-deep12": dict(task="text-deep", d_model=96, num_heads=12, num_layers=4, d_ff=384, steps=1000, batch_size=32,
                        lr=3e-3, head_dropout=0.0, file="text-deep12.npz"),
}  # fmt: skip


def make_task(name):
    if name == "text-deep":
        from mhattn.training.textdata import DeepTextTask

        return DeepTextTask()
    return RolesTask() if name == "roles" else TextTask()


def run_recipe(name, out, seed=0, progress=True, **overrides):
    """Train recipe ``name`` (with any field overridden), evaluate it and save it to ``out``.

    Returns:
        ``(model, meta)`` where ``meta["training"]`` has the time, the steps and the
        validation loss/accuracy per classifier.
    """
    r = {**RECIPES[name], **overrides}
    task = make_task(r["task"])
    cfg = ModelConfig(vocab_size=task.vocab_size, output_sizes=task.output_sizes, d_model=r["d_model"],
                      num_heads=r["num_heads"], num_layers=r["num_layers"], d_ff=r["d_ff"], causal=task.causal)  # fmt: skip
    probe = task.eval_set(256, seed=777)  # a small probe set, distinct from the final evaluation set
    model, info = train(task, cfg, steps=r["steps"], batch_size=r["batch_size"], lr=r["lr"],
                        head_dropout=r["head_dropout"], seed=seed, progress=progress, eval_data=probe)  # fmt: skip
    ids, targets = task.eval_set()
    scores = evaluate(model, ids, targets, names=task.output_names)
    training = {"recipe": name, "seed": seed, **{k: r[k] for k in ("steps", "batch_size", "lr", "head_dropout")},
                "seconds": round(info["seconds"], 1), "val": scores,
                "probe_history": [[st, round(sec, 1), round(lo, 4), round(acc, 4)] for st, sec, lo, acc in info["val_history"]],
                "first_probe_min_acc_99": next(([st, round(sec, 1)] for st, sec, _, acc in info["val_history"] if acc >= 0.99),
                                               None)}  # fmt: skip
    meta = {"task": task.to_meta(), "training": training}
    save_checkpoint(out, model, task.to_meta(), training)
    return model, meta


if __name__ == "__main__":
    for n in sys.argv[1:] or list(RECIPES):
        _, m = run_recipe(n, DATA_DIR / RECIPES[n]["file"], progress=False)
        print(n, m["training"], flush=True)
