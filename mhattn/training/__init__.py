"""Training: the tasks (and the text corpus of the text tasks), the loop, checkpoints and the recipes of the shipped models.

Typical use::

    from mhattn.training import RolesTask, train, evaluate, save_checkpoint, load_checkpoint
    model, meta = load_checkpoint("roles-plain")          # a shipped checkpoint, or a path
    print(evaluate(model, *RolesTask().eval_set(), names=("prev", "next", "rare")))
"""

from mhattn.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from mhattn.training.loop import evaluate, multi_loss, train
from mhattn.training.tasks import RolesTask, Task, TextTask, task_from_meta
from mhattn.training.textdata import DeepTextTask  # registers the text-deep task for task_from_meta

__all__ = [
    "CheckpointError",
    "DeepTextTask",
    "RolesTask",
    "Task",
    "TextTask",
    "evaluate",
    "load_checkpoint",
    "multi_loss",
    "save_checkpoint",
    "task_from_meta",
    "train",
]
