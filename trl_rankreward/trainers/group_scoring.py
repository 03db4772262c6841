"""`GroupScorer`: the main process's side of judging one generation batch, startable early.

`start` cuts the gathered rollout rows into whole groups and submits the reward method's
`score` coroutine to one persistent event loop in a daemon thread (HTTP clients stay bound
to it); it returns at once with a `PendingScore`. `finish` waits for the result and turns it
into rewards, metrics and failure messages. Between the two the training thread is free:
the trainer starts judging right after generation and finishes it in `_calculate_rewards`,
so the judge works while the old-policy and reference log-prob passes run.

Evaluation scores inside the method's `frozen_state()`, entered in `start` and left in
`finish` (also when scoring fails), so evaluation never changes training state.

Around it, the collectives every caller shares (the trainer, `reward_func.GroupRewardFunction`,
the win rate's `judge_eval`): `gather_rows` and `share_from_main`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import math
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accelerate.utils import broadcast_object_list, gather_object
from trl.trainer.utils import shutdown_event_loop_in_daemon, start_event_loop_in_daemon

from ..rewards.base import GroupRewardMethod
from .failures import first_failures
from .grouping import rows_to_groups
from .judge_usage import JudgeUsage, combined_snapshot

T = TypeVar("T")


@dataclass(frozen=True)
class Scored:
    """What the main process broadcasts after scoring one batch."""

    rewards: list[float]
    metrics: dict[str, float]
    neutral: int
    groups: int
    failures: list[str]


@dataclass
class PendingScore:
    """A batch being judged: its groups, the running future, the frozen-state context, or the error
    that prevented the start (raised by `finish`, where the other processes are told)."""

    groups: list = field(default_factory=list)
    future: Future | None = None
    frozen: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    error: BaseException | None = None


class GroupScorer:
    """Scores gathered rows with `method` on a persistent event loop (module docstring)."""

    def __init__(self, method: GroupRewardMethod, usage: JudgeUsage):
        self.method = method
        self.usage = usage
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, rows: list[dict], group_size: int, *, mode: str, epoch: float, step: int) -> PendingScore:
        """Submit the scoring of `rows` and return at once; a failure to start is kept for `finish`."""
        pending = PendingScore()
        try:
            pending.groups = rows_to_groups(rows, group_size)
            register_references(self.method.judges, pending.groups)
            if mode == "eval":  # evaluation must not change buffers or other method state
                pending.frozen.enter_context(self.method.frozen_state())
            coroutine = self.method.score(pending.groups, epoch=int(math.floor(epoch + 1e-9)), step=step)
            pending.future = asyncio.run_coroutine_threadsafe(coroutine, self._event_loop())
        except Exception as exc:
            pending.frozen.close()
            pending.error = exc
        return pending

    def finish(self, pending: PendingScore) -> Scored:
        """Wait for the scores; rewards in row order (NaN for a neutral group's), this batch's metrics and
        failure messages."""
        if pending.error is not None:
            raise pending.error
        with pending.frozen:
            results = pending.future.result()
        rewards = []
        for group, result in zip(pending.groups, results, strict=True):
            if len(result.rewards) != group.size:
                raise ValueError(
                    f"{type(self.method).__name__} returned {len(result.rewards)} rewards for query "
                    f"{group.query_id!r} with {group.size} completions; expected one reward per completion"
                )
            # A neutral group (its judging failed) is unscorable, not "reward 0": TRL leaves NaN rows out
            # of baselines and logged means and gives them zero advantage; PPO's critic skips them too.
            rewards.extend(math.nan if result.neutral else float(r) for r in result.rewards)
        metrics = dict(self.method.step_metrics(results))
        metrics.update(self.usage.step_metrics(combined_snapshot(self.method.judges)))
        return Scored(rewards, metrics, sum(r.neutral for r in results), len(results), first_failures(results))

    def run(self, coroutine) -> Any:
        """Run `coroutine` on the judging loop (where the judges' clients live) and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._event_loop()).result()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            thread, loop, ready = start_event_loop_in_daemon(name="JudgeReward-AsyncLoop")
            ready.wait()
            atexit.register(shutdown_event_loop_in_daemon, thread, loop)
            self._loop = loop
        return self._loop


def register_references(judges, queries) -> None:
    """Hand each query's ranked references (a `Group`'s or an `EvalPrompt`'s) to judges that keep a
    reference table (EmbeddingJudge)."""
    for judge in judges:
        if hasattr(judge, "set_references"):
            for query in queries:
                if query.references:
                    judge.set_references(query.query_id, list(query.references))


def gather_rows(rows: list[dict[str, Any]], group_size: int, process_index: int) -> list[dict[str, Any]]:
    """Every process's reward rows, in process order (a collective: every process calls it). Each
    process's slice starts at global row `process_index * len(rows)`; a group may span processes."""
    return gather_object(compact_rows(rows, group_size, process_index * len(rows)))


@dataclass(frozen=True)
class _ScoringError:
    """What the main process broadcasts when scoring raised: the error as text (always picklable)."""

    message: str


def share_from_main(is_main: bool, score: Callable[[], T], what: str = "Reward scoring") -> T:
    """`score()` on the main process, broadcast to every process (a collective). If it raises, the main
    process re-raises and the others raise a `RuntimeError` quoting it ("`what` failed ..."), instead of waiting."""
    payload: list[Any] = [None]
    if is_main:
        try:
            payload = [score()]
        except Exception as exc:
            # A message, not the exception: the broadcast pickles it, and an exception holding a
            # client or a lock would fail to pickle here while the others wait in the broadcast.
            broadcast_object_list([_ScoringError(f"{type(exc).__name__}: {exc}")], from_process=0)
            raise
    broadcast_object_list(payload, from_process=0)
    if isinstance(payload[0], _ScoringError):
        raise RuntimeError(f"{what} failed on the main process: {payload[0].message}")
    return payload[0]


def compact_rows(rows: list[dict[str, Any]], group_size: int, offset: int) -> list[dict[str, Any]]:
    """Drop the rubrics and references of every row but the first of its group in this process's
    slice (which starts at global row `offset`): a group's context then crosses the gather once
    instead of G times, and `rows_to_groups` reads it from each group's first row."""
    for i, row in enumerate(rows):
        if i > 0 and (offset + i) % group_size:
            row["rubrics"], row["references"] = (), None
    return rows
