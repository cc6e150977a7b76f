"""Head analysis: what each head looks at, how much the loss needs it, and what pruning does.

* :mod:`~mhattn.heads.roles`: per-head attention maps, Voita's confidence, positional and rare-token heads.
* :mod:`~mhattn.heads.importance`: Michel's importance, single-head ablation, rank correlation.
* :mod:`~mhattn.heads.gates`: hard-concrete gates with an L0 penalty (Voita et al. 2019, §6).
* :mod:`~mhattn.heads.mask_eval`: one evaluation set under many head masks, the work before the mask done once.
* :mod:`~mhattn.heads.prune`: the "remove 6 of 12 heads" experiment behind ``mhattn prune``.
"""

from mhattn.heads.answers import answers
from mhattn.heads.importance import ablation_deltas, head_importance, masked_eval, spearman
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import PruneSettings, run_prune
from mhattn.heads.roles import attention_maps, detect_roles, head_confidence, positional_stats, rare_token_stats

__all__ = [
    "HeadMaskEvaluator",
    "PruneSettings",
    "answers",
    "run_prune",
    "ablation_deltas",
    "attention_maps",
    "detect_roles",
    "head_confidence",
    "head_importance",
    "masked_eval",
    "positional_stats",
    "rare_token_stats",
    "spearman",
]
