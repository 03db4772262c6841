"""Judging at cluster scale on one machine: the trainer's judging path for a step of 8, 64 or 512 GPUs.

A step of `--gpus` GPUs has `--rollouts-per-gpu` rollouts per GPU (40: `examples/configs/rankbuffer_qwen3_8b.yaml`,
8 per device x 5 accumulation), in groups of G = `--group-size` (8), built as `_world` builds them
(~1.5 KB rollouts with a `<think>` block, seven ~1.2 KB references, three rubrics). They go through
the trainer's own path, `trainers.group_scoring.GroupScorer.start` then `finish`, with the method built
as a trainer builds it (RankBuffer with its SQLite anchor store, `buffer_init=references`, k0 = 4;
RRC-SCR; MatrixReward `protocol=explicit`) and the real client (`LLMJudge` over `OpenAICompatibleBackend`),
on the main process's event loop (`workers` 0) or in `judge_workers` worker processes.

The judge is `--replicas` capacity-limited scripted replicas (`testing.serve_judge_replica`: `--slots`
requests at once, each answered after `--latency` s), one child process each, so their CPU is not the
trainer's. A two-group warm-up of other queries starts the workers and opens connections; then one
step is measured (RankBuffer: each query's first visit, which builds its buffer from the references
and ranks coarse and fine: the calls of any later step):

- `main thread CPU`: `time.thread_time()` of the thread that calls `start` and `finish` (the training
  loop's thread in a trainer), over both calls;
- `process CPU`: `time.process_time()` of the training process, all its threads (the in-process path's
  event loop thread, or the worker path's I/O threads): what competes with training for the GIL;
- `worker CPU / call`: the worker processes' CPU (their /proc counters) per judge call;
- `wall`: from `start` until `finish` returned, against the log-prob `--window` (8 s: the two no-grad
  passes of a Qwen3-8B step, docs/performance.md); `fits` when wall <= window;
- `replica use`: calls x latency / (replicas x slots x wall), the share of the replicas' slot-time that
  answered this step's calls.

    PYTHONPATH=. python benchmarks/judge_scale.py                               # the table of docs/performance.md
    PYTHONPATH=. python benchmarks/judge_scale.py --methods rank_buffer --gpus 512 --workers 0 2
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import tempfile
import time

from benchmarks._world import references, trainer_rows
from trl_rankreward.judging.server_settings import JudgeServerSettings
from trl_rankreward.rewards.base import AnswerFormat, RunContext
from trl_rankreward.rewards.registry import reward_method_class
from trl_rankreward.testing.judge_replica import serve_judge_replica
from trl_rankreward.trainers.group_scoring import GroupScorer, JudgeUsage
from trl_rankreward.trainers.judge_workers import JudgeWorkers, TrainingRecipe

MODEL = "scripted-judge"
LABELS = {"rank_buffer": "RankBuffer", "rrc_scr": "RRC-SCR", "matrix": "MatrixReward explicit"}
_TICKS = os.sysconf("SC_CLK_TCK")


def _serve(slots: int, latency: float, connection) -> None:
    """Child process: one replica; send its URL, serve until told to quit."""
    with serve_judge_replica(slots=slots, latency_s=latency, model=MODEL) as url:
        connection.send(str(url))
        connection.recv()


@contextlib.contextmanager
def replicas(count: int, slots: int, latency: float):
    """`count` replicas, each in its own child process; yields (urls, pids)."""
    context = multiprocessing.get_context("spawn")
    pipes, processes = [], []
    for _ in range(count):
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(slots, latency, theirs), daemon=True)
        process.start()
        pipes.append(ours)
        processes.append(process)
    try:
        yield [p.recv() for p in pipes], [p.pid for p in processes]
    finally:
        for pipe in pipes:
            pipe.send("quit")
        for process in processes:
            process.join(timeout=10)


def cpu_seconds(pids) -> float:
    """User + system CPU of processes `pids` (Linux /proc)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def recipe(method: str, urls: list[str], concurrency: int, anchors: str) -> TrainingRecipe:
    """The judge and method a trainer with this config builds (the main process's: RankBuffer in `anchors`)."""
    options = reward_method_class(method).options_class
    values = {"rank_buffer": {"k0": 4, "buffer_init": "references", "anchor_store": "sqlite",
                              "anchor_store_path": anchors},
              "matrix": {"protocol": "explicit"}}.get(method, {})  # fmt: skip
    settings = JudgeServerSettings(base_urls=urls, model=MODEL, max_concurrency=concurrency, timeout_s=600,
                                   api_key_env="SCALE_BENCH_NO_KEY")  # fmt: skip
    run = RunContext(answer_format=AnswerFormat(thinking=True), seed=42)
    return TrainingRecipe(settings, False, None, method, options(**values), run)


def measure(method: str, gpus: int, workers: int, args, urls, replica_pids) -> dict:
    queries = gpus * args.rollouts_per_gpu // args.group_size
    rng = random.Random(0)
    qids = [f"q{i}" for i in range(queries)]
    refs = {q: references(q, rng) for q in qids}
    with tempfile.TemporaryDirectory() as tmp:
        main = recipe(method, urls, args.concurrency, os.path.join(tmp, "anchors.sqlite"))
        pool = JudgeWorkers(main.for_workers(workers), workers) if workers else None  # as the trainer builds it
        scorer = GroupScorer(main.build_method(main.build_judge()), JudgeUsage(), pool)
        try:
            warm = ["w0", "w1"]  # two groups of other queries: workers started, connections open
            warm_refs = {q: references(q, rng) for q in warm}
            scorer.finish(scorer.start(trainer_rows(warm, 0, args.group_size, rng, warm_refs), args.group_size,
                                       mode="train", epoch=0.0, step=0))  # fmt: skip
            rows = trainer_rows(qids, 0, args.group_size, rng, refs)
            worker_pids = pool.pids if pool else []
            cpu_workers, cpu_replicas = cpu_seconds(worker_pids), cpu_seconds(replica_pids)
            wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
            pending = scorer.start(rows, args.group_size, mode="train", epoch=0.0, step=1)
            scored = scorer.finish(pending)
            wall, thread = time.perf_counter() - wall, time.thread_time() - thread
            process = time.process_time() - process
            cpu_workers = cpu_seconds(worker_pids) - cpu_workers
            cpu_replicas = cpu_seconds(replica_pids) - cpu_replicas
        finally:
            if pool is not None:
                pool.close()
    calls = scored.metrics["judge/calls"]
    return {"method": LABELS.get(method, method), "gpus": gpus, "rollouts": len(rows), "calls": int(calls),
            "workers": workers, "thread": thread, "process": process,
            "worker_ms": 1000 * cpu_workers / calls if workers else None, "replica_ms": 1000 * cpu_replicas / calls,
            "wall": wall, "use": calls * args.latency / (len(urls) * args.slots * wall),
            "neutral": scored.neutral}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["rank_buffer", "rrc_scr", "matrix"])
    parser.add_argument("--gpus", nargs="+", type=int, default=[8, 64, 512])
    parser.add_argument("--workers", nargs="+", type=int, default=[0, 2])
    parser.add_argument("--rollouts-per-gpu", type=int, default=40)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--slots", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=1024,
                        help="judge_max_concurrency (the workers share it, as in a trainer)")
    parser.add_argument("--window", type=float, default=8.0, help="the step's log-prob window, seconds")
    parser.add_argument("--max-calls", type=int, default=40_000, help="skip a case estimated above this many calls")
    args = parser.parse_args()
    per_group = {"rank_buffer": 10, "rrc_scr": 28, "matrix": 84}  # G = 8: estimates, to skip huge cases
    print(f"{args.replicas} replicas x {args.slots} slots, {args.latency} s per call "
          f"({args.replicas * args.slots / args.latency:,.0f} calls/s); {os.cpu_count()} CPUs; window {args.window} s")
    print("| method | GPUs | rollouts | judge calls | workers | main thread CPU s | process CPU s | "
          "worker CPU ms/call | replica CPU ms/call | wall s | fits the window | replica use |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    with replicas(args.replicas, args.slots, args.latency) as (urls, replica_pids):
        for method in args.methods:
            for gpus in args.gpus:
                estimate = gpus * args.rollouts_per_gpu // args.group_size * per_group.get(method, 10)
                if estimate > args.max_calls:
                    print(f"| {LABELS.get(method, method)} | {gpus} | | ~{estimate:,} | skipped (--max-calls) |"
                          " | | | | | | |")
                    continue
                for workers in args.workers:
                    r = measure(method, gpus, workers, args, urls, replica_pids)
                    worker = f"{r['worker_ms']:.2f}" if r["worker_ms"] is not None else "-"
                    print(f"| {r['method']} | {gpus} | {r['rollouts']:,} | {r['calls']:,} | {workers} | "
                          f"{r['thread']:.2f} | {r['process']:.2f} | {worker} | {r['replica_ms']:.2f} | "
                          f"{r['wall']:.1f} | {'yes' if r['wall'] <= args.window else 'no'} | {r['use']:.0%} |",
                          flush=True)  # fmt: skip
                    if r["neutral"]:
                        print(f"  ({r['neutral']} neutral groups: the replicas failed calls)")


if __name__ == "__main__":
    main()
