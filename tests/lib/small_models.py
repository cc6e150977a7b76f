"""A small model whose heads matter, shared by the head-removal tests (``test_layer_removal``, ``test_sixes``)."""

from __future__ import annotations

import numpy as np

from mhattn.nn.transformer import ModelConfig, TransformerModel
from mhattn.training.tasks import RolesTask


def shaken_model(num_layers: int, num_heads: int):
    """``(model, task)``: a float64 model of ``num_layers`` x ``num_heads`` on a small planted-roles task, its
    parameters shaken (seeded) so that every head changes the loss."""
    task = RolesTask(vocab_size=10, seq_len=7)
    cfg = ModelConfig(vocab_size=10, output_sizes=task.output_sizes, d_model=16, num_heads=num_heads,
                      num_layers=num_layers, d_ff=24)  # fmt: skip
    model = TransformerModel(cfg, seed=3, dtype="float64")
    rng = np.random.default_rng(7)
    for p in model.params.values():
        p += 0.3 * rng.standard_normal(p.shape)
    return model, task
