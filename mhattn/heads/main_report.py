"""``mhattn prune``'s report: ``report.json`` (version 5) and ``report.md``, and the shipped data of the course.

``report.json``: ``report_version`` (5), ``seconds``, ``question`` and ``models``, each ``{stem: {"box",
"measurement", "reasons"}}``: the box as printed, :func:`mhattn.heads.sixes.measure_model`'s measurement and, per
layer, :class:`mhattn.heads.reasons.LayerReasons` as a dict (every measure with its median, the median's 95%
interval ``ci``, the spread ``p5``/``p95`` and ``mean``; shares with their Wilson interval; the verdict words).
docs/prune_report.md documents every key. Version 5 replaced versions 1-4 (one random removal per model, verdicts
from thresholds) by the per-layer measurements of :mod:`mhattn.heads.sixes`.

The shipped data (``mhattn/data/sixes.json``, written by ``benchmarks/sixes_data.py``) holds the same measurement
for three training seeds of ``text-deep12`` and for the two one-layer toys; notebook 07 reads it, and ``mhattn
prune`` takes the other seeds' rows from it for the seed-to-seed range when it measured the shipped checkpoint with
the shipped settings.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from functools import cache

from mhattn.heads.box import QUESTION, model_box
from mhattn.heads.reasons import model_reasons
from mhattn.training.checkpoint import DATA_DIR

REPORT_VERSION = 5
SHIPPED_DATA = DATA_DIR / "sixes.json"


@cache
def shipped() -> dict:
    """``mhattn/data/sixes.json``: ``settings``, ``text-deep12`` ``{seed: measurement}``, ``toys`` ``{name: measurement}``."""
    return json.loads(SHIPPED_DATA.read_text())


def other_seeds(stem: str, measurement: dict) -> list:
    """The reasons of the shipped seeds other than 0 of ``stem``, when ``measurement`` is the shipped seed 0's
    experiment (same settings, same baseline loss); otherwise none (no range is shown)."""
    seeds = shipped().get(stem, {}) if stem == "text-deep12" and SHIPPED_DATA.is_file() else {}
    zero = seeds.get("0")
    if not zero or zero["settings"] != measurement["settings"] or zero["baseline"] != measurement["baseline"]:
        return []
    return [model_reasons(m) for seed, m in seeds.items() if seed != "0"]


def model_entry(stem: str, measurement: dict) -> dict:
    """One model's part of the report: its box, its measurement and its reasons."""
    rows = model_reasons(measurement)
    box = model_box(stem, measurement, rows, other_seeds(stem, measurement))
    return {"box": box, "measurement": measurement, "reasons": [asdict(r) for r in rows]}


def report_json(models: dict, seconds: float) -> dict:
    """``report.json``'s content from ``{stem: model_entry}``."""
    return {"report_version": REPORT_VERSION, "seconds": seconds, "question": QUESTION, "models": models}


def report_markdown(report: dict) -> str:
    """``report.md``: each model's box, then where the words and every key are explained."""
    parts = ["# mhattn prune\n", f"{report['question']}\n"]
    for stem, entry in report["models"].items():
        parts += [f"## {stem}\n", "```\n" + entry["box"] + "\n```\n"]
    parts.append(f"{report['seconds']} s in all. Each model's figure is `sixes_<model>.png` beside this file (without "
                 "--no-plots). What each line measures, the intervals and every key of report.json: "
                 "docs/prune_report.md (the course site's page \"The pruning experiment\").\n")  # fmt: skip
    return "\n".join(parts)
