"""`trl-rankreward bench`: judge cost, latency and ranking fidelity of every reward method.

    trl-rankreward bench                                   # default setting, all methods
    trl-rankreward bench --queries 20 --epochs 2 --methods pointwise,rank_buffer
    trl-rankreward bench --write-docs docs/benchmarks.md   # regenerate its section of the docs page

Prints a markdown table, writes `bench.csv` and two PNG plots to `--output-dir`. Every
`RewardBenchConfig` field is an option (see `trl_rankreward.evaluation.reward_bench`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import time
from pathlib import Path

HELP = "Benchmark the reward methods on a simulated run: judge calls, tokens, latency, ranking fidelity"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..evaluation.reward_bench import RewardBenchConfig

    for f in dataclasses.fields(RewardBenchConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=f.metadata["help"])
        else:
            kind = {"int": int, "float": float}.get(f.type, str)
            parser.add_argument(flag, type=kind, default=f.default, help=f.metadata["help"] + " (default: %(default)s)")
    parser.add_argument("--output-dir", default="outputs/bench", help="Where bench.csv and the plots go.")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="Processes (one method each).")
    parser.add_argument("--no-plots", action="store_true", help="Skip the PNG plots.")
    parser.add_argument(
        "--write-docs",
        metavar="PATH",
        help="Also write this run's section of the benchmarks page (docs/benchmarks.md); the rest of the page is kept.",
    )


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from ..evaluation import bench_report
    from ..evaluation.reward_bench import RewardBenchConfig, run_benchmark, selected_methods

    config = RewardBenchConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(RewardBenchConfig)})
    total = len(selected_methods(config.methods)) * config.queries * config.epochs
    start, cpu_start = time.perf_counter(), time.process_time()
    with tqdm(total=total, unit="group", desc="bench", file=sys.stderr) as bar:
        results = run_benchmark(config, workers=args.workers, on_progress=bar.update, on_skip=bar.write)
    seconds = time.perf_counter() - start
    rows = [r.row() for r in results]
    if not rows:
        print("No method could run; see the notes above.", file=sys.stderr)
        return 1
    out = Path(args.output_dir)
    print(bench_report.markdown_table(rows))
    print(f"\nwrote {bench_report.write_csv(rows, out / 'bench.csv')}")
    if not args.no_plots:
        try:
            for path in bench_report.plot_fidelity(rows, out):
                print(f"wrote {path}")
        except ImportError as exc:
            print(f"no plots: {exc} (pip install 'trl-rankreward[plots]')", file=sys.stderr)
    print(f"{len(rows)} methods in {seconds:.0f} s with {args.workers} worker(s)")
    if args.write_docs:
        timing = {
            "wall_s": seconds,
            "workers": args.workers,
            "cpu_s_main": time.process_time() - cpu_start,
            "method_cpu_s": sum(r["cpu_s"] for r in rows),
            "cores": os.cpu_count() or 1,
            "load": os.getloadavg()[1],
        }
        section = bench_report.docs_section(rows, config, command=_command(args, config), timing=timing)
        print(f"wrote {bench_report.write_docs_section(args.write_docs, section)}")
    return 0


def _command(args: argparse.Namespace, config) -> str:
    """The command line that reproduces this run: the options that differ from their defaults."""
    from ..evaluation.reward_bench import RewardBenchConfig

    words = ["trl-rankreward", "bench"]
    for f in dataclasses.fields(RewardBenchConfig):
        value = getattr(config, f.name)
        if value != f.default:
            flag = "--" + f.name.replace("_", "-")
            words += [flag if value is True else "--no-" + flag[2:]] if isinstance(value, bool) else [flag, str(value)]
    return shlex.join([*words, "--write-docs", args.write_docs])
