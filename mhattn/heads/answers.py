"""The three answers of :func:`~mhattn.heads.prune.run_prune`'s report (``mhattn prune``'s up to version 4), from its
numbers.

Each is a dataclass whose field names are the keys of ``report.json`` (documented in docs/prune_report.md):

* :class:`UnequalContribution` (``q1_unequal_contribution``): do heads contribute unequally, and how unequally?
* :class:`Compensation` (``q2_compensation``): do the remaining heads compensate (redundancy, fine-tuning recovery)?
* :class:`RemovalImproved` (``q3_removal_improved_loss``): did any removal lower the loss?

All loss changes are in nats (natural-log units of cross-entropy), positive = worse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def gini(x):
    """Gini coefficient of non-negative values (negatives are clipped to 0).

    0 means all values are equal; (n-1)/n means one value carries everything. With x sorted
    ascending, ``G = Σ_i (2i - n - 1) x_i / (n Σ_i x_i)`` (i = 1..n).
    """
    x = np.sort(np.clip(np.ravel(x), 0.0, None))
    if x.sum() == 0:
        return 0.0
    n = len(x)
    return float((2 * np.arange(1, n + 1) - n - 1) @ x / (n * x.sum()))


@dataclass
class UnequalContribution:
    single_ablation_dloss_max: float
    single_ablation_dloss_median: float
    n_heads_costing_over_half_the_max: int
    top2_share_of_single_ablation_loss: float
    gini_single_ablation: float
    gini_importance: float
    importance_max_over_median: float
    spearman_importance_vs_zero_ablation: float
    least_vs_most_important_dloss: list[float]  # [least, most]


@dataclass
class Compensation:
    random_dloss_median: float
    random_dacc_median: float
    lowest_single_sum_of_single_dloss: float
    lowest_single_joint_dloss: float
    michel_iterative_joint_dloss: float
    finetune_recovered_fraction: float | None
    finetune_loss_pruned: float
    finetune_loss_after: float
    max_output_similarity: float
    max_attention_similarity: float
    # each detected role (not "other") that two heads or more hold -> its heads
    duplicated_roles: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class RemovalImproved:
    n_random_subsets_improved: int
    n_random: int
    best_random_dloss: float
    n_single_ablations_improved: int
    best_single_dloss: float
    curve_importance_improved_at_fraction: list[float]


def q1(r):
    dl = np.ravel(r["ablation_zero_dloss"])
    pos = np.clip(dl, 0.0, None)
    top = np.sort(pos)[::-1]
    return UnequalContribution(
        single_ablation_dloss_max=float(dl.max()), single_ablation_dloss_median=float(np.median(dl)),
        n_heads_costing_over_half_the_max=int((dl > 0.5 * dl.max()).sum()),
        top2_share_of_single_ablation_loss=float(top[:2].sum() / top.sum()) if top.sum() > 0 else 0.0,
        gini_single_ablation=gini(dl), gini_importance=gini(r["importance"]),
        importance_max_over_median=float(np.max(r["importance"]) / max(np.median(r["importance"]), 1e-12)),
        spearman_importance_vs_zero_ablation=r["spearman_importance_vs_zero_ablation"],
        least_vs_most_important_dloss=[r["least_important"]["loss"] - r["baseline"]["loss"],
                                       r["most_important"]["loss"] - r["baseline"]["loss"]],
    )  # fmt: skip


def q2(r):
    base = r["baseline"]["loss"]
    low = r["lowest_single_ablation"]
    sim, ft = r["similarity"], r["finetune"]
    return Compensation(
        random_dloss_median=float(np.median(r["random"]["dloss"])),
        random_dacc_median=float(np.median(r["random"]["dacc"])),
        lowest_single_sum_of_single_dloss=float(np.ravel(r["ablation_zero_dloss"])[low["removed"]].sum()),
        lowest_single_joint_dloss=low["loss"] - base, michel_iterative_joint_dloss=r["michel_iterative"]["loss"] - base,
        finetune_recovered_fraction=ft["recovered_fraction"], finetune_loss_pruned=ft["loss_pruned"],
        finetune_loss_after=ft["loss_after_finetune"], max_output_similarity=float(np.max(sim["max_offdiag_output"])),
        max_attention_similarity=float(np.max(sim["max_offdiag_attention"])), duplicated_roles=duplicated_roles(r["roles"]),
    )  # fmt: skip


def duplicated_roles(roles):
    """Roles held by more than one head: overlapping information in its plainest form (a duplicate can stand in).

    Args:
        roles: :func:`~mhattn.heads.roles.detect_roles`'s list of dicts (``layer``, ``head``, ``role``).

    Returns:
        dict ``role -> ["L<l>H<h>", ...]`` for every role other than ``"other"`` that two heads or more hold.
    """
    held = {}
    for r in roles:
        if r["role"] != "other":
            held.setdefault(r["role"], []).append(f"L{r['layer']}H{r['head']}")
    return {role: heads for role, heads in sorted(held.items()) if len(heads) >= 2}


def q3(r):
    rnd = np.asarray(r["random"]["dloss"])
    dl = np.ravel(r["ablation_zero_dloss"])
    curve = r["curve"]
    improved = [f for f, loss in zip(curve["fraction_removed"][1:], curve["importance_loss"][1:], strict=True)
                if loss < r["baseline"]["loss"]]  # fmt: skip
    return RemovalImproved(
        n_random_subsets_improved=int((rnd < 0).sum()), n_random=len(rnd), best_random_dloss=float(rnd.min()),
        n_single_ablations_improved=int((dl < 0).sum()), best_single_dloss=float(dl.min()),
        curve_importance_improved_at_fraction=improved,
    )  # fmt: skip


def summary(one: UnequalContribution, two: Compensation, three: RemovalImproved, r):
    """Plain-language answer with the numbers."""
    n, H = r["settings"]["n_remove"], r["num_layers"] * r["num_heads"]
    rec, steps = two.finetune_recovered_fraction, r["finetune"]["steps"]
    rec_s = "n/a" if rec is None else f"{100 * rec:.0f}%"
    tuned = (f"{steps} fine-tuning steps recover {rec_s} of a median random removal's loss" if steps
             else "no fine-tuning was run")  # fmt: skip
    return (
        f"(1) Single-head ablation costs between {three.best_single_dloss:+.3f} and "
        f"{one.single_ablation_dloss_max:+.3f} nats (median {one.single_ablation_dloss_median:+.3f}); "
        f"the two costliest heads carry {100 * one.top2_share_of_single_ablation_loss:.0f}% of the total "
        f"(Gini {one.gini_single_ablation:.2f}). "
        f"(2) Removing {n} of {H} heads at random costs a median {two.random_dloss_median:+.3f} nats "
        f"(accuracy {two.random_dacc_median:+.3f}); the {n} individually weakest heads cost "
        f"{two.lowest_single_sum_of_single_dloss:+.3f} alone but {two.lowest_single_joint_dloss:+.3f} together; {tuned}. "
        f"(3) {three.n_random_subsets_improved} of {three.n_random} random removals and "
        f"{three.n_single_ablations_improved} of {H} single ablations lowered the loss."
    )
