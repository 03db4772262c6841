"""Which idea of `rank_buffer_plus` buys how much ranking accuracy per judge call and token.

Each row adds one change to the row above it, from the paper's RankBuffer to the variant's
defaults, on the reward-method benchmark (`evaluation.reward_bench`, its default setting unless
flags say otherwise); `rrc_scr` (all pairs) and `listwise_group` (one call per group) frame them.
The S rows are the baselines of the soft-placement measurement in docs/benchmarks.md (the
option itself was removed: it did not pay).

    python benchmarks/rank_buffer_plus_ablation.py                    # the benchmark's default judge
    python benchmarks/rank_buffer_plus_ablation.py --text_noise 0 --listwise_noise_growth 0
"""

from __future__ import annotations

import argparse
import sys

from trl_rankreward.evaluation.bench_config import BenchMethod, RewardBenchConfig
from trl_rankreward.evaluation.reward_bench import run_method

PAPER_PLACEMENT = {"placement": "coarse", "extra_calls": 0, "extra_scope": "set", "max_anchors": None, "k0": 4}
ROWS = [
    ("rrc_scr (all pairs)", "rrc_scr", {}),
    ("rank_buffer (paper)", "rank_buffer", {}),
    ("listwise_group (one call)", "listwise_group", {}),
    ("A: paper placement + second look", "rank_buffer_plus", {**PAPER_PLACEMENT, "second_look": True}),
    ("B: joint placement, one look", "rank_buffer_plus",
     {**PAPER_PLACEMENT, "placement": "joint", "second_look": False}),
    ("C: B + second look", "rank_buffer_plus", {**PAPER_PLACEMENT, "placement": "joint"}),
    ("D: C + 1 extra look on disputes", "rank_buffer_plus", {**PAPER_PLACEMENT, "placement": "joint", "extra_calls": 1}),
    ("E: C + 2 extra looks", "rank_buffer_plus", {**PAPER_PLACEMENT, "placement": "joint", "extra_calls": 2}),
    ("F: E, extra looks over a window", "rank_buffer_plus",
     {**PAPER_PLACEMENT, "placement": "joint", "extra_calls": 2, "extra_scope": "window"}),
    ("G: E + two anchors", "rank_buffer_plus", {"extra_scope": "set"}),
    ("H: G with three anchors", "rank_buffer_plus", {"extra_scope": "set", "max_anchors": 3}),
    ("I: G, extra looks over a window (defaults)", "rank_buffer_plus", {}),
    ("S1: rank_buffer coarse_only (no fine calls)", "rank_buffer", {"buffer_variant": "coarse_only"}),
    ("S3: A + 1 extra look on disputes", "rank_buffer_plus", {**PAPER_PLACEMENT, "extra_calls": 1}),
]  # fmt: skip


def selected_rows(spec: str) -> list[tuple[str, str, dict]]:
    """The ROWS whose labels start with one of the comma-separated prefixes in `spec` (all when empty);
    `listwise_group` always, the base of the gain column."""
    prefixes = tuple(p for p in spec.split(",") if p)
    return [row for row in ROWS if not prefixes or row[0].startswith(prefixes) or row[1] == "listwise_group"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=RewardBenchConfig.queries)
    parser.add_argument("--text_noise", type=float, default=RewardBenchConfig.text_noise)
    parser.add_argument("--listwise_noise_growth", type=float, default=RewardBenchConfig.listwise_noise_growth)
    parser.add_argument(
        "--rows", default="", help="Only the rows whose labels start with these comma-separated prefixes."
    )
    args = parser.parse_args()
    config = RewardBenchConfig(queries=args.queries, text_noise=args.text_noise,
                               listwise_noise_growth=args.listwise_noise_growth)  # fmt: skip
    print(f"text_noise {config.text_noise}, listwise_noise_growth {config.listwise_noise_growth}, noise "
          f"{config.noise}, {config.queries} queries x {config.epochs} epochs, G={config.group_size}")  # fmt: skip
    print("| row | Kendall tau | top-1 | calls/group | tokens/group | tau per 1k tokens over listwise_group |")
    print("|---|---|---|---|---|---|")
    base = None
    for label, registry, options in selected_rows(args.rows):
        result = run_method(config, BenchMethod(label, registry, options))
        if isinstance(result, str):
            print(f"| {label} | failed: {result} | | | | |")
            continue
        row = result.row()
        tau, tokens = row["kendall_tau"], row["parsed_tokens_per_group"]
        if registry == "listwise_group":
            base = (tau, tokens)
        gain = f"{(tau - base[0]) / (tokens - base[1]) * 1000:+.4f}" if base and tokens > base[1] else "-"
        print(f"| {label} | {tau:.3f} | {row['top1']:.3f} | {row['calls_per_group']:.2f} | {tokens:,.0f} | {gain} |",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
