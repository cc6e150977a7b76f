"""The report of :func:`~mhattn.heads.prune.run_prune` (``mhattn prune``'s up to version 4) as dataclasses with
named fields, and its JSON form.

``report.json`` is ``dataclasses.asdict(PruneReport)``: ``report_version``, ``seconds``, ``question`` and
``models``, each a :class:`ModelReport` (``q1_unequal_contribution``, ``q2_compensation``,
``q3_removal_improved_loss``, ``expectation``, ``verdicts``, ``summary``, ``conclusion``, ``details``).
Version 2 added ``question``, ``expectation``, ``verdicts`` and ``conclusion``. Version 3 added the
frozen-survivors measurement (:meth:`~mhattn.heads.mask_eval.HeadMaskEvaluator.evaluate` with ``frozen=True``):
``details.random.frozen_dloss`` and ``details.ablation_frozen_dloss``; in ``expectation`` the 95% bootstrap
intervals ``observed_dloss_mean_ci`` and ``observed_dloss_median_ci``, ``observed_dloss_p10``, the
``frozen_*`` and ``adaptation_*`` fields, ``fraction_frozen_superadditive`` and ``fraction_adaptation_lowers``;
the verdict ``spare_evidence``. In version 3
``reason2_compensation_holds`` means that letting the survivors change lowers a removal's cost (it meant
overlapping outputs and a median below 0.1 x naive), ``less_than_naive`` and ``more_than_additive`` compare the
intervals, not the point values, ``details.finetune.recovered_fraction`` (and
``q2_compensation.finetune_recovered_fraction``) is ``null`` when no fine-tuning was run, and ``conclusion``
ends with one "Answer: ..." sentence. :func:`~mhattn.heads.prune.run_prune` with ``direct=True`` adds the
direct effect (:mod:`mhattn.heads.effects`) and the frozen accuracies to ``details`` (``ablation_direct_dloss``/
``_dacc``, ``ablation_frozen_dacc``; ``random.frozen_dacc``, ``direct_dloss``, ``direct_dacc``); ``mhattn prune``
asks for them from version 4 on. docs/prune_report.md documents every key.
Version 4 added removals from one layer (``details.settings.layer``;
``details.layer`` and ``model_num_layers``, the per-head arrays of that layer only), the three levels of freezing
(``details.random.direct_dloss``/``direct_dacc``/``frozen_dacc``, ``details.ablation_direct_dloss``/``_dacc``,
``ablation_frozen_dacc``; in ``expectation`` the ``direct_*`` and ``downstream_*`` fields), accuracy beside loss
in ``expectation`` (``*_dacc*``, ``fraction_*_naive``), reason 1 as stated (``observed_median_over_mean``,
``fraction_cheap``), ``q2_compensation.duplicated_roles`` and the matching verdicts; the conclusion is at most 200
words, and ``mhattn prune`` also writes ``report.md``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from mhattn.heads.answers import Compensation, RemovalImproved, UnequalContribution, q1, q2, q3, summary
from mhattn.heads.conclusion import QUESTION, Verdicts, conclusion, verdicts
from mhattn.heads.expectation import Expectation, expectation

REPORT_VERSION = 4


@dataclass
class ModelReport:
    q1_unequal_contribution: UnequalContribution
    q2_compensation: Compensation
    q3_removal_improved_loss: RemovalImproved
    expectation: Expectation
    verdicts: Verdicts
    summary: str
    conclusion: str
    details: dict  # the raw measurements of :func:`~mhattn.heads.prune.run_prune`

    @property
    def baseline_loss(self):
        return self.details["baseline"]["loss"]

    @property
    def baseline_acc(self):
        return self.details["baseline"]["acc"]

    @property
    def role_counts(self):
        """``(offset-1, offset+1, rare)`` heads detected at >= 90%."""
        roles = [r["role"] for r in self.details["roles"]]
        return roles.count("offset-1"), roles.count("offset+1"), roles.count("rare")

    @property
    def gates_open(self):
        """Hard-concrete gates left open (``None`` when the gates were skipped)."""
        return self.details.get("gates", {}).get("open")

    def figure_data(self):
        """What :mod:`mhattn.plots.pruning`'s figures draw: the measurements (``details``) with this report's
        ``additive`` and ``naive`` expected loss changes of a random removal (nats, :mod:`~mhattn.heads.expectation`)."""
        e = self.expectation
        return {**self.details, "additive": e.additive_expected_dloss, "naive": e.naive_expected_dloss}


@dataclass
class PruneReport:
    models: dict[str, ModelReport]
    seconds: float = 0.0
    question: str = QUESTION
    report_version: int = field(default=REPORT_VERSION)

    def to_json(self):
        """A JSON-ready dict (NumPy scalars as Python numbers), ``report_version`` first."""
        d = _jsonable(asdict(self))
        return {"report_version": d.pop("report_version"), "seconds": d.pop("seconds"), **d}


def model_report(details):
    """:class:`ModelReport` from :func:`~mhattn.heads.prune.run_prune`'s ``details``."""
    one, two, three, e = q1(details), q2(details), q3(details), expectation(details)
    v = verdicts(e, one, two, three)
    return ModelReport(one, two, three, e, v, summary(one, two, three, details), conclusion(e, v, one, two, three), details)


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x
