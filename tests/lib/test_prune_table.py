"""The prune table (``mhattn.heads.table``): levels (accuracies, shares) as unsigned percentages, changes with a sign."""

from __future__ import annotations

from types import SimpleNamespace


def _fake_report(values: dict) -> SimpleNamespace:
    """An object with the dotted fields of ``mhattn.heads.table.ROWS`` set from ``values`` (missing: 0)."""
    from mhattn.heads.table import ROWS

    root: dict = {}
    for _, path, _ in ROWS:
        *parents, last = path.split(".")
        node = root
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = values.get(path, 0)

    def wrap(node):
        if not isinstance(node, dict):
            return node
        if set(node) <= {"0", "1"}:
            return [wrap(node[k]) for k in sorted(node)]
        return SimpleNamespace(**{k: wrap(v) for k, v in node.items()})

    return wrap(root)


def test_the_prune_table_prints_accuracies_as_percentages_and_changes_with_signs():
    from mhattn.heads.table import table

    report = _fake_report({
        "baseline_loss": 0.0003, "baseline_acc": 1.0, "q1_unequal_contribution.single_ablation_dloss_max": 1.343,
        "q1_unequal_contribution.top2_share_of_single_ablation_loss": 0.74, "q2_compensation.random_dacc_median": -0.351,
        "q2_compensation.finetune_recovered_fraction": 0.94, "q1_unequal_contribution.least_vs_most_important_dloss.0": 0.519,
        "q1_unequal_contribution.least_vs_most_important_dloss.1": 3.969, "role_counts": (1, 2, 0), "gates_open": 7,
    })  # fmt: skip
    rows = {line[:34].strip(): line[34:].strip() for line in table({"m": report}).splitlines()[1:]}
    assert rows["baseline accuracy"] == "100.0%" and rows["baseline loss (nats)"] == "0.0003"
    assert rows["top-2 share of ablation loss"] == "74.0%" and rows["fine-tune recovered fraction"] == "94.0%"
    assert rows["random removal: median dacc"] == "-35.1 points"
    assert rows["max single-ablation dloss"] == "+1.343" and rows["remove most important: dloss"] == "+3.969"
    assert rows["gates open after L0 training"] == "7" and rows["heads at -1 / +1 / rare (>= 90%)"] == "1 / 2 / 0"
    levels = ("baseline", "share", "fraction", "spearman", "similarity", "gates", "heads at", "improving")
    assert not [label for label, cell in rows.items() if label.startswith(levels) or any(w in label for w in levels)
                if cell.startswith("+")], rows  # fmt: skip
