# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Test yourself: remove 6 of 12 heads
#
# The course text ends with a question: a layer has twelve heads, six are removed at random, and the loss grows
# less than one would expect. Why? This notebook runs the whole experiment behind `mhattn prune` on the two
# shipped planted-roles models and asks you to predict each result before you see it.
#
# The same numbers come from the command line: `mhattn prune --out prune_report` writes `report.json` and the
# plots; the keys are described in the README.

# %%
import matplotlib

matplotlib.use("Agg")  # figures are shown with plots_pruning.show: PNG only, no "<Figure ...>" text

from mhattn.commands.prune import run, table
from mhattn.course.display import show
from mhattn.heads.roles import attention_maps
from mhattn.plots.attention import attention_heatmaps
from mhattn.plots.pruning import importance_bars, pruning_curves, random_removal_hist, similarity_heatmaps
from mhattn.training.checkpoint import load_checkpoint
from mhattn.training.tasks import task_from_meta

settings = {"n_remove": 6, "n_random": 200, "curve_orders": 3, "finetune_steps": 100, "gate_steps": 0, "seed": 0}

# %% [markdown]
# **Predict first.** For each model (plain; trained with head dropout p = 0.3), write down:
# 1. how many heads you think matter a lot;
# 2. the median loss increase when six random heads go;
# 3. whether removing the six *individually* weakest heads costs about the sum of their single costs;
# 4. whether any removal could lower the loss.
#
# Then run the next cell (about a minute).

# %%
models = run(["roles-plain", "roles-headdropout"], settings)
print(table(models))

# %% [markdown]
# ## The heads themselves: attention per head (one sequence)

# %%
for name in models:
    model, meta = load_checkpoint(name)
    task = task_from_meta(meta["task"])
    seq = task.eval_set(1024)[0][:1]
    show(attention_heatmaps(attention_maps(model, seq)[0, 0], [str(t) for t in seq[0]], title=name, ncols=6))
    found = models[name]["details"]["planted_roles"]
    print(name, "planted roles found:", found)

# %% [markdown]
# ## Check 1: how unequally do heads contribute?
#
# Look at the importance bars and the single-ablation bars. Are the same heads tall in both?

# %%
details = {n: m["details"] for n, m in models.items()}
show(importance_bars(details))
for n, m in models.items():
    q = m["q1_unequal_contribution"]
    print(
        f"{n}: top-2 share {q['top2_share_of_single_ablation_loss']:.2f}, Gini {q['gini_single_ablation']:.2f}, "
        f"Spearman(importance, ablation) {q['spearman_importance_vs_zero_ablation']:.2f}"
    )

# %% [markdown]
# ## Check 2: six random heads, 200 times

# %%
show(random_removal_hist(details))
for n, m in models.items():
    q = m["q2_compensation"]
    print(f"{n}: median loss change {q['random_dloss_median']:+.3f} nats, median accuracy change {q['random_dacc_median']:+.3f}")

# %% [markdown]
# ## Check 3: do single-head scores add up?
#
# Remove the six heads whose single ablations cost least, all at once, and compare with the sum of their single
# costs; then with Michel's iterative procedure, which re-scores importance after each removal.

# %%
for n, m in models.items():
    q = m["q2_compensation"]
    print(
        f"{n}: sum of the six single costs {q['lowest_single_sum_of_single_dloss']:+.3f}, removed together "
        f"{q['lowest_single_joint_dloss']:+.3f}, Michel iterative {q['michel_iterative_joint_dloss']:+.3f} nats"
    )

# %% [markdown]
# ## Check 4: pruning curves, redundancy and recovery
#
# Loss as 10% of the heads go at a time, by importance and at random; how alike the heads' outputs are; and how
# much of a median random removal's loss 100 fine-tuning steps win back.

# %%
show(pruning_curves(details))
show(similarity_heatmaps(details))
for n, m in models.items():
    q = m["q2_compensation"]
    f = m["details"]["finetune"]
    print(
        f"{n}: pruned loss {f['loss_pruned']:.3f} -> {f['loss_after_finetune']:.3f} after fine-tuning "
        f"(baseline {m['details']['baseline']['loss']:.3f}); max output similarity between two heads "
        f"{q['max_output_similarity']:.2f}"
    )

# %% [markdown]
# ## Check 5: did any removal make the model better?

# %%
for n, m in models.items():
    q = m["q3_removal_improved_loss"]
    print(
        f"{n}: {q['n_random_subsets_improved']} of {q['n_random']} random subsets and "
        f"{q['n_single_ablations_improved']} of 12 single ablations lowered the loss "
        f"(best single {q['best_single_dloss']:+.4f} nats)"
    )

# %% [markdown]
# ## The answer in plain words, with this run's numbers

# %%
for n, m in models.items():
    print(f"[{n}]")
    print(m["summary"])
    print()

# %% [markdown]
# **Compare with your predictions.** The loss grows less than expected when (a) the contribution is
# concentrated in a few heads, so most of a random half is cheap to lose, or (b) several heads do the same job,
# so the survivors cover for the removed ones; brief fine-tuning then wins back most of what was lost
# (check 4). Check 3 holds a trap: single-head scores do not add up. A head that shares its job looks dispensable
# while its twins are there, so the six individually weakest heads cost more together than the sum of their
# single costs, and re-scoring after every removal (Michel's procedure) picks a cheaper six.
#
# The course text adds a third, less certain reason: some heads may only add noise, so removing them could even
# help. Check 5 measured it: no random six lowered the loss in either model, and the three single removals that
# did lower it (head-dropout model) changed it by less than 0.0001 nats, measurable but negligible.
#
# **Try it yourself.** `mhattn prune --task text --out prune_text` runs the same experiment on the character-level
# model trained on CPython's documentation: do its heads share the work more evenly than the planted-roles
# models'? `mhattn prune --remove 3` or `--remove 9` shows how the answer changes with the number removed.
