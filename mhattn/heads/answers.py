"""The three answers of ``mhattn prune``, computed from :func:`~mhattn.heads.prune.run_prune`'s numbers.

Keys (documented in the README):

* ``q1_unequal_contribution``: do heads contribute unequally, and how unequally?
* ``q2_compensation``: do the remaining heads compensate (redundancy, fine-tuning recovery)?
* ``q3_removal_improved_loss``: did any removal lower the loss?
"""

from __future__ import annotations

import numpy as np


def gini(x):
    """Gini coefficient of non-negative values: 0 = all equal, (n-1)/n = one carries everything."""
    x = np.sort(np.clip(np.ravel(x), 0.0, None))
    if x.sum() == 0:
        return 0.0
    n = len(x)
    return float((2 * np.arange(1, n + 1) - n - 1) @ x / (n * x.sum()))


def q1(r):
    dl = np.ravel(r["ablation_zero_dloss"])
    pos = np.clip(dl, 0.0, None)
    top = np.sort(pos)[::-1]
    return {
        "single_ablation_dloss_max": float(dl.max()), "single_ablation_dloss_median": float(np.median(dl)),
        "n_heads_costing_over_half_the_max": int((dl > 0.5 * dl.max()).sum()),
        "top2_share_of_single_ablation_loss": float(top[:2].sum() / top.sum()) if top.sum() > 0 else 0.0,
        "gini_single_ablation": gini(dl), "gini_importance": gini(r["importance"]),
        "importance_max_over_median": float(np.max(r["importance"]) / max(np.median(r["importance"]), 1e-12)),
        "spearman_importance_vs_zero_ablation": r["spearman_importance_vs_zero_ablation"],
        "least_vs_most_important_dloss": [r["least_important"]["loss"] - r["baseline"]["loss"],
                                          r["most_important"]["loss"] - r["baseline"]["loss"]],
    }  # fmt: skip


def q2(r):
    base = r["baseline"]["loss"]
    dl = np.ravel(r["ablation_zero_dloss"])
    low = r["lowest_single_ablation"]
    sum_single = float(dl[low["removed"]].sum())
    rnd = np.asarray(r["random"]["dloss"])
    sim = r["similarity"]
    return {
        "random_dloss_median": float(np.median(rnd)), "random_dacc_median": float(np.median(r["random"]["dacc"])),
        "lowest_single_sum_of_single_dloss": sum_single, "lowest_single_joint_dloss": low["loss"] - base,
        "michel_iterative_joint_dloss": r["michel_iterative"]["loss"] - base,
        "finetune_recovered_fraction": r["finetune"]["recovered_fraction"],
        "finetune_loss_pruned": r["finetune"]["loss_pruned"], "finetune_loss_after": r["finetune"]["loss_after_finetune"],
        "max_output_similarity": float(np.max(sim["max_offdiag_output"])),
        "max_attention_similarity": float(np.max(sim["max_offdiag_attention"])),
    }  # fmt: skip


def q3(r):
    rnd = np.asarray(r["random"]["dloss"])
    dl = np.ravel(r["ablation_zero_dloss"])
    return {
        "n_random_subsets_improved": int((rnd < 0).sum()), "n_random": len(rnd), "best_random_dloss": float(rnd.min()),
        "n_single_ablations_improved": int((dl < 0).sum()), "best_single_dloss": float(dl.min()),
        "curve_importance_improved_at_fraction": [f for f, loss in zip(r["curve"]["fraction_removed"][1:],
            r["curve"]["importance_loss"][1:], strict=True) if loss < r["baseline"]["loss"]],
    }  # fmt: skip


def answers(r):
    """``{"q1_unequal_contribution": ..., "q2_compensation": ..., "q3_removal_improved_loss": ..., "summary": str}``."""
    a = {"q1_unequal_contribution": q1(r), "q2_compensation": q2(r), "q3_removal_improved_loss": q3(r)}
    a["summary"] = summary(a, r)
    return a


def summary(a, r):
    """Plain-language answer with the numbers."""
    one, two, three = a["q1_unequal_contribution"], a["q2_compensation"], a["q3_removal_improved_loss"]
    n, H = r["settings"]["n_remove"], r["num_layers"] * r["num_heads"]
    rec = two["finetune_recovered_fraction"]
    rec_s = "n/a" if rec is None else f"{100 * rec:.0f}%"
    return (
        f"(1) Single-head ablation costs between {min(np.ravel(r['ablation_zero_dloss'])):+.3f} and "
        f"{one['single_ablation_dloss_max']:+.3f} nats (median {one['single_ablation_dloss_median']:+.3f}); "
        f"the two costliest heads carry {100 * one['top2_share_of_single_ablation_loss']:.0f}% of the total "
        f"(Gini {one['gini_single_ablation']:.2f}). "
        f"(2) Removing {n} of {H} heads at random costs a median {two['random_dloss_median']:+.3f} nats "
        f"(accuracy {two['random_dacc_median']:+.3f}); the {n} individually weakest heads cost "
        f"{two['lowest_single_sum_of_single_dloss']:+.3f} alone but {two['lowest_single_joint_dloss']:+.3f} together, "
        f"and {r['finetune']['steps']} fine-tuning steps recover {rec_s} of a median random removal's loss. "
        f"(3) {three['n_random_subsets_improved']} of {three['n_random']} random removals and "
        f"{three['n_single_ablations_improved']} of {H} single ablations lowered the loss."
    )
