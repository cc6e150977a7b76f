"""One model, one evaluation set, many head masks: the work before the head mask done once.

Ablations, random removals and pruning curves change only which heads pass through
``head_mask`` (ξ, Michel et al. 2019 eq. 2), and ξ_l first acts in layer l *after* its
attention (step 4 of :mod:`mhattn.functional.mha`). So for each batch we keep, per layer
l, the block input ``x_l`` and the per-head outputs ``heads_l`` ``(B, h, T, d_k)`` of an
unmasked forward. A mask whose first row different from all-ones is ``l*`` then costs only
what follows: layer l*'s ``heads * ξ``, concat, ``W_o``, residual and feed-forward, the
full blocks after it, the final LayerNorm and the classifiers. The same functional steps
run on the same arrays in the same batches, so the numbers are exactly those of
:func:`mhattn.training.loop.evaluate` with the mask.
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import asarray, get_array_module
from mhattn.functional.embedding import embedding_forward
from mhattn.functional.encoder import encoder_block_forward
from mhattn.functional.feedforward import feedforward_forward
from mhattn.functional.heads import combine_heads_forward
from mhattn.functional.layernorm import layernorm_forward
from mhattn.functional.linear import linear_forward
from mhattn.functional.masks import causal_mask
from mhattn.functional.positional import positional_encoding_forward
from mhattn.functional.transformer import block_params
from mhattn.training.loop import score_batches

# per layer, the parameters used before the head mask (a changed one makes the cache stale)
_BEFORE_MASK = ("ln1.gamma", "ln1.beta", "attn.W_q", "attn.W_k", "attn.W_v", "attn.b_q", "attn.b_k", "attn.b_v")


class HeadMaskEvaluator:
    """Loss and accuracy of ``model`` on ``(ids, targets)`` under any ``(L, h)`` head mask.

    Args:
        model: a :class:`~mhattn.nn.transformer.TransformerModel` (its parameters must not
            change while the evaluator is used, except those after the head mask; see :meth:`evaluate`).
        ids: ``(N, T)`` host ints; targets: K arrays ``(N, T)``; batch_size: as in ``evaluate``.
    """

    def __init__(self, model, ids, targets, batch_size=512):
        self.model, self.targets, self.batch_size = model, targets, batch_size
        self.params = dict(model.params)  # the arrays the cache was computed from
        self.batches = [self._prefix(asarray(ids[s : s + batch_size])) for s in range(0, len(ids), batch_size)]
        self._seen = {}  # mask bytes -> result, for masks met again (the evaluation is deterministic)

    def _prefix(self, ids):
        """``[(x_l, heads_l) for each layer]`` of an unmasked forward on one batch."""
        c, p = self.model.cfg, self.model.params
        mask = causal_mask(ids.shape[1], xp=get_array_module(ids)) if c.causal else None  # (T, T)
        x, _ = positional_encoding_forward(embedding_forward(ids, p["embed.W"])[0])  # (B, T, d_model)
        kept = []
        for layer in range(c.num_layers):
            out, _, cache = encoder_block_forward(x, block_params(p, layer), c.num_heads, attn_mask=mask)
            kept.append((x, cache.attn.heads))  # (B, T, d_model), (B, h, T, d_k)
            x = out
        return kept

    def _first_masked(self, head_mask, params):
        """The first layer whose mask row is not all ones (L when none), checked against changed parameters."""
        L = self.model.cfg.num_layers
        rows = [layer for layer in range(L) if head_mask is not None and not np.all(head_mask[layer] == 1.0)]
        first = min(rows[0] if rows else L, L - 1)  # no masked row: only the last layer's tail runs
        changed = {n for n, v in params.items() if v is not self.params.get(n)}
        stale = [n for n in changed if n == "embed.W" or any(n == f"blocks.{i}.{b}" for i in range(L) for b in _BEFORE_MASK)]
        stale += [n for n in changed if n.startswith("blocks.") and int(n.split(".")[1]) < first]
        if stale:
            raise ValueError(f"parameters {sorted(stale)[:4]} feed the cached part; build a new HeadMaskEvaluator")
        return first

    def _tail(self, kept, first, head_mask, params):
        """Logits from layer ``first``'s head mask onwards, for one batch."""
        c = self.model.cfg
        x, heads = kept[first]
        for layer in range(first, c.num_layers):
            p = block_params(params, layer)
            xi = None if head_mask is None else head_mask[layer]
            if layer == first:
                masked = heads if xi is None else heads * xi.reshape(*xi.shape, 1, 1)  # (B, h, T, d_k)
                m, _ = linear_forward(combine_heads_forward(masked)[0], p["attn.W_o"], p["attn.b_o"])  # (B, T, d_model)
                x1 = x + m
                g, _ = feedforward_forward(layernorm_forward(x1, p["ln2.gamma"], p["ln2.beta"])[0],
                                           p["ff.W1"], p["ff.b1"], p["ff.W2"], p["ff.b2"])  # fmt: skip
                x = x1 + g  # (B, T, d_model)
            else:
                mask = causal_mask(x.shape[1], xp=get_array_module(x)) if c.causal else None
                x, _, _ = encoder_block_forward(x, p, c.num_heads, attn_mask=mask, head_mask=xi)
        z, _ = layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])  # (B, T, d_model)
        return tuple(linear_forward(z, params[f"out.{k}.W"], params[f"out.{k}.b"])[0] for k in range(len(c.output_sizes)))

    def evaluate(self, head_mask=None, params=None):
        """:func:`~mhattn.training.loop.evaluate` with this head mask, from the cache.

        Args:
            head_mask: ``(L, h)`` multipliers ξ (0 removes a head), or ``None``.
            params: other parameters to use after the head mask (e.g. a shifted ``b_o`` for a
                mean ablation); default the model's.

        Returns:
            The same dict as ``evaluate``: ``loss``, ``acc``, ``min_acc`` and per classifier.

        Raises:
            ValueError: ``params`` changes a parameter used before the first masked layer's head mask.
        """
        dtype = self.params["embed.W"].dtype
        mask = np.ones(self.model.cfg.num_layers * self.model.cfg.num_heads) if head_mask is None else head_mask
        key = np.asarray(mask, dtype=dtype).tobytes() if params is None else None
        if key not in self._seen:
            params = self.params if params is None else params
            first = self._first_masked(np.asarray(mask).reshape(self.model.cfg.num_layers, -1), params)
            hm = None if head_mask is None else asarray(np.asarray(head_mask, dtype=dtype))
            logits = (self._tail(kept, first, hm, params) for kept in self.batches)
            result = score_batches(logits, self.targets, self.batch_size)
            if key is None:
                return result
            self._seen[key] = result
        return dict(self._seen[key])
