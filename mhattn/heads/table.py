"""The prune report's headline numbers as a side-by-side text table (what ``mhattn prune`` prints, notebook 07 shows)."""

from __future__ import annotations

FORMATS = {  # how a kind of value is printed: levels without a sign, changes with one, as docs/prune_report.md's table
    "loss": "{:.4f}",  # a loss in nats
    "dloss": "{:+.3f}",  # a change of loss (positive = worse)
    "acc": "{:.1%}",  # an accuracy, a share or a fraction, as a percentage
    "dacc": "{:+.1f} points",  # a change of accuracy, in percentage points (the value is a fraction)
    "ratio": "{:.2f}",  # a correlation or a similarity
}


def _fmt(v, kind):
    """One table cell: ``v`` printed as its ``kind`` (a key of FORMATS, or "count") says."""
    if v is None:
        return "n/a"
    if isinstance(v, tuple):
        return " / ".join(str(x) for x in v)
    if kind == "dacc":
        return FORMATS[kind].format(100 * v)
    return FORMATS[kind].format(v) if kind in FORMATS else str(v)


ROWS = [  # (label, dotted field of ModelReport, kind of value: see FORMATS)
    ("baseline loss (nats)", "baseline_loss", "loss"),
    ("baseline accuracy", "baseline_acc", "acc"),
    ("max single-ablation dloss", "q1_unequal_contribution.single_ablation_dloss_max", "dloss"),
    ("median single-ablation dloss", "q1_unequal_contribution.single_ablation_dloss_median", "dloss"),
    ("top-2 share of ablation loss", "q1_unequal_contribution.top2_share_of_single_ablation_loss", "acc"),
    ("spearman(importance, ablation)", "q1_unequal_contribution.spearman_importance_vs_zero_ablation", "ratio"),
    ("remove least important: dloss", "q1_unequal_contribution.least_vs_most_important_dloss.0", "dloss"),
    ("remove most important: dloss", "q1_unequal_contribution.least_vs_most_important_dloss.1", "dloss"),
    ("naive expectation: dloss", "expectation.naive_expected_dloss", "dloss"),
    ("additive expectation: dloss", "expectation.additive_expected_dloss", "dloss"),
    ("random removal: mean dloss", "expectation.observed_dloss_mean", "dloss"),
    ("random removal: median dloss", "q2_compensation.random_dloss_median", "dloss"),
    ("random removal: 90th pct dloss", "expectation.observed_dloss_p90", "dloss"),
    ("random removal: worst dloss", "expectation.observed_dloss_worst", "dloss"),
    ("random removal: median dacc", "q2_compensation.random_dacc_median", "dacc"),
    ("weakest singles: sum of singles", "q2_compensation.lowest_single_sum_of_single_dloss", "dloss"),
    ("weakest singles: removed together", "q2_compensation.lowest_single_joint_dloss", "dloss"),
    ("one-at-a-time pruning: dloss", "q2_compensation.michel_iterative_joint_dloss", "dloss"),
    ("max output similarity", "q2_compensation.max_output_similarity", "ratio"),
    ("fine-tune recovered fraction", "q2_compensation.finetune_recovered_fraction", "acc"),
    ("random subsets improving loss", "q3_removal_improved_loss.n_random_subsets_improved", "count"),
    ("single ablations improving loss", "q3_removal_improved_loss.n_single_ablations_improved", "count"),
    ("gates open after L0 training", "gates_open", "count"),
    ("heads at -1 / +1 / rare (>= 90%)", "role_counts", "count"),
]


def field_value(report, path):
    """``report``'s value at a dotted field path (a numeric part indexes a list)."""
    v = report
    for part in path.split("."):
        v = v[int(part)] if part.isdigit() else getattr(v, part)
    return v


def table(models):
    """Side-by-side text table of the headline numbers (``models``: name -> ModelReport)."""
    names = list(models)
    lines = [f"{'':34s}" + "".join(f"{n:>20s}" for n in names)]
    for label, path, kind in ROWS:
        lines.append(f"{label:34s}" + "".join(f"{_fmt(field_value(models[n], path), kind):>20s}" for n in names))
    return "\n".join(lines)
