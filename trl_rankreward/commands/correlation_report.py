"""`trl-rankreward correlation-report`: Pearson r of GenRM benchmark metrics with downstream RLHF scores.

Example:
    trl-rankreward correlation-report --input genrms.csv --metrics l_acc f_score \\
        --output-json corr.json --plot corr.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

HELP = "Pearson r of GenRM metrics (L-Acc, F-Score, ...) with downstream RLHF scores, and a scatter PNG"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, help="CSV or JSON: model, dataset (optional), metrics, downstream")
    parser.add_argument("--metrics", nargs="+", default=["l_acc", "f_score"], help="metric columns to correlate")
    parser.add_argument("--output-json", default=None, help="write the correlations here")
    parser.add_argument("--plot", default=None, help="write the scatter PNG here")


def run(args: argparse.Namespace) -> int:
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
