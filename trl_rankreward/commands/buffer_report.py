"""`trl-rankreward buffer-report CHECKPOINT [--plot_file PNG]`: RankBuffer buffer statistics."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

HELP = "Print RankBuffer buffer statistics of a checkpoint and plot anchor sources (paper Figure 6)"


@dataclass
class BufferReportArguments:
    checkpoint: str = field(
        metadata={"positional": True, "help": "trainer checkpoint directory (or its reward_method_state.json)"}
    )
    plot_file: str | None = field(
        default=None,
        metadata={"help": "PNG to write (default: CHECKPOINT/buffer_report.png; 'none' to skip the figure)"},
    )
    bins: int = field(default=10, metadata={"help": "normalized-position bins of panel (b)"})


def arguments():
    return (BufferReportArguments,)


def run(args: BufferReportArguments) -> int:
    from ..evaluation.buffer_report import buffer_report, format_report, load_buffer_state, plot_report

    report = buffer_report(load_buffer_state(args.checkpoint), bins=args.bins)
    print(format_report(report))
    output = args.plot_file
    if output is None:
        folder = args.checkpoint if os.path.isdir(args.checkpoint) else os.path.dirname(args.checkpoint)
        output = os.path.join(folder or ".", "buffer_report.png")
    if output.lower() != "none":
        plot_report(report, output)
        print(f"\nfigure written to {output}")
    return 0
