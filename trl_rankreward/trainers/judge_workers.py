"""Judging in worker processes (`judge_workers` > 0), and `TrainingRecipe`, the one builder of a run's training
judge and reward method (torch- and TRL-free, so that a worker can use it).

The main process cuts a step into whole groups and routes each to the worker that owns its query (`owner`: a
stable hash of the query id), with the state those queries' scoring reads (`GroupRewardMethod.query_state`); a
worker (`python -m trl_rankreward.trainers.judge_workers`, its own event loop, judge and method, from the recipe)
scores them with the method's `score` and sends back the results, the queries' new state and its judge usage,
which the main process merges (`merge_query_state`, `JudgeLedger.add`). A query's groups go to one worker in
order, so a deterministic judge gives the in-process rewards, state and counts; the main process's method holds
the whole state, so checkpoints and resume are unchanged. `GroupScorer.start` returns at once (one I/O thread
per worker). A worker that dies or raises fails the batch with a `RuntimeError` naming it; workers ignore
SIGINT/SIGTERM and exit when closed or when the main process dies.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ..judging.calls import LedgerSnapshot
from ..judging.requests import Judge
from ..judging.server_settings import TRAINING_JUDGE, JudgeServerSettings, build_judge
from ..rewards.base import AnswerFormat, Group, GroupResult, GroupRewardMethod, RunContext
from ..rewards.options import MethodOptions
from ..rewards.registry import reward_method_class

_PICKLE = pickle.HIGHEST_PROTOCOL
_CLOSE_TIMEOUT_S = 10.0


def combined_snapshot(judges: Iterable[Any]) -> LedgerSnapshot:
    """Sum of the ledger snapshots of `judges` (judges without a `ledger` count nothing)."""
    total = LedgerSnapshot()
    for judge in judges:
        ledger = getattr(judge, "ledger", None)
        if ledger is not None:
            total = total + ledger.snapshot()
    return total


def register_references(judges, queries) -> None:
    """Hand each query's ranked references (a `Group`'s or an `EvalPrompt`'s) to judges that keep a
    reference table (EmbeddingJudge)."""
    for judge in judges:
        if hasattr(judge, "set_references"):
            for query in queries:
                if query.references:
                    judge.set_references(query.query_id, list(query.references))


# ---- the run's judge and method ---------------------------------------------------------------------------

class TokenLength:
    """`str -> int`: the number of tokens of a text under `tokenizer` (a processor's tokenizer too)."""

    def __init__(self, tokenizer):
        self.tokenizer = getattr(tokenizer, "tokenizer", tokenizer)

    def __call__(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class TrainingRecipe:
    """The one builder of a run's training judge and reward method, from picklable parts of the config (`of`): for
    the trainer (`judge_reward.build_training_judge`, `build_reward_method`) and each judging worker (`for_workers`)."""

    settings: JudgeServerSettings
    genrm: bool
    r_align_release: str | None
    method: str
    options: MethodOptions
    run: RunContext

    @classmethod
    def of(cls, config, tokenizer=None) -> TrainingRecipe:
        """The recipe of a `JudgeRewardGRPOConfig`; `tokenizer`: the policy's, whose token count is the length."""
        options = config.method_options()
        run = RunContext(
            answer_format=AnswerFormat(thinking=config.thinking_format),
            seed=config.seed,
            output_dir=config.output_dir,
            length_fn=TokenLength(tokenizer) if tokenizer is not None else None,
        )
        settings, release = TRAINING_JUDGE.settings(config), getattr(options, "r_align_release", None)
        return cls(settings, config.uses_genrm_judge(), release, config.reward_method, options, run)

    def for_workers(self, workers: int) -> TrainingRecipe:
        """One of `workers` workers' recipe: its share of the concurrency bounds, anchors in memory, no output
        directory (a worker's state lives for one batch; the main process's method holds the run's)."""
        settings, run = worker_settings(self.settings, workers), dataclasses.replace(self.run, output_dir=None)
        return dataclasses.replace(self, settings=settings, options=in_memory(self.options), run=run)

    def build_judge(self) -> Judge:
        """The judge, its servers checked now: a `GenRMJudge` when `genrm`, else an `LLMJudge` (the embedded
        `EmbeddingJudge` without URLs)."""
        if self.genrm:
            from ..rewards.genrm_reward import GenRMJudge

            return GenRMJudge.from_settings(self.settings, r_align_release=self.r_align_release)
        return build_judge(self.settings, embedded_without_urls=True)

    def build_method(self, judge: Judge) -> GroupRewardMethod:
        return reward_method_class(self.method).for_run(judge, self.options, self.run)


def worker_settings(settings: JudgeServerSettings, workers: int) -> JudgeServerSettings:
    """One worker's share of the judge settings: `max_concurrency` (and `max_concurrency_per_replica`) split
    over `workers`, rounded up, so that all workers together keep about the configured bound."""
    per_replica = settings.max_concurrency_per_replica
    return dataclasses.replace(settings, max_concurrency=-(-settings.max_concurrency // workers),
                               max_concurrency_per_replica=None if per_replica is None else -(-per_replica // workers))


def in_memory(options: MethodOptions) -> MethodOptions:
    """`options` with any anchor store in memory (a worker must not open the run's SQLite file)."""
    if getattr(options, "anchor_store", "memory") == "memory":
        return options
    return dataclasses.replace(options, anchor_store="memory", anchor_store_path=None)


def check_shardable(method: GroupRewardMethod) -> None:
    """A method with state must say which part of it a query's groups use (`query_state`), or workers would
    drop it; the error names the way out."""
    cls = type(method)
    if cls.state_dict is not GroupRewardMethod.state_dict and cls.query_state is GroupRewardMethod.query_state:
        raise ValueError(
            f"judge_workers > 0 needs a reward method whose state is per query (query_state / merge_query_state), "
            f"but {cls.__name__} keeps state without them; set judge_workers=0 to judge in the main process"
        )


# ---- the worker process ------------------------------------------------------------------------------------

@dataclass
class _Reply:
    """What a worker sends back for one batch: results in the order sent, the queries' new state, the judge
    usage of this batch; or `error` (a message: exceptions may not pickle)."""

    results: list[GroupResult] | None = None
    state: dict[str, Any] | None = None
    usage: LedgerSnapshot | None = None
    error: str | None = None


def serve_connection(descriptor: int) -> None:
    """A worker's life (`python -m trl_rankreward.trainers.judge_workers FD`): the recipe from the socket
    `descriptor`, the judge built on the first batch, then batches scored until closed."""
    connection = Connection(descriptor)
    recipe: TrainingRecipe = pickle.loads(connection.recv_bytes())
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    judge = None
    while True:
        try:
            payload = connection.recv_bytes()
        except (EOFError, OSError):  # the main process closed us or died
            break
        if not payload:
            break
        try:
            if judge is None:
                judge = recipe.build_judge()
            reply = loop.run_until_complete(_score(recipe, judge, *pickle.loads(payload)))
        except Exception as exc:
            reply = _Reply(error=f"{type(exc).__name__}: {exc}")
        try:
            connection.send_bytes(pickle.dumps(reply, _PICKLE))
        except (BrokenPipeError, OSError):
            break
    loop.close()


async def _score(recipe: TrainingRecipe, judge, groups: list[Group], state: dict, epoch: int, step: int) -> _Reply:
    method = recipe.build_method(judge)
    method.merge_query_state(state)
    register_references(method.judges, groups)
    before = combined_snapshot(method.judges)
    results = await method.score(groups, epoch=epoch, step=step)
    usage = combined_snapshot(method.judges) - before
    return _Reply(results, method.query_state(sorted({g.query_id for g in groups})), usage)


# ---- the main process's side -------------------------------------------------------------------------------

def owner(query_id: str, workers: int) -> int:
    """The worker that judges every group of `query_id`: a hash stable across processes and runs."""
    return zlib.crc32(query_id.encode("utf-8")) % workers


class WorkerBatch:
    """One batch being judged by the workers; `result()` (a `Future`'s) waits, writes the queries' new state
    and the judge usage into the main process's method, and returns the results in the groups' order."""

    def __init__(self, method: GroupRewardMethod, size: int):
        self.method = method
        self.size = size
        self.parts: list[tuple[int, list[int], Future]] = []  # (worker, group indices, its reply)

    def result(self) -> list[GroupResult]:
        results: list[GroupResult | None] = [None] * self.size
        replies = [(worker, indices, future.result()) for worker, indices, future in self.parts]
        for worker, _, reply in replies:
            if reply.error is not None:
                raise RuntimeError(f"Judging worker {worker} failed: {reply.error}")
        usage = LedgerSnapshot()
        for _, indices, reply in replies:
            for i, result in zip(indices, reply.results, strict=True):
                results[i] = result
            self.method.merge_query_state(reply.state)
            usage = usage + reply.usage
        ledger = next((j.ledger for j in self.method.judges if getattr(j, "ledger", None) is not None), None)
        if ledger is not None:
            ledger.add(usage)
        return results  # type: ignore[return-value]


class JudgeWorkers:
    """`count` judging worker processes built from `recipe` (module docstring); started on first use."""

    def __init__(self, recipe: TrainingRecipe, count: int):
        if count < 1:
            raise ValueError(f"judge_workers must be >= 1 for worker processes, got {count}")
        self.recipe = recipe
        self.count = count
        self._processes: list = []
        self._connections: list = []
        self._channels: list[threading.Lock] = []
        self._io: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def pids(self) -> list[int]:
        """The workers' process ids, once started (`benchmarks/judge_scale.py` reads their CPU time)."""
        return [process.pid for process in self._processes]

    def submit(self, method: GroupRewardMethod, groups: Sequence[Group], *, epoch: int, step: int) -> WorkerBatch:
        """Send each worker its groups and their queries' state; returns at once."""
        self._start()
        shares: list[list[int]] = [[] for _ in range(self.count)]
        for i, group in enumerate(groups):
            shares[owner(group.query_id, self.count)].append(i)
        batch = WorkerBatch(method, len(groups))
        for worker, indices in enumerate(shares):
            if indices:
                mine = [groups[i] for i in indices]
                state = method.query_state(sorted({g.query_id for g in mine}))
                payload = pickle.dumps((mine, state, epoch, step), _PICKLE)
                batch.parts.append((worker, indices, self._io.submit(self._round_trip, worker, payload)))
        return batch

    def _round_trip(self, worker: int, payload: bytes) -> _Reply:
        connection = self._connections[worker]
        try:
            with self._channels[worker]:  # one batch at a time on a pipe
                connection.send_bytes(payload)
                return pickle.loads(connection.recv_bytes())
        except (EOFError, OSError) as exc:
            process = self._processes[worker]
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1.0)
            return _Reply(error=f"the process (pid {process.pid}) is gone (exit code {process.returncode}): {exc!r}")

    def _start(self) -> None:
        """Start the workers: `python -m` this module, so a worker imports neither the training script nor torch,
        with this process's import path, over a socket pair; the recipe is their first message."""
        with self._lock:
            if self._io is not None:
                return
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            for _ in range(self.count):
                ours, theirs = socket.socketpair()
                with theirs:
                    process = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno())],
                                               pass_fds=[theirs.fileno()], env=env)  # fmt: skip
                connection = Connection(ours.detach())
                connection.send_bytes(pickle.dumps(self.recipe, _PICKLE))
                self._processes.append(process)
                self._connections.append(connection)
                self._channels.append(threading.Lock())
            self._io = ThreadPoolExecutor(self.count, thread_name_prefix="judge-worker-io")
            atexit.register(self.close)

    def close(self) -> None:
        """Tell every worker to exit and wait for them (killed after a grace period)."""
        with self._lock:
            for connection in self._connections:
                with contextlib.suppress(OSError):
                    connection.send_bytes(b"")
            for process in self._processes:
                try:
                    process.wait(timeout=_CLOSE_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for connection in self._connections:
                connection.close()
            if self._io is not None:
                self._io.shutdown(wait=False)
            self._processes, self._connections, self._channels, self._io = [], [], [], None


if __name__ == "__main__":
    # Run through the module's own name, so what a worker pickles refers to it, not to `__main__`.
    from trl_rankreward.trainers.judge_workers import serve_connection as _serve_connection

    _serve_connection(int(sys.argv[1]))
