"""The ``mhattn prune`` report as dataclasses with named fields, and its JSON form (``report.json``).

``report.json`` is ``dataclasses.asdict(PruneReport)``: ``report_version``, ``seconds``, ``question`` and
``models``, each a :class:`ModelReport` (``q1_unequal_contribution``, ``q2_compensation``,
``q3_removal_improved_loss``, ``expectation``, ``verdicts``, ``summary``, ``conclusion``, ``details``).
Version 2 added ``question``, ``expectation``, ``verdicts`` and ``conclusion``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from mhattn.heads.answers import Compensation, RemovalImproved, UnequalContribution, q1, q2, q3, summary
from mhattn.heads.conclusion import QUESTION, Verdicts, conclusion, verdicts
from mhattn.heads.expectation import Expectation, expectation

REPORT_VERSION = 2


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
