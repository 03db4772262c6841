"""`trl-rankreward correlation-report`: Pearson r of GenRM benchmark metrics with downstream RLHF scores.

Example:
    trl-rankreward correlation-report --input genrms.csv --metrics l_acc f_score \\
        --output_json corr.json --plot corr.png
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

HELP = "Pearson r of GenRM metrics (L-Acc, F-Score, ...) with downstream RLHF scores, and a scatter PNG"


@dataclass
class CorrelationReportArguments:
    input: str = field(metadata={"help": "CSV or JSON: model, dataset (optional), metrics, downstream"})
    metrics: list[str] = field(default_factory=lambda: ["l_acc", "f_score"], metadata={"help": "metric columns"})
    output_json: str | None = field(default=None, metadata={"help": "write the correlations here"})
    plot: str | None = field(default=None, metadata={"help": "write the scatter PNG here"})


def arguments():
    return (CorrelationReportArguments,)


def run(args: CorrelationReportArguments) -> int:
    from ..evaluation.correlation import correlations, format_correlations, load_records, scatter_plot

    records = load_records(args.input)
    results = correlations(records, metrics=args.metrics)
    print(format_correlations(results))
    if args.output_json:
        Path(args.output_json).write_text(json.dumps([dataclasses.asdict(c) for c in results], indent=2))
        print(f"wrote {args.output_json}")
    if args.plot:
        print(f"wrote {scatter_plot(records, results, args.plot, metrics=args.metrics)}")
    return 0
