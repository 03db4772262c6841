"""`trl-rankreward bench`: judge cost, latency and ranking fidelity of every reward method (docs/benchmarks.md).

Prints a markdown table and writes `bench.csv` and two PNG plots to `--output_dir`; `--write_docs PAGE` rewrites
the run's section of PAGE (one per preset) and saves its plots under `figures/benchmarks/` beside it. With a
training config (`--config TRAIN.yaml`) it prints that run's judge cost per step and per epoch instead
(`evaluation.config_cost`); training flags on the command line override the config."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HELP = "Benchmark the reward methods on a simulated run: judge calls, tokens, latency, ranking fidelity"
CONFIG_FILE = True
TRAINING_OVERRIDES = True


@dataclass
class BenchOutputArguments:
    _argument_group_name = "output"

    output_dir: str = field(default="outputs/bench", metadata={"help": "where bench.csv and the plots go"})
    workers: int = field(default=min(2, os.cpu_count() or 1), metadata={"help": "processes (one method each)"})
    plots: bool = field(default=True, metadata={"help": "write the PNG plots (--no_plots skips them)"})
    write_docs: str | None = field(
        default=None,
        metadata={
            "help": "also write this run's section of the benchmarks page (docs/benchmarks.md); the rest of the "
            "page is kept",
            "metavar": "PATH",
        },
    )


def arguments():
    from ..evaluation.bench_config import RewardBenchConfig
    from ..evaluation.config_cost import ConfigCostArguments

    return (RewardBenchConfig, BenchOutputArguments, ConfigCostArguments)


def config_values(path: str, values: dict) -> dict:
    """`--config FILE`: a training config is costed (`training_config`), its keys left to the estimate; any
    other file holds bench's own options."""
    from ..evaluation.config_cost import TRAINING_KEYS

    return {"training_config": path} if any(key in values for key in TRAINING_KEYS) else values


def run(config, args: BenchOutputArguments, cost) -> int:
    if cost.training_config:
        return _estimate(config, cost)
    from tqdm.auto import tqdm

    from ..evaluation import bench_report, report_files
    from ..evaluation.bench_config import selected_methods
    from ..evaluation.reward_bench import run_benchmark

    total = len(selected_methods(config.methods)) * config.queries * config.epochs
    start = time.perf_counter()
    with tqdm(total=total, unit="group", desc="bench", file=sys.stderr) as bar:
        results = run_benchmark(config, workers=args.workers, on_progress=bar.update, on_skip=bar.write)
    seconds = time.perf_counter() - start
    rows = [r.row() for r in results]
    if not rows:
        print("No method could run; see the notes above.", file=sys.stderr)
        return 1
    out = Path(args.output_dir)
    print(bench_report.markdown_table(rows))
    print(f"\nwrote {report_files.write_csv(rows, out / 'bench.csv', ['method'])}")
    if args.plots:
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
            "method_cpu_s": sum(r["cpu_s"] for r in rows),
            "cores": os.cpu_count() or 1,
            "load": os.getloadavg()[1],
        }
        name, page, figures = config.preset or "default", Path(args.write_docs), []
        try:
            figures = bench_report.plot_fidelity(rows, page.parent / "figures" / "benchmarks", prefix=f"{name}_")
        except ImportError as exc:
            print(f"no plots on the page: {exc} (pip install 'trl-rankreward[plots]')", file=sys.stderr)
        shown = [os.path.relpath(f, page.parent) for f in figures]
        section = bench_report.docs_section(
            rows, config, command=_command(config, args), timing=timing, name=name, figures=shown
        )
        for f in figures:
            print(f"wrote {f}")
        print(f"wrote {bench_report.write_docs_section(page, section, name=name)}")
    return 0


def _command(config, args: BenchOutputArguments) -> str:
    """The command line that reproduces this run: the preset, and the options that differ from its defaults."""
    from ..evaluation.bench_config import BENCH_PRESETS

    words = ["trl-rankreward", "bench"]
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    if config.preset:
        defaults.update(BENCH_PRESETS[config.preset])
        words += ["--preset", config.preset]
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name != "preset" and value != defaults[f.name]:
            flag = "--" + f.name
            words += [flag if value is True else "--no_" + f.name] if isinstance(value, bool) else [flag, str(value)]
    return shlex.join([*words, "--write_docs", args.write_docs])


def _estimate(config, cost) -> int:
    """Print the judge cost of the training config `cost.training_config`."""
    from ..evaluation.config_cost import estimate
    from ..scripts import config_keys, read_training_config

    path = cost.training_config
    parsed, values = read_training_config(path, cost.overrides, prog=f"trl-rankreward bench ({path})", here=False)
    print(estimate(path, parsed, config_keys(values, cost.overrides), cost, config)[0])
    return 0
