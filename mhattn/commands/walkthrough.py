"""``mhattn walkthrough``: the 512 / 8 x 64 example, step by step, with heatmaps."""

from __future__ import annotations

import argparse
import importlib.util

from mhattn.commands import UsageError, int_in, non_negative_int, output_dir
from mhattn.course import counting, walkthrough

MAX_D_MODEL, MAX_TOKENS = 4096, 512


def _sentence(text: str) -> str:
    """argparse type: text with 1 to MAX_TOKENS whitespace-separated tokens."""
    n = len(text.split())
    if not 1 <= n <= MAX_TOKENS:
        raise argparse.ArgumentTypeError(f"must have 1 to {MAX_TOKENS} whitespace-separated tokens, got {n}")
    return text


def add_parser(sub, name):
    p = sub.add_parser(name, help="walk one sentence through MultiHeadAttention(512, 8), printing every shape")
    p.add_argument("--sentence", type=_sentence, default=walkthrough.SENTENCE,
                   help=f"whitespace-tokenised text, 1 to {MAX_TOKENS} tokens")  # fmt: skip
    p.add_argument("--d-model", type=int_in(1, MAX_D_MODEL), default=512, help="model width d_model")
    p.add_argument("--num-heads", type=int_in(1, MAX_D_MODEL), default=8, help="number of heads h; must divide d_model")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed for the embedding table and the weights")
    p.add_argument("--out", type=output_dir, default=None,
                   help="folder for attention_heads.png (needs matplotlib); default: no picture")  # fmt: skip


def check(args):
    """The checks that need two options or an installed package; raises :class:`UsageError`."""
    if args.d_model % args.num_heads:
        raise UsageError(f"argument --num-heads: must divide --d-model={args.d_model}, got {args.num_heads}")
    if args.out is not None and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("argument --out: needs matplotlib (pip install 'mhattn[course]')")


def main(args) -> int:
    check(args)
    wt = walkthrough.run(args.sentence, args.d_model, args.num_heads, args.seed)
    d, h = args.d_model, args.num_heads
    print(f"tokens (T={len(wt.tokens)}): {' '.join(wt.tokens)}")
    print(f"d_model={d}, h={h}, d_k=d_model/h={d // h}; weights are seeded and untrained\n")
    print(walkthrough.format_steps(wt))
    print(f"\nsame result as MultiHeadAttention.forward: max |difference| = {wt.max_diff_vs_module:.1e}")
    print("\nparameters")
    print(f"  standard, h={h}:        {counting.standard_count(d, h, bias=False):>9,} weights = 4*d_model^2")
    print(f"  standard, h=1:        {counting.standard_count(d, 1, bias=False):>9,} weights (same: h does not matter)")
    print(f"  + biases:             {counting.standard_count(d, h):>9,} = 4*d_model^2 + 4*d_model")
    print(
        f"  block-diagonal count  {counting.count_block_diagonal(d, h):>9,} = h*3*(d_model/h)^2 + d_model^2:"
        " one d_k x d_k block per head in W_q/W_k/W_v, not the standard layer"
    )
    if args.out is not None:
        from mhattn.plots.attention import attention_heatmaps

        args.out.mkdir(parents=True, exist_ok=True)
        title = f"MultiHeadAttention({d}, {h}): weights per head (untrained, seeded)"
        fig = attention_heatmaps(wt.weights[0, ...], wt.tokens, title=title)
        path = args.out / "attention_heads.png"
        fig.savefig(path, dpi=110)
        print(f"\nheatmaps written to {path}")
    return 0
