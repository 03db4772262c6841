"""Repeat a multi-process test under CPU load and count the runs that fail, e.g. a launch that trains and saves
and then aborts at interpreter exit (`terminate called without an active exception`, exit -6).

Busy-loop processes keep every core loaded while the test runs again and again. Such an abort once
showed up a few times in a hundred launches on a loaded 2-core machine (docs/performance.md has its
cause), so one run proves nothing.

    python benchmarks/exit_under_load.py --runs 20 \\
        tests/trainers/test_multiprocess.py::test_split_groups_are_judged_whole_once
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

from trl_rankreward.testing import run_in_group


def burn(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tests", nargs="+", help="pytest node ids to repeat")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="busy-loop processes (load)")
    args = parser.parse_args()
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=burn, args=(stop,), daemon=True) for _ in range(args.burners)]
    for process in burners:
        process.start()
    failures, start = [], time.perf_counter()
    try:
        for run in range(1, args.runs + 1):
            # its own process group, killed whole at its end: a worker a run left behind cannot load the next
            result = run_in_group([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.tests],
                                  timeout=None, capture_output=True, text=True)  # fmt: skip
            aborted = "terminate called" in result.stdout + result.stderr
            if result.returncode:
                failures.append((run, result.returncode, aborted))
            print(f"run {run}/{args.runs}: exit {result.returncode}{' (abort at exit)' if aborted else ''}", flush=True)
    finally:
        stop.set()
        for process in burners:
            process.join(timeout=5)
    print(f"\n| runs | failed | aborted at exit | load | seconds |\n|---|---|---|---|---|\n"
          f"| {args.runs} | {len(failures)} | {sum(a for *_, a in failures)} | {args.burners} busy processes | "
          f"{time.perf_counter() - start:.0f} |")  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
