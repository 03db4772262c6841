"""Reward wall time per step under a judge latency model, for every available reward method.

The judge is an `OracleJudge` behind `LatencyJudge`: every call waits a latency drawn
uniformly from [--low, --high] seconds (seeded), at most --concurrency calls in flight
(an `asyncio.Semaphore`, like `OpenAICompatibleBackend(max_concurrency=64)`).

To keep the script short, latencies are multiplied by --scale (default 0.1: 0.5-2 s
becomes 50-200 ms). Our own CPU time is not scaled, so the script also times the same step
with zero latency (`cpu`) and reports `wall = (measured - cpu) / scale + cpu`, the step's
reward time at real latencies (the CPU part overlaps the waiting in reality, so this is
slightly pessimistic). `rounds` is exact: the same step is replayed with a gated
`OracleJudge` that releases calls only when nothing else can run, so it counts sequential
judge round trips. `floor` is the least any schedule could take: max(rounds * mean latency,
calls * mean latency / concurrency).

Timed step: the first step of epoch 1 (epoch 0 initializes RankBuffer's buffers).

    PYTHONPATH=. python benchmarks/judge_latency.py --queries-per-step 20 --group-size 8
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from _world import references, rows_to_groups, trainer_rows, world_quality

from trl_rankreward.rewards.registry import REWARD_METHODS, make_reward_method
from trl_rankreward.testing import OracleJudge


class LatencyJudge:
    """Wraps a judge: each call sleeps a seeded uniform latency * scale, `concurrency` at a time."""

    def __init__(self, inner, *, low: float, high: float, scale: float, concurrency: int, seed: int = 0):
        self.inner, self.low, self.high, self.scale, self.concurrency = inner, low, high, scale, concurrency
        self.ledger = inner.ledger
        self._rng = random.Random(seed)
        self._sem: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()  # each asyncio.run has its own loop
        if self._sem is None or self._sem[0] is not loop:
            self._sem = (loop, asyncio.Semaphore(self.concurrency))
        return self._sem[1]

    async def judge(self, request):
        async with self._semaphore():
            if self.scale:
                await asyncio.sleep(self._rng.uniform(self.low, self.high) * self.scale)
            return await self.inner.judge(request)


def step_groups(args, qids, epoch: int, seed: int):
    rng = random.Random(seed)
    refs = {q: references(q, random.Random(q)) for q in qids}
    return rows_to_groups(trainer_rows(qids, epoch, args.group_size, rng, refs), args.group_size)


def timed_step(name: str, judge, args, qids) -> tuple[float, int]:
    """Warm-up epoch 0 step, then the timed epoch-1 step: (seconds, judge requests)."""
    method = make_reward_method(name, judge, seed=args.seed)
    asyncio.run(method.score(step_groups(args, qids, 0, args.seed), epoch=0, step=0))
    groups = step_groups(args, qids, 1, args.seed + 1)
    before = judge.ledger.snapshot().calls
    t0 = time.perf_counter()
    asyncio.run(method.score(groups, epoch=1, step=1))
    return time.perf_counter() - t0, judge.ledger.snapshot().calls - before


def count_rounds(name: str, args, qids) -> int:
    judge = OracleJudge(world_quality, gated=True)
    method = make_reward_method(name, judge, seed=args.seed)
    asyncio.run(judge.run_in_rounds(method.score(step_groups(args, qids, 0, args.seed), epoch=0, step=0)))
    judge.rounds = 0
    groups = step_groups(args, qids, 1, args.seed + 1)
    asyncio.run(judge.run_in_rounds(method.score(groups, epoch=1, step=1)))
    return judge.rounds


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries-per-step", type=int, default=20)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--low", type=float, default=0.5, help="least judge latency, seconds")
    p.add_argument("--high", type=float, default=2.0, help="largest judge latency, seconds")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--scale", type=float, default=0.1, help="latencies are multiplied by this while running")
    p.add_argument("--methods", nargs="+", default=None, help=f"default: every available one of {REWARD_METHODS}")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    qids = [f"q{i}" for i in range(args.queries_per_step)]
    mean = (args.low + args.high) / 2

    print(f"{args.queries_per_step} queries x {args.group_size} rollouts; judge latency U[{args.low}, {args.high}] s, "
          f"concurrency {args.concurrency}; run at scale {args.scale}")  # fmt: skip
    head = f"{'method':<15}{'calls':>7}{'rounds':>8}{'cpu s':>8}{'measured':>10}{'wall s':>9}{'floor s':>9}"
    print(head)
    print("-" * len(head))
    for name in args.methods or REWARD_METHODS:
        try:
            rounds = count_rounds(name, args, qids)
        except ImportError as exc:
            print(f"{name:<15}skipped: {exc}")
            continue
        kw = dict(low=args.low, high=args.high, concurrency=args.concurrency, seed=args.seed)
        cpu, _ = timed_step(name, LatencyJudge(OracleJudge(world_quality), scale=0.0, **kw), args, qids)
        measured, calls = timed_step(name, LatencyJudge(OracleJudge(world_quality), scale=args.scale, **kw), args, qids)
        wall = max(measured - cpu, 0.0) / args.scale + cpu
        floor = max(rounds * mean, calls * mean / args.concurrency)
        print(f"{name:<15}{calls:>7}{rounds:>8}{cpu:>8.3f}{measured:>10.3f}{wall:>9.2f}{floor:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
