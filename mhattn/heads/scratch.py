"""Does training need heads the final model does not? Six heads from scratch against twelve pruned to six.

Michel et al. 2019 (abstract; §6) offer "precursory evidence that training dynamics play a role in the gains
provided by multi-head attention": a model may need its extra heads while it learns, even if the trained
model can lose them. The test here: the ``roles-6heads`` checkpoint (6 heads of d_k = 16, the same
d_model = 96 and the same 3,500 steps as ``roles-plain``; ``python -m mhattn.training.recipes roles-6heads``)
against ``roles-plain`` with six heads removed and the rest fine-tuned, both on the same evaluation set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mhattn.heads.importance import masked_eval
from mhattn.heads.prune import PruneSettings, copy_model
from mhattn.training.loop import train


@dataclass
class ScratchComparison:
    """Loss in nats and mean accuracy over the jobs on one evaluation set; steps are Adam steps."""

    scratch_heads: int
    scratch_steps: int
    scratch_loss: float
    scratch_acc: float
    scratch_min_acc: float  # the worst job
    scratch_first_step_at_99: int | None  # first probe step with every job >= 99% (None: never)
    full_heads: int
    full_steps: int
    full_loss: float
    full_acc: float
    full_first_step_at_99: int | None
    removed: list[int]  # heads removed from the full model (flat, layer-major)
    pruned_loss: float  # before fine-tuning
    pruned_acc: float
    finetune_steps: int
    finetuned_loss: float
    finetuned_acc: float
    finetuned_min_acc: float


def first_step_at_99(training):
    """The first probe step at which every job reached 99% accuracy, from a checkpoint's training record."""
    hit = training.get("first_probe_min_acc_99")
    return None if hit is None else int(hit[0])


def compare_scratch_vs_pruned(full, full_meta, scratch, scratch_meta, task, removed, *,
                              finetune_steps=PruneSettings.finetune_steps, eval_size=512, seed=0):  # fmt: skip
    """Evaluate ``scratch`` and ``full`` with ``removed`` heads pruned, before and after fine-tuning.

    Args:
        full, scratch: :class:`~mhattn.nn.transformer.TransformerModel` (same task, same d_model).
        full_meta, scratch_meta: their checkpoint metadata (``load_checkpoint``'s second value).
        removed: flat indices of the heads removed from ``full``; ``len(removed)`` heads go.

    Raises:
        ValueError: the two models differ in d_model, or ``scratch`` does not have as many heads
            as ``full`` keeps.
    """
    h_full, h_scratch = full.cfg.num_layers * full.cfg.num_heads, scratch.cfg.num_layers * scratch.cfg.num_heads
    if full.cfg.d_model != scratch.cfg.d_model or h_full - len(removed) != h_scratch:
        raise ValueError(f"full (d_model={full.cfg.d_model}, {h_full} heads) minus {len(removed)} heads must match "
                         f"scratch (d_model={scratch.cfg.d_model}, {h_scratch} heads)")  # fmt: skip
    data = task.eval_set(eval_size)
    base, own = masked_eval(full, *data), masked_eval(scratch, *data)
    mask = np.ones(h_full)
    mask[list(removed)] = 0.0
    mask = mask.reshape(full.cfg.num_layers, full.cfg.num_heads)  # (L, h)
    pruned = masked_eval(full, *data, mask)
    # the same recipe as mhattn prune's fine-tuning: Adam on all parameters, lr 1e-3, removed heads held at 0;
    # on a copy with its own arrays (Adam updates in place: the caller's ``full`` must stay as it was)
    tuned, _ = train(task, None, model=copy_model(full), head_mask=mask,
                     steps=finetune_steps, lr=1e-3, seed=seed, progress=False)  # fmt: skip
    after = masked_eval(tuned, *data, mask)
    return ScratchComparison(
        scratch_heads=h_scratch, scratch_steps=scratch_meta["training"]["steps"], scratch_loss=own["loss"],
        scratch_acc=own["acc"], scratch_min_acc=own["min_acc"],
        scratch_first_step_at_99=first_step_at_99(scratch_meta["training"]),
        full_heads=h_full, full_steps=full_meta["training"]["steps"], full_loss=base["loss"], full_acc=base["acc"],
        full_first_step_at_99=first_step_at_99(full_meta["training"]), removed=[int(i) for i in removed],
        pruned_loss=pruned["loss"], pruned_acc=pruned["acc"], finetune_steps=finetune_steps,
        finetuned_loss=after["loss"], finetuned_acc=after["acc"], finetuned_min_acc=after["min_acc"],
    )  # fmt: skip


def as_rows(c: ScratchComparison):
    """``[(label, loss, accuracy)]`` for printing: scratch, full, pruned, pruned + fine-tuned."""
    return [
        (f"{c.scratch_heads} heads from scratch ({c.scratch_steps} steps)", c.scratch_loss, c.scratch_acc),
        (f"{c.full_heads} heads ({c.full_steps} steps)", c.full_loss, c.full_acc),
        (f"{c.full_heads} -> {c.full_heads - len(c.removed)} heads, no retraining", c.pruned_loss, c.pruned_acc),
        (f"  + {c.finetune_steps} fine-tuning steps", c.finetuned_loss, c.finetuned_acc),
    ]
