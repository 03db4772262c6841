"""Judge pool throughput: capacity-limited replicas behind one `OpenAICompatibleBackend`.

Each replica is a `testing.serve_judge_replica` with `--slots` concurrent slots and a fixed
latency per request, so its capacity is `slots / latency` requests a second whatever it is sent;
the replicas run in a child process (as servers do on other machines), so their CPU does not
slow the client. `--requests` pointwise requests go out at once through `LLMJudge` (the real
client path: rendering, HTTP, parsing, retries), at most `--concurrency` in flight and
`--slots` per replica. Cases:

- `equal`: two replicas of latency L;
- `fastest alone`: one replica of latency L (the reference: a pool must never be slower);
- `unequal`: latencies L and 4L (with the defaults 0.1 s and 0.4 s: 160 + 40 requests/s);
- `unequal, round-robin`: the same replicas, request i sent to replica i mod 2 (the routing
  before least-in-flight), for comparison;
- `one dies mid-step`: two replicas of latency L; the second is killed after a quarter of the
  step's ideal time and stays down (its requests in flight fail as `transport` and are retried
  on the live one, as docs/reliability.md's fault table says);
- `one comes back`: step 1 with the second replica down, then it is started again, and after
  its rest (10 s) step 2 runs with both.

`ideal` is the sum of the live replicas' capacities (for the dying case, the requests' ideal
time with both up until the kill and one after it); `of ideal` = measured / ideal; `share` is
the fraction of answered requests each replica answered. A failed request (all tries failed) is
counted in `lost`; `failed tries` counts the tries that failed (and were retried). `client CPU`
is the judging process's CPU time per request (rendering, HTTP, parsing; the replicas run
elsewhere): what the main process of a training run spends per judge request.

    PYTHONPATH=. python benchmarks/judge_pool.py                  # 0.1 s / 0.4 s, 16 slots, 800 requests
    PYTHONPATH=. python benchmarks/judge_pool.py --latency 0.5    # on a machine whose CPU limits the client
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import time
from dataclasses import dataclass

from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend
from trl_rankreward.judging.llm_judge import LLMJudge
from trl_rankreward.judging.requests import JudgeFailure, PointwiseRequest
from trl_rankreward.testing.judge_replica import serve_judge_replica

REST_S = 10.0  # OpenAICompatibleBackend's rest of a replica that refused a connection


def _serve_replicas(latencies: list[float], slots: int, connection) -> None:
    """Child process: serve one replica per latency; answer `("urls",)`, `("stop", i)`, `("start", i)`,
    `("answered",)` on `connection` until `("quit",)`."""
    with contextlib.ExitStack() as stack:
        replicas = [stack.enter_context(serve_judge_replica(slots=slots, latency_s=s)) for s in latencies]
        while True:
            command = connection.recv()
            if command[0] == "quit":
                break
            if command[0] == "stop":
                replicas[command[1]].stop()
            elif command[0] == "start":
                replicas[command[1]].start()
            connection.send([str(r) for r in replicas] if command[0] == "urls" else [r.answered for r in replicas])


class Replicas:
    """The replicas of one case, served by a child process."""

    def __init__(self, latencies: list[float], slots: int):
        self.latencies, self.slots = latencies, slots
        self._connection, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(
            target=_serve_replicas, args=(latencies, slots, child), daemon=True
        )
        self._process.start()
        self.urls = self.ask("urls")

    def ask(self, *command):
        self._connection.send(command)
        return self._connection.recv()

    def capacity(self, index: int) -> float:
        return self.slots / self.latencies[index]

    def close(self) -> None:
        self._connection.send(("quit",))
        self._process.join(timeout=10)


@dataclass
class Step:
    seconds: float
    answered: list[int]  # per replica
    lost: int
    retried: int
    cpu_s: float  # the client process's CPU time


class RoundRobin:
    """The former routing, for comparison: request i to replica i mod n, each under its own bound."""

    def __init__(self, backends: list[OpenAICompatibleBackend]):
        self.backends = backends
        self._next = 0

    async def complete(self, messages, **decoding):
        backend = self.backends[self._next % len(self.backends)]
        self._next += 1
        return await backend.complete(messages, **decoding)


def run_step(judge: LLMJudge, replicas: Replicas, n: int, *, kill_after_s: float | None = None) -> Step:
    requests = [
        PointwiseRequest(query="Which answer is best?", query_id=f"q{i}", response=f"answer {i} with some words")
        for i in range(n)
    ]
    before, calls_before = replicas.ask("answered"), judge.ledger.calls

    async def main():
        async def kill():
            await asyncio.sleep(kill_after_s)
            await asyncio.to_thread(replicas.ask, "stop", 1)

        killer = asyncio.create_task(kill()) if kill_after_s is not None else None
        verdicts = await asyncio.gather(*(judge.judge(r) for r in requests))
        if killer is not None:
            await killer
        return verdicts

    start, cpu = time.perf_counter(), time.process_time()
    verdicts = asyncio.run(main())
    seconds, cpu_s = time.perf_counter() - start, time.process_time() - cpu
    answered = [a - b for a, b in zip(replicas.ask("answered"), before)]
    lost = sum(isinstance(v, JudgeFailure) for v in verdicts)
    retried = judge.ledger.calls - calls_before - (n - lost)
    return Step(seconds, answered, lost, retried, cpu_s)


def make_judge(replicas: Replicas, args, *, round_robin: bool = False) -> LLMJudge:
    per_replica = args.per_replica or args.slots
    options = dict(max_concurrency=args.concurrency, max_concurrency_per_replica=per_replica, timeout_s=30)
    if round_robin:
        backend = RoundRobin([OpenAICompatibleBackend(u, "scripted-judge", **options) for u in replicas.urls])
    else:
        backend = OpenAICompatibleBackend(replicas.urls, "scripted-judge", **options)
    return LLMJudge(backend)


def row(case: str, step: Step, n: int, ideal: float) -> str:
    rate = n / step.seconds
    total = sum(step.answered) or 1
    shares = " / ".join(f"{a / total:.2f}" for a in step.answered)
    return (f"| {case} | {step.seconds:.2f} | {rate:.1f} | {ideal:.1f} | {rate / ideal:.2f} | {shares} | "
            f"{step.retried} | {step.lost} | {1000 * step.cpu_s / n:.2f} |")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per request of the fast replica")
    parser.add_argument("--slow-factor", type=float, default=4.0, help="the slow replica's latency / the fast one's")
    parser.add_argument("--slots", type=int, default=16, help="concurrent slots per replica")
    parser.add_argument(
        "--per-replica", type=int, default=None, help="the client's bound per replica (default: --slots)"
    )
    parser.add_argument("--requests", type=int, default=800, help="requests per step")
    parser.add_argument("--concurrency", type=int, default=64, help="the client's bound over all replicas")
    args = parser.parse_args()
    fast, slow, n = args.latency, args.latency * args.slow_factor, args.requests
    print(f"{n} pointwise requests per step; {args.slots} slots per replica, at most {args.per_replica or args.slots} "
          f"in flight on one; latencies {fast:g} s and {slow:g} s\n")  # fmt: skip
    print(
        "| case | seconds | requests/s | ideal | of ideal | share per replica | failed tries | lost | client CPU ms/request |"
    )
    print("|---|---|---|---|---|---|---|---|---|")

    for case, latencies, round_robin in (
        ("equal", [fast, fast], False),
        ("fastest alone", [fast], False),
        ("unequal", [fast, slow], False),
        ("unequal, round-robin", [fast, slow], True),
    ):
        replicas = Replicas(latencies, args.slots)
        try:
            step = run_step(make_judge(replicas, args, round_robin=round_robin), replicas, n)
            ideal = sum(replicas.capacity(i) for i in range(len(latencies)))
            print(row(case, step, n, ideal), flush=True)
        finally:
            replicas.close()

    replicas = Replicas([fast, fast], args.slots)
    try:
        capacity = replicas.capacity(0)
        kill_at = n / (2 * capacity) / 4  # a quarter of the step's ideal time with both up
        ideal_seconds = kill_at + (n - 2 * capacity * kill_at) / capacity
        step = run_step(make_judge(replicas, args), replicas, n, kill_after_s=kill_at)
        print(row("one dies mid-step", step, n, n / ideal_seconds), flush=True)
    finally:
        replicas.close()

    replicas = Replicas([fast, fast], args.slots)
    try:
        judge = make_judge(replicas, args)
        replicas.ask("stop", 1)
        step = run_step(judge, replicas, n)
        print(row("one comes back: step 1, it is down", step, n, replicas.capacity(0)), flush=True)
        replicas.ask("start", 1)
        time.sleep(REST_S)
        step = run_step(judge, replicas, n)
        print(row("one comes back: step 2, it is up", step, n, 2 * replicas.capacity(0)), flush=True)
    finally:
        replicas.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
