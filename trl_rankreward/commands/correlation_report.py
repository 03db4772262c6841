"""`trl-rankreward correlation-report`: Pearson r of GenRM benchmark metrics with downstream RLHF scores."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

HELP = "Pearson r of GenRM metrics (L-Acc, F-Score, ...) with downstream RLHF scores, and a scatter PNG"


@dataclass
class CorrelationReportArguments:
    input_file: str = field(metadata={"help": "CSV or JSON: model, dataset (optional), metrics, downstream"})
    metrics: list[str] = field(default_factory=lambda: ["l_acc", "f_score"], metadata={"help": "metric columns"})
    output_file: str | None = field(default=None, metadata={"help": "JSON file for the correlations"})
    plot_file: str | None = field(default=None, metadata={"help": "PNG file for the scatter plot"})


def arguments():
    return (CorrelationReportArguments,)


def run(args: CorrelationReportArguments) -> int:
    from ..evaluation.correlation import correlations, format_correlations, load_records, scatter_plot

    records = load_records(args.input_file)
    results = correlations(records, metrics=args.metrics)
    print(format_correlations(results))
    if args.output_file:
        Path(args.output_file).write_text(json.dumps([dataclasses.asdict(c) for c in results], indent=2))
        print(f"wrote {args.output_file}")
    if args.plot_file:
        print(f"wrote {scatter_plot(records, results, args.plot_file, metrics=args.metrics)}")
    return 0
