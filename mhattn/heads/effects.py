"""Three levels of freezing after a head removal: the total effect, heads-only, and the direct effect.

McGrath et al. 2023 ("The Hydra Effect: Emergent Self-repair in Language Model Computations", arXiv:2307.15771,
section "Direct, indirect, and total effects") read the compute graph as a causal graph. The **total effect** of an
intervention on a component is the change in the output when everything downstream of it responds, as in an
ordinary forward pass with the intervention; its **direct effect** is the change carried by the path from the
component straight to the output, with every other downstream variable held at the value it has without the
intervention. They measure a layer's direct effect by unembedding its output (Δ_unembed) with the final RMSNorm's
scale held at its value in the unablated run, and its total effect by ablation (Δ_ablate); the gap between the two is
the downstream layers' response (their Hydra effect, or self-repair).

For a head removal (ξ, Michel et al. 2019, §2) mhattn measures three levels (:meth:`HeadMaskEvaluator.evaluate`'s
``effect``), from least to most frozen:

* ``"total"``: nothing frozen, the ordinary masked forward (:func:`mhattn.training.loop.evaluate` with the mask).
* ``"heads-only"``: every surviving head's output is frozen at its value in the full model (no head can change what
  it does); the residual stream, the LayerNorms, the feed-forward layers and the classifiers see the removal
  (notebook 07's "frozen survivors"; ``frozen=True``). With one layer it is the total effect.
* ``"direct"``: everything downstream of the removed heads is frozen. Each later component (the heads of later
  layers, every LN2 and feed-forward layer after the removal, LN1 of later layers) keeps the input it had in the
  full model, so the final residual stream changes by exactly the removed heads' own contributions,
  ``x_L' = x_L + Σ_(l,i) (ξ_li - 1) head_li W_o[rows of i]`` (B, T, d_model), and the loss and accuracy are read
  from it through the final LayerNorm and the classifiers.

Where mhattn's setting differs from theirs, the choices made here:

* the final LayerNorm's scale 1/σ (one per position) is held at its full-model value, as they hold the final
  RMSNorm's; its centering (subtract the mean over d_model) is linear and is applied to the changed stream; γ, β and
  the classifiers are as they are. So the direct change in the logits is linear in the removed contributions, and
  adds up over heads exactly; at the other two levels the scale is recomputed (it responds to the removal);
* the unit removed is a set of heads (any layers), not one whole attention layer; a fractional ξ removes the
  fraction 1 - ξ of a head's output;
* the effect is read as the loss and the accuracy over every position of the evaluation set, not as the centred
  logit of the top token at one position;
* the intervention is zero ablation (ξ = 0), or mean ablation through a shifted ``b_o``, not a resample ablation.

Between the levels: total - heads-only is what the surviving heads' changes add (< 0: they compensate);
heads-only - direct is what the downstream LayerNorms and feed-forward layers (and the final LayerNorm's scale) add.
"""

from __future__ import annotations

from mhattn.backend import array_namespace
from mhattn.functional.linear import linear_forward
from mhattn.functional.split_heads import combine_heads_forward

EFFECTS = ("total", "heads-only", "direct")  # from nothing frozen to everything downstream frozen

# what a direct-effect evaluation may take from other parameters: a head's mean (b_o) and the readout
_DIRECT_PARAMS = (".attn.b_o", "ln_f.gamma", "ln_f.beta", "out.")


def effect_level(frozen=False, effect=None):
    """The level named by :meth:`HeadMaskEvaluator.evaluate`'s ``frozen`` (the older spelling of
    ``effect="heads-only"``) and ``effect`` (one of :data:`EFFECTS`, default ``"total"``).

    Raises:
        ValueError: ``effect`` is not one of :data:`EFFECTS`, or ``frozen=True`` beside another ``effect``.
    """
    if effect is not None and effect not in EFFECTS:
        raise ValueError(f"effect must be one of {EFFECTS}, got {effect!r}")
    if frozen and effect not in (None, "heads-only"):
        raise ValueError(f"frozen=True means effect='heads-only'; got effect={effect!r} beside it")
    return "heads-only" if frozen else (effect or "total")


def direct_bias_shifts(params, base, num_layers):
    """``{layer: b_o' - b_o}`` for the layers whose ``attn.b_o`` ``params`` changes (a mean ablation's constant).

    Raises:
        ValueError: ``params`` changes something else that the direct effect holds at its full-model value
            (only ``blocks.{l}.attn.b_o``, ``ln_f.*`` and ``out.*`` may differ from ``base``).
    """
    changed = sorted(n for n, v in params.items() if v is not base.get(n))
    frozen = [n for n in changed if not any(n.endswith(k) if k.startswith(".") else n.startswith(k) for k in _DIRECT_PARAMS)]
    if frozen:
        raise ValueError(f"effect='direct' holds {frozen[:4]} at their full-model values: pass them unchanged")
    return {
        layer: params[f"blocks.{layer}.attn.b_o"] - base[f"blocks.{layer}.attn.b_o"]
        for layer in range(num_layers)
        if f"blocks.{layer}.attn.b_o" in changed
    }


def layernorm_frozen_scale(x, inv_std, gamma, beta):
    """``γ (x - mean(x)) / σ_0 + β``: a LayerNorm whose scale ``inv_std = 1/σ_0`` ``(..., 1)`` is held fixed.

    With ``inv_std`` of ``x`` itself this is :func:`~mhattn.functional.layernorm.layernorm_forward`, step for step.
    """
    xp = array_namespace(x, inv_std)
    xc = x - xp.mean(x, axis=-1, keepdims=True)  # (..., d_model) centred: linear in x
    xc *= inv_std  # the full model's scale, not x's own
    out = xc * gamma
    out += beta
    return out


def direct_logits(x_final, inv_std, heads, head_mask, params, shifts, num_outputs):
    """The logits of the direct effect for one batch: the full model's final stream plus each changed layer's
    change in attention output, read through the final LayerNorm at its full-model scale and the classifiers.

    Args:
        x_final: ``(B, T, d_model)`` the full model's residual stream after the last block; inv_std: ``(B, T, 1)``
            its final LayerNorm's 1/σ.
        heads: ``{layer: (B, h, T, d_k)}`` the full model's head outputs, for each layer to change.
        head_mask: ``(L, h)`` multipliers ξ on the parameters' device; params: the parameters to read ``W_o``,
            ``ln_f`` and the classifiers from; shifts: ``{layer: (d_model,)}`` changes of ``b_o``
            (:func:`direct_bias_shifts`).
        num_outputs: K.

    Returns:
        A tuple of K arrays ``(B, T, C_k)``.
    """
    xp = array_namespace(x_final)
    x = x_final
    for layer, hd in heads.items():
        change = hd * xp.reshape(head_mask[layer, ...] - 1.0, (-1, 1, 1))  # (B, h, T, d_k): (ξ - 1) head
        concat, _ = combine_heads_forward(change)  # (B, T, d_model)
        dm, _ = linear_forward(concat, params[f"blocks.{layer}.attn.W_o"], shifts.get(layer))  # (B, T, d_model)
        x = x + dm
    z = layernorm_frozen_scale(x, inv_std, params["ln_f.gamma"], params["ln_f.beta"])  # (B, T, d_model)
    return tuple(linear_forward(z, params[f"out.{k}.W"], params[f"out.{k}.b"])[0] for k in range(num_outputs))
