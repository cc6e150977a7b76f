"""``mhattn walkthrough``: the 512 / 8 x 64 example, step by step, with heatmaps."""

from __future__ import annotations

from pathlib import Path

from mhattn.commands import non_negative_int, positive_int
from mhattn.course import counting, walkthrough


def add_parser(sub, name):
    p = sub.add_parser(name, help="walk one sentence through MultiHeadAttention(512, 8), printing every shape")
    p.add_argument("--sentence", default=walkthrough.SENTENCE, help="whitespace-tokenised text (default: %(default)r)")
    p.add_argument("--d-model", type=positive_int, default=512, help="model width d_model (default: %(default)s)")
    p.add_argument("--num-heads", type=positive_int, default=8, help="number of heads h (default: %(default)s)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed for the embedding table and the weights")
    p.add_argument("--out", type=Path, default=None, help="folder for attention_heads.png (needs matplotlib)")


def main(args) -> int:
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
        f"  often-quoted formula  {counting.count_block_diagonal(d, h):>9,} = h*3*(d_model/h)^2 + d_model^2:"
        " block-diagonal W_q/W_k/W_v, not the standard layer"
    )
    if args.out is not None:
        try:
            import matplotlib  # noqa: F401

            from mhattn.plots.attention import attention_heatmaps
        except ImportError:
            raise FileNotFoundError("--out needs matplotlib: pip install 'mhattn[course]'") from None

        args.out.mkdir(parents=True, exist_ok=True)
        title = f"MultiHeadAttention({d}, {h}): weights per head (untrained, seeded)"
        fig = attention_heatmaps(wt.weights[0], wt.tokens, title=title)
        path = args.out / "attention_heads.png"
        fig.savefig(path, dpi=110)
        print(f"\nheatmaps written to {path}")
    return 0
