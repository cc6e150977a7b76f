"""Head analysis: what each head looks at, how much the loss needs it, and what pruning does.

* :mod:`~mhattn.heads.roles`: per-head attention maps, Voita's confidence, positional and rare-token heads.
* :mod:`~mhattn.heads.importance`: Michel's importance, single-head ablation, rank correlation.
* :mod:`~mhattn.heads.gates`: hard-concrete gates with an L0 penalty (Voita et al. 2019, §6).
* :mod:`~mhattn.heads.mask_eval`: one evaluation set under many head masks, the work before the mask done once.
* :mod:`~mhattn.heads.effects`: three levels of freezing after a removal: direct effect, heads-only, total effect.
* :mod:`~mhattn.heads.redundancy`: how alike heads' attention patterns and outputs are.
* :mod:`~mhattn.heads.prune`: the "remove 6 of 12 heads" experiment behind ``mhattn prune``.
* :mod:`~mhattn.heads.expectation`: what "expected" means for a random removal (additive, naive).
* :mod:`~mhattn.heads.answers`, :mod:`~mhattn.heads.conclusion`, :mod:`~mhattn.heads.report`: the report
  as dataclasses, the verdicts on the usual reasons, and the conclusion printed by ``mhattn prune``.
* :mod:`~mhattn.heads.answer_box`: the answer box ``mhattn prune`` prints first and notebook 07 opens with.
* :mod:`~mhattn.heads.jobs`: the experiment of many models in worker processes, with its figures (``mhattn prune``,
  notebook 07); :mod:`~mhattn.heads.table`: the report's headline numbers as a text table.
* :mod:`~mhattn.heads.scratch`: a 6-head model trained from scratch against 12 heads pruned to 6 and fine-tuned.
"""

from mhattn.heads.answer_box import course_box, model_box
from mhattn.heads.expectation import additive_expectation, naive_expectation, subset_sums
from mhattn.heads.importance import ablation_deltas, head_importance, masked_eval, spearman
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import PruneSettings, head_pool, layer_view, run_prune
from mhattn.heads.report import ModelReport, PruneReport, model_report
from mhattn.heads.roles import attention_maps, detect_roles, head_confidence, positional_stats, rare_token_stats

__all__ = [
    "HeadMaskEvaluator",
    "ModelReport",
    "PruneReport",
    "PruneSettings",
    "additive_expectation",
    "course_box",
    "head_pool",
    "layer_view",
    "model_box",
    "model_report",
    "naive_expectation",
    "subset_sums",
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
