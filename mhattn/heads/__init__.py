"""Head analysis: what each head looks at, how much the loss needs it, and what pruning does.

* :mod:`~mhattn.heads.roles`: per-head attention maps, Voita's confidence, positional and rare-token heads.
* :mod:`~mhattn.heads.importance`: Michel's importance, single-head ablation, rank correlation.
* :mod:`~mhattn.heads.gates`: hard-concrete gates with an L0 penalty (Voita et al. 2019, §6).
* :mod:`~mhattn.heads.mask_eval`: one evaluation set under many head masks, the work before the mask done once.
* :mod:`~mhattn.heads.effects`: three levels of freezing after a removal: direct effect, heads-only, total effect.
* :mod:`~mhattn.heads.redundancy`: how alike heads' attention patterns and outputs are.
* :mod:`~mhattn.heads.prune`: the older one-removal experiment (:func:`run_prune`: curves, fine-tuning, gates).
* :mod:`~mhattn.heads.expectation`: what "expected" means for a random removal (additive, naive).
* :mod:`~mhattn.heads.sixes`, :mod:`~mhattn.heads.sixes_run`: the course's question as asked, six of one layer's
  twelve heads removed at random in every layer (``mhattn prune``'s main job, notebook 07's shipped data).
* :mod:`~mhattn.heads.reasons`: each reason measured in the form the question states it, with an interval verdict.
* :mod:`~mhattn.heads.box`, :mod:`~mhattn.heads.main_report`: the answer box ``mhattn prune`` prints and notebook 07
  opens with, and ``report.json``/``report.md``.
* :mod:`~mhattn.heads.answers`, :mod:`~mhattn.heads.conclusion`, :mod:`~mhattn.heads.report`,
  :mod:`~mhattn.heads.jobs`: the older one-removal report of :func:`run_prune` (pruning curves, fine-tuning, gates),
  kept for notebook 10's stored data and the library.
* :mod:`~mhattn.heads.scratch`: a 6-head model trained from scratch against 12 heads pruned to 6 and fine-tuned.
"""

from mhattn.heads.box import model_box
from mhattn.heads.expectation import additive_expectation, naive_expectation, subset_sums
from mhattn.heads.importance import ablation_deltas, head_importance, masked_eval, spearman
from mhattn.heads.mask_eval import HeadMaskEvaluator
from mhattn.heads.prune import PruneSettings, head_pool, layer_view, run_prune
from mhattn.heads.reasons import LayerReasons, layer_reasons, model_reasons
from mhattn.heads.report import ModelReport, PruneReport, model_report
from mhattn.heads.roles import attention_maps, detect_roles, head_confidence, positional_stats, rare_token_stats
from mhattn.heads.sixes import SixesSettings, measure_half, measure_layer, measure_model

__all__ = [
    "HeadMaskEvaluator",
    "ModelReport",
    "PruneReport",
    "PruneSettings",
    "additive_expectation",
    "LayerReasons",
    "SixesSettings",
    "layer_reasons",
    "measure_half",
    "measure_layer",
    "measure_model",
    "model_reasons",
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
