"""`trl-rankreward compare RUN [RUN ...]`: training runs side by side (docs/compare.md).

Prints the summary table and writes compare.md, compare.csv and compare.png to `--output_dir`; runs that logged
`eval/win_rate` get a second table and win_rate.png (the win rate at equal training judge token budgets)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..evaluation.win_rate import DEFAULT_TARGETS

HELP = (
    "Compare training runs: judge win rate at equal training judge tokens, reward std, judge calls and tokens "
    "per step, neutral groups, buffer size (tables + PNG)"
)


@dataclass
class CompareArguments:
    runs: list[str] = field(
        metadata={
            "positional": True,
            "metavar": "RUN",
            "help": "output directory, checkpoint, trainer_state.json, or W&B run directory / .wandb file",
        }
    )
    labels: list[str] | None = field(
        default=None, metadata={"help": "one name per RUN, in order (default: each run's directory name)"}
    )
    output_dir: str = field(
        default="outputs/compare", metadata={"help": "where compare.md, compare.csv and compare.png go"}
    )
    plots: bool = field(default=True, metadata={"help": "write compare.png (--no_plots skips it)"})
    budgets: list[float] | None = field(
        default=None,
        metadata={
            "help": "training judge token budgets at which to compare win rates (default: 1/4, 1/2, 3/4 and all of "
            "the largest budget every run reached)"
        },
    )
    win_rate_targets: list[float] = field(
        default_factory=lambda: list(DEFAULT_TARGETS),
        metadata={"help": "win rates whose training judge token cost to report"},
    )


def arguments():
    return (CompareArguments,)


def run(args: CompareArguments) -> int:
    from pathlib import Path

    from ..evaluation import compare, report_files, run_history, win_rate

    runs = run_history.load_runs(args.runs, args.labels)
    rows = [compare.summarize(r) for r in runs]
    curves = [win_rate.win_rate_curve(r) for r in runs]
    evaluated = any(curves)
    if evaluated:
        budgets = args.budgets or win_rate.default_budgets(curves)
        quality = win_rate.win_rate_table(runs, budgets, args.win_rate_targets)
    else:
        quality = win_rate.NO_EVALUATION
    table = f"{compare.markdown_table(rows)}\n\n{quality}"
    print(table)
    print()
    for run, row in zip(runs, rows):
        runtime = f"; train_runtime {row['train_runtime_s']:.0f} s" if row["train_runtime_s"] is not None else ""
        # steps as the table counts them (the last logged step); entries can be fewer (logging_steps > 1)
        print(
            f"{run.label}: {run.last_step} steps ({row['steps_after_epoch_1']} after epoch 1) in {len(run.entries)} "
            f"log entries from {run.source}{runtime}"
        )
    print(compare.COLUMN_NOTE)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(table + "\n", encoding="utf-8")
    print(f"wrote {out / 'compare.md'}")
    print(f"wrote {report_files.write_csv(rows, out / 'compare.csv', [key for key, _, _ in compare.COLUMNS])}")
    if args.plots:
        try:
            print(f"wrote {compare.plot_runs(runs, out)}")
            if evaluated:
                print(f"wrote {win_rate.plot_win_rate(runs, out)}")
        except ImportError as exc:
            print(f"no plot: {exc}", file=sys.stderr)
    return 0
