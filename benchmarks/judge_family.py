"""`rank_buffer_plus`'s ablation rows across a family of simulated judges: which defaults hold for every judge.

The ablation (`rank_buffer_plus_ablation.ROWS`, rrc_scr, rank_buffer and listwise_group framing
them) was measured on one judge. Here every row runs on each member of a family of
`SimulatedJudge`s and on several benchmark seeds (`RewardBenchConfig.seed`: the simulated run,
the judge's noise and the display shuffles). The family crosses three switches:

- the per-text offset (`text_noise` 0 or 0.3), a perception error fixed per text;
- the listwise noise growth (`listwise_noise_growth` 0 or 0.05) with the texts shown;
- position bias: none, `position_bias` 0.5 on the seeded shuffled display the methods' requests
  are rendered with, or 0.5 on the canonical order (`display_shuffle=False`: the judge answers as
  if shown the texts in the order the method put them in the request).

A cell is the mean Kendall tau over seeds, with its standard error; "worst" is a row's lowest
cell, "mean rank" its rank among the rows (1 = best tau), averaged over the members; top-1
agreement is summarized the same way (mean over the members, and the lowest).

    python benchmarks/judge_family.py                                       # 12 judges x 5 seeds
    python benchmarks/judge_family.py --queries 10 --epochs 1 --seeds 1 --rows I
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from dataclasses import dataclass

from rank_buffer_plus_ablation import selected_rows

from trl_rankreward.evaluation.bench_config import BenchMethod, RewardBenchConfig
from trl_rankreward.evaluation.reward_bench import run_method

TEXT_NOISE, GROWTH, POSITION_BIAS = 0.3, 0.05, 0.5


@dataclass(frozen=True)
class Member:
    """One judge of the family: the `RewardBenchConfig` judge fields it sets."""

    text_noise: float
    listwise_noise_growth: float
    position_bias: float
    display_shuffle: bool = True

    @property
    def label(self) -> str:
        """`T` per-text offset, `G` noise growth, `P` position bias on shuffled displays, `P!` unshuffled."""
        parts = ["T" if self.text_noise else "", "G" if self.listwise_noise_growth else ""]
        parts.append("" if not self.position_bias else "P" if self.display_shuffle else "P!")
        return " ".join(p for p in parts if p) or "plain"


def family() -> list[Member]:
    """The 2 x 2 x 3 judges of the module docstring."""
    positions = [(0.0, True), (POSITION_BIAS, True), (POSITION_BIAS, False)]
    return [Member(t, g, p, shuffle) for t, g, (p, shuffle) in itertools.product((0.0, TEXT_NOISE), (0.0, GROWTH),
                                                                                  positions)]  # fmt: skip


@dataclass
class Cell:
    """One row on one member: its tau, top-1, calls and tokens per group, one value per seed."""

    tau: list[float]
    top1: list[float]
    calls: list[float]
    tokens: list[float]


def measure(rows, members: list[Member], seeds: list[int], *, queries: int, epochs: int, progress=print):
    """{(row label, member label): Cell} over `seeds`; a row that cannot run raises (no cell left empty)."""
    cells: dict[tuple[str, str], Cell] = {}
    for member, seed in itertools.product(members, seeds):
        config = RewardBenchConfig(queries=queries, epochs=epochs, seed=seed, text_noise=member.text_noise,
                                   listwise_noise_growth=member.listwise_noise_growth,
                                   position_bias=member.position_bias, display_shuffle=member.display_shuffle)  # fmt: skip
        for label, registry, options in rows:
            result = run_method(config, BenchMethod(label, registry, options))
            if isinstance(result, str):
                raise RuntimeError(f"row {label!r} on judge {member.label!r}, seed {seed}: {result}")
            row = result.row()
            cell = cells.setdefault((label, member.label), Cell([], [], [], []))
            cell.tau.append(row["kendall_tau"])
            cell.top1.append(row["top1"])
            cell.calls.append(row["calls_per_group"])
            cell.tokens.append(row["parsed_tokens_per_group"])
        progress(f"judge {member.label}, seed {seed}: done")
    return cells


def summarize(cells, row_labels: list[str], member_labels: list[str]) -> dict[str, dict]:
    """Per row: mean tau and standard error per member, worst member tau, mean rank, top-1 (mean over members,
    worst member), calls and tokens."""
    means = {key: statistics.fmean(c.tau) for key, c in cells.items()}
    ranks = {m: sorted(row_labels, key=lambda r: -means[r, m]) for m in member_labels}
    out = {}
    for r in row_labels:
        row_cells = [cells[r, m] for m in member_labels]
        out[r] = {
            "tau": [means[r, m] for m in member_labels],
            "se": [_se(c.tau) for c in row_cells],
            "worst": min(means[r, m] for m in member_labels),
            "mean_rank": statistics.fmean(ranks[m].index(r) + 1 for m in member_labels),
            "top1": statistics.fmean(statistics.fmean(c.top1) for c in row_cells),
            "top1_worst": min(statistics.fmean(c.top1) for c in row_cells),
            "calls": statistics.fmean(x for c in row_cells for x in c.calls),
            "tokens": statistics.fmean(x for c in row_cells for x in c.tokens),
        }
    return out


def _se(values: list[float]) -> float | None:
    return statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else None


def markdown(summary: dict[str, dict], member_labels: list[str]) -> str:
    """Rows = ablation rows, columns = members (tau ± standard error), then cost and the summary columns."""
    head = ["row", *member_labels, "calls/group", "tokens/group", "worst", "mean rank", "top-1 mean / worst"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, s in summary.items():
        taus = [f"{t:.3f}" + (f" ± {e:.3f}" if e is not None else "") for t, e in zip(s["tau"], s["se"])]
        lines.append(f"| {label} | " + " | ".join(taus) +
                     f" | {s['calls']:.2f} | {s['tokens']:,.0f} | {s['worst']:.3f} | {s['mean_rank']:.1f} "
                     f"| {s['top1']:.3f} / {s['top1_worst']:.3f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=80, help="Simulated queries per run.")
    parser.add_argument("--epochs", type=int, default=4, help="Epochs per run (the buffer evolves over them).")
    parser.add_argument("--seeds", type=int, default=5, help="Benchmark seeds 0..n-1 per judge.")
    parser.add_argument(
        "--rows", default="", help="Only the ablation rows whose labels start with these comma-separated prefixes."
    )
    args = parser.parse_args(argv)
    rows, members = selected_rows(args.rows), family()
    start = time.perf_counter()
    cells = measure(rows, members, list(range(args.seeds)), queries=args.queries, epochs=args.epochs,
                    progress=lambda line: print(line, file=sys.stderr, flush=True))  # fmt: skip
    member_labels = [m.label for m in members]
    print(f"{args.queries} queries x {args.epochs} epochs, G={RewardBenchConfig.group_size}, noise "
          f"{RewardBenchConfig.noise}, seeds 0-{args.seeds - 1}; Kendall tau, mean ± standard error over seeds\n")  # fmt: skip
    print(markdown(summarize(cells, [r[0] for r in rows], member_labels), member_labels))
    print(f"\nwall time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
