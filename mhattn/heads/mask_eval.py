"""One model, one evaluation set, many head masks: the work before the head mask done once.

Ablations, random removals and pruning curves change only which heads pass through
``head_mask`` (ξ, Michel et al. 2019, §2), and ξ_l first acts in layer l *after* its
attention (step 4 of :mod:`mhattn.functional.mha`). So for each batch we keep, per layer
l, the block input ``x_l`` and the per-head outputs ``heads_l`` ``(B, h, T, d_k)`` of an
unmasked forward. A mask whose first row different from all-ones is ``l*`` then costs only
what follows: layer l*'s ``heads * ξ``, concat, ``W_o``, residual and feed-forward, the
full blocks after it, the final LayerNorm and the classifiers. The same functional steps
run on the same arrays in the same batches, so the numbers are exactly those of
:func:`mhattn.training.loop.evaluate` with the mask. The same cache gives the two frozen levels of
:mod:`mhattn.heads.effects` (heads-only, and the direct effect, which needs only each layer's ``heads_l`` and
the full model's final residual stream).
"""

from __future__ import annotations

import numpy as np

from mhattn.backend import array_namespace, device_of, to_numpy
from mhattn.functional.embedding import embedding_forward
from mhattn.functional.encoder import block_tail_backward, block_tail_forward, encoder_block_backward, encoder_block_forward
from mhattn.functional.layernorm import layernorm_backward, layernorm_forward
from mhattn.functional.linear import linear_backward, linear_forward
from mhattn.functional.masks import causal_mask
from mhattn.functional.positional import positional_encoding_forward
from mhattn.functional.transformer import block_params
from mhattn.heads.effects import direct_bias_shifts, direct_logits, effect_level
from mhattn.nn.device import host_dtype
from mhattn.training.loop import multi_loss, score_batches

# positions per piece of the tail: its arrays (a few hundred KiB) stay in a core's L2 cache
TAIL_TOKENS = 1024

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
        self.batches = [self._prefix(model.place(ids[s : s + batch_size, ...])) for s in range(0, ids.shape[0], batch_size)]
        self._seen = {}  # (effect, mask bytes) -> result, for masks met again (the evaluation is deterministic)
        self._final = None  # per batch, the full model's last residual stream and its final LayerNorm's 1/σ
        self._importance = {}  # (mask bytes, batch size) -> raw importance, likewise

    def _prefix(self, ids):
        """``[(x_l, heads_l) for each layer]`` of an unmasked forward on one batch."""
        c, p = self.model.cfg, self.model.params
        mask = _causal(c, ids)  # (T, T) or None
        x, _ = positional_encoding_forward(embedding_forward(ids, p["embed.W"])[0])  # (B, T, d_model)
        kept = []
        for layer in range(c.num_layers):
            out, _, cache = encoder_block_forward(
                x, block_params(p, layer), c.num_heads, attn_mask=mask, attention=self.model.attention_steps()
            )
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

    def _logits(self, kept, first, head_mask, params, frozen=False):
        """:meth:`_tail` of one batch, a few sequences at a time (every position's logits depend on its
        own sequence only, so the pieces give the same bits as one call, faster: see ``TAIL_TOKENS``)."""
        n, step = kept[0][0].shape[0], max(1, TAIL_TOKENS // kept[0][0].shape[1])
        # stops within the axis: the standard leaves out-of-bounds slices unspecified
        pieces = [self._tail([(x[s : min(s + step, n), ...], hd[s : min(s + step, n), ...]) for x, hd in kept], first, head_mask,
                             params, frozen) for s in range(0, n, step)]  # fmt: skip
        xp = array_namespace(pieces[0][0])
        return tuple(xp.concat([p[k] for p in pieces]) for k in range(len(pieces[0])))

    def _tail(self, kept, first, head_mask, params, frozen=False):
        """Logits from layer ``first``'s head mask onwards, for one batch; ``frozen``: every later layer's heads
        keep their unmasked outputs (``kept``) instead of attending over the changed residual stream."""
        c = self.model.cfg
        x = kept[first][0]
        for layer in range(first, c.num_layers):
            p = block_params(params, layer)
            xi = None if head_mask is None else head_mask[layer, ...]
            if layer == first or frozen:
                x, _ = _after_head_mask(x, kept[layer][1], xi, p)  # (B, T, d_model)
            else:
                x, _, _ = encoder_block_forward(
                    x, p, c.num_heads, attn_mask=_causal(c, x), head_mask=xi, attention=self.model.attention_steps()
                )
        z, _ = layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])  # (B, T, d_model)
        return tuple(linear_forward(z, params[f"out.{k}.W"], params[f"out.{k}.b"])[0] for k in range(len(c.output_sizes)))

    def evaluate(self, head_mask=None, params=None, frozen=False, *, effect=None):
        """:func:`~mhattn.training.loop.evaluate` with this head mask, from the cache, at one level of freezing.

        Args:
            head_mask: ``(L, h)`` multipliers ξ (0 removes a head), host or on the parameters' device, or ``None``.
            params: other parameters to use after the head mask (e.g. a shifted ``b_o`` for a
                mean ablation); default the model's. With ``effect="direct"`` only ``attn.b_o``, ``ln_f`` and the
                classifiers may differ.
            effect: how much of the network may respond to the removal (:mod:`mhattn.heads.effects`):
                ``"total"`` (default) nothing is frozen, the ordinary masked forward; ``"heads-only"`` every
                surviving head keeps its full-model output (the cached ``heads_l``), so no head can change what it
                does, while the residual stream, LayerNorms, feed-forward layers and classifiers see the removal
                (with one layer every head reads only the embeddings, so it is the total effect); ``"direct"``
                everything downstream of the removed heads is frozen: the final residual stream loses exactly
                their contributions and is read through the final LayerNorm at its full-model scale.
            frozen: ``True`` is the older spelling of ``effect="heads-only"``.

        Returns:
            The same dict as ``evaluate``: ``loss``, ``acc``, ``min_acc`` and per classifier (``loss/k``, ``acc/k``).

        Raises:
            ValueError: ``params`` changes a parameter used before the first masked layer's head mask (or, for the
                direct effect, one it holds fixed); an unknown ``effect``, or ``frozen=True`` beside another one.
        """
        L = self.model.cfg.num_layers
        dtype = host_dtype(self.params["embed.W"])
        head_mask = None if head_mask is None else to_numpy(head_mask)  # a few numbers: decided on the host
        mask = np.ones(L * self.model.cfg.num_heads) if head_mask is None else head_mask
        level = effect_level(frozen, effect)
        level = "total" if level == "heads-only" and L == 1 else level
        key = (level, np.asarray(mask, dtype=dtype).tobytes()) if params is None else None
        if key not in self._seen:
            params = self.params if params is None else params
            mask = np.asarray(mask).reshape(L, -1)
            hm = None if head_mask is None else self.model.place(head_mask, dtype="params")
            if level == "direct":
                logits = self._direct(mask, hm, params)
            else:
                first = self._first_masked(mask, params)
                logits = (self._logits(kept, first, hm, params, level == "heads-only") for kept in self.batches)
            result = score_batches(logits, self.targets, self.batch_size)
            if key is None:
                return result
            self._seen[key] = result
        return dict(self._seen[key])

    def _direct(self, mask, head_mask, params):
        """The direct effect's logits, batch by batch (:func:`~mhattn.heads.effects.direct_logits`)."""
        c = self.model.cfg
        shifts = direct_bias_shifts(params, self.params, c.num_layers)  # checked before any work
        layers = sorted({layer for layer in range(c.num_layers) if not np.all(mask[layer] == 1.0)} | set(shifts))
        if head_mask is None and layers:  # only b_o changed: ξ = 1 everywhere
            head_mask = self.model.place(np.ones(mask.shape), dtype="params")
        if self._final is None:  # once: the last block's output and its final LayerNorm's scale, per batch
            p = block_params(self.params, c.num_layers - 1)
            finals = (_after_head_mask(*kept[-1], None, p)[0] for kept in self.batches)  # (B, T, d_model)
            g, b = self.params["ln_f.gamma"], self.params["ln_f.beta"]
            self._final = [(x, layernorm_forward(x, g, b)[1].inv_std) for x in finals]  # (B, T, d_model), (B, T, 1)
        K = len(c.output_sizes)
        return (direct_logits(x, inv_std, {layer: kept[layer][1] for layer in layers}, head_mask, params, shifts, K)
                for (x, inv_std), kept in zip(self._final, self.batches, strict=True))  # fmt: skip

    def importance_grads(self, head_mask=None, batch_size=256):
        """``E_x |∂L(x)/∂ξ|`` ``(L, h)`` (Michel et al. 2019, §4.1, raw), from the cache.

        The same numbers as :func:`mhattn.heads.importance.head_importance` with this mask and
        batch size: the forward starts at layer 0's head mask (the cached heads), and the
        backward stops there, since nothing before the first head mask is needed for ∂L/∂ξ.

        Args:
            head_mask: ``(L, h)`` (or flat ``L*h``) multipliers ξ, default all ones.
            batch_size: sequences per backward; must divide the evaluator's ``batch_size`` when the
                evaluation set spans more than one of the evaluator's batches.

        Raises:
            ValueError: ``batch_size`` is not positive, or does not divide the evaluator's where it must.

        Results are remembered per mask (one ``(L, h)`` array each, kept for the evaluator's life):
        the same mask again costs nothing.
        """
        if batch_size < 1 or (len(self.batches) > 1 and self.batch_size % batch_size):
            raise ValueError(f"batch_size {batch_size} must be positive and divide the evaluator's batch_size {self.batch_size}")
        L, h = self.model.cfg.num_layers, self.model.cfg.num_heads
        base = np.ones((L, h)) if head_mask is None else to_numpy(head_mask).astype(float).reshape(L, h)
        key = (base.tobytes(), batch_size)
        if key in self._importance:
            return self._importance[key].copy()
        total, n = np.zeros((L, h)), 0
        for i, kept in enumerate(self.batches):
            for s in range(0, kept[0][0].shape[0], batch_size):
                start = i * self.batch_size + s
                b = min(batch_size, kept[0][0].shape[0] - s)
                xi = self.model.place(np.repeat(base[:, None, :], b, axis=1), dtype="params")  # (L, b, h) one ξ per sequence
                targets = tuple(self.model.place(t[start : start + b, ...]) for t in self.targets)
                dxi = self._head_mask_grad([(x[s : s + b, ...], hd[s : s + b, ...]) for x, hd in kept], xi, targets)  # (L, b, h)
                total += np.abs(to_numpy(dxi) * b).sum(axis=1)  # batch mean -> per-sequence loss
                n += b
        self._importance[key] = total / n
        return self._importance[key].copy()

    def _head_mask_grad(self, kept, xi, targets):
        """``∂(mean loss)/∂ξ`` ``(L, b, h)`` for one batch: the forward and backward of
        :func:`~mhattn.functional.transformer.transformer_forward` from layer 0's head mask on."""
        c, params = self.model.cfg, self.params
        x, heads = kept[0]  # (b, T, d_model), (b, h, T, d_k) unmasked
        # forward: layer 0 from its head mask (steps 4-6 of MHA, then the rest of the block)
        x, tail = _after_head_mask(x, heads, xi[0, ...], block_params(params, 0))  # (b, T, d_model)
        mask, steps = _causal(c, x), self.model.attention_steps()
        blocks = []
        for layer in range(1, c.num_layers):
            x, _, cache = encoder_block_forward(
                x, block_params(params, layer), c.num_heads, attn_mask=mask, head_mask=xi[layer, ...], attention=steps
            )
            blocks.append(cache)
        z, ln_f = layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])
        outs = [linear_forward(z, params[f"out.{k}.W"], params[f"out.{k}.b"]) for k in range(len(c.output_sizes))]
        _, dlogits = multi_loss(tuple(o for o, _ in outs), targets)
        # backward, as transformer_backward, down to layer 0's head mask
        dz = None
        for d, (_, cache) in zip(dlogits, outs, strict=True):
            dzk = linear_backward(d, cache)[0]
            dz = dzk if dz is None else dz + dzk
        dx = layernorm_backward(dz, ln_f)[0]
        dxi = [None] * c.num_layers
        for layer in reversed(range(1, c.num_layers)):
            dx, _, dxi[layer] = encoder_block_backward(dx, blocks[layer - 1], steps)
        dxi[0] = block_tail_backward(dx, tail)[1]  # (b, h)
        return array_namespace(dxi[0]).stack(dxi)


def _causal(cfg, x):
    """The ``(T, T)`` causal mask beside ``x`` ``(B, T, ...)`` when the model is causal, else None."""
    return causal_mask(x.shape[1], xp=array_namespace(x), device=device_of(x)) if cfg.causal else None


def _after_head_mask(x, heads, xi, p):
    """One encoder block from its head mask on (:func:`~mhattn.functional.encoder.block_tail_forward`).

    Args:
        x: ``(B, T, d_model)`` the block's input; heads: ``(B, h, T, d_k)`` unmasked; xi: ``(h,)``,
            ``(B, h)`` or ``None``; p: the block's parameters (:func:`block_params`).

    Returns:
        ``(out, cache)``: ``(B, T, d_model)`` and the tail's cache, for its backward.
    """
    return block_tail_forward(x, heads, xi, p)
