"""Judging one generation batch on the main process: rollout rows -> whole `Group`s (consecutive, as TRL's
`RepeatSampler` yields them) -> `GroupScorer` (a persistent daemon-thread event loop, or `judge_workers`) ->
rewards, metrics and failure messages; and the collectives `gather_rows` and `share_from_main`. `start` returns
at once so judging overlaps TRL's log-prob passes; evaluation scores inside the method's `frozen_state()`.
`JudgeUsage` turns ledger snapshots into step metrics and totals that continue across a resume.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from accelerate.utils import broadcast_object_list, gather_object
from trl.trainer.utils import shutdown_event_loop_in_daemon, start_event_loop_in_daemon

from ..data.prompts import message_text, query_text
from ..judging.calls import LedgerSnapshot
from ..judging.requests import text_id
from ..rewards.base import Group, GroupResult, GroupRewardMethod
from .judge_workers import JudgeWorkers, combined_snapshot, register_references


def completion_text(completion: Any) -> str:
    """The assistant's text of a completion (plain string, or TRL's list of chat messages)."""
    if isinstance(completion, str):
        return completion
    return "".join(message_text(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant")


def reward_row(example: dict[str, Any], prompt: Any, completion: Any) -> dict[str, Any]:
    """The picklable part of one rollout that reward methods need; without a `query_id` column the id is the
    content address of the query text (as `data.prompts.query_id` gives it)."""
    query = query_text(prompt)
    query_id = example.get("query_id")
    return {
        "query_id": str(query_id) if query_id is not None else text_id(query),
        "query": query,
        "rubrics": example.get("rubrics") or (),
        "references": example.get("references"),
        "completion": completion_text(completion),
    }


def rows_to_groups(rows: Sequence[dict[str, Any]], group_size: int) -> list[Group]:
    """Cut the gathered rows into consecutive groups of `group_size` and check each is whole."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if len(rows) % group_size:
        raise ValueError(
            f"Got {len(rows)} rollouts, not a multiple of num_generations={group_size}: some group is incomplete. "
            "The global batch (per_device_train_batch_size x processes x steps_per_generation) must be a multiple "
            "of num_generations."
        )
    groups = []
    for start in range(0, len(rows), group_size):
        chunk = rows[start : start + group_size]
        first = chunk[0]
        for offset, row in enumerate(chunk):
            if row["query_id"] != first["query_id"] or row["query"] != first["query"]:
                raise ValueError(
                    f"Rollouts {start}..{start + group_size - 1} should be the {group_size} completions of one query, "
                    f"but rollout {start + offset} belongs to query {row['query_id']!r} and rollout {start} to "
                    f"{first['query_id']!r}. Groups must be consecutive (TRL's RepeatSampler does this); check for a "
                    "custom sampler, or query ids that are not unique per prompt."
                )
        references = first["references"]
        groups.append(
            Group(
                query_id=first["query_id"],
                query=first["query"],
                rubrics=first["rubrics"],
                completions=[row["completion"] for row in chunk],
                references=list(references) if references is not None else None,
            )
        )
    return groups


_MESSAGE_CHARS = 500


def first_failures(results: Sequence[GroupResult], limit: int = 3) -> list[str]:
    """Up to `limit` distinct failure messages: of neutral groups, then of partial failures (e.g. a fine call)."""
    messages: list[str] = []
    for result in results:
        found = [result.details["failure"]] if result.neutral and "failure" in result.details else []
        for message in found + list(result.details.get("partial_failures", ())):
            message = message if len(message) <= _MESSAGE_CHARS else message[:_MESSAGE_CHARS] + "..."
            if message not in messages:
                messages.append(message)
            if len(messages) == limit:
                return messages
    return messages


class FailureLog:
    """`due()` is True the first time and then at most once per `interval_s` seconds."""

    def __init__(self, interval_s: float = 60.0):
        self.interval_s = interval_s
        self._last: float | None = None

    def due(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < self.interval_s:
            return False
        self._last = now
        return True


TOTAL_SUFFIX = "_total"


class JudgeUsage:
    """Turns ledger snapshots into `judge/...` step metrics and `judge/..._total` metrics."""

    def __init__(self):
        self._offset = LedgerSnapshot()  # totals of the run before a resume
        self._base = LedgerSnapshot()  # the live ledgers' state when the offset was set
        self._previous = LedgerSnapshot()
        self._failure_kinds: set[str] = set()

    def step_metrics(self, current: LedgerSnapshot) -> dict[str, float]:
        step = current - self._previous
        self._previous = current
        total = self._total(current)
        self._failure_kinds |= set(total.failures)
        zero_failures = {kind: 0 for kind in self._failure_kinds}
        step.failures = {**zero_failures, **step.failures}
        total.failures = {**zero_failures, **total.failures}
        metrics = step.metrics("judge/")
        metrics.update({f"{key}{TOTAL_SUFFIX}": value for key, value in total.metrics("judge/").items()})
        return metrics

    def state_dict(self, current: LedgerSnapshot) -> dict[str, Any]:
        """Cumulative totals at `current` (JSON-able), saved with a checkpoint."""
        return asdict(self._total(current))

    def load_state_dict(self, state: dict[str, Any], current: LedgerSnapshot) -> None:
        """Continue totals from a checkpoint; `current` is the live ledgers' state now."""
        self._offset = LedgerSnapshot(**state)
        self._base = current
        self._previous = current
        self._failure_kinds = set(self._offset.failures)

    def _total(self, current: LedgerSnapshot) -> LedgerSnapshot:
        return self._offset + (current - self._base)


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
    """A batch being judged, or the error that prevented the start (raised by `finish`, where the others hear)."""

    groups: list = field(default_factory=list)
    future: Future | None = None
    frozen: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    error: BaseException | None = None


class GroupScorer:
    """Scores gathered rows with `method` on a persistent event loop, or with `workers` in judging worker
    processes (`judge_workers`; module docstring)."""

    def __init__(self, method: GroupRewardMethod, usage: JudgeUsage, workers: JudgeWorkers | None = None):
        self.method = method
        self.usage = usage
        self.workers = workers
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, rows: list[dict], group_size: int, *, mode: str, epoch: float, step: int) -> PendingScore:
        """Submit the scoring of `rows` and return at once; a failure to start is kept for `finish`."""
        pending = PendingScore()
        try:
            pending.groups = rows_to_groups(rows, group_size)
            register_references(self.method.judges, pending.groups)
            if mode == "eval":  # evaluation must not change buffers or other method state
                pending.frozen.enter_context(self.method.frozen_state())
            epoch = int(math.floor(epoch + 1e-9))
            if self.workers is not None:
                pending.future = self.workers.submit(self.method, pending.groups, epoch=epoch, step=step)
            else:
                coroutine = self.method.score(pending.groups, epoch=epoch, step=step)
                pending.future = asyncio.run_coroutine_threadsafe(coroutine, self._event_loop())
        except Exception as exc:
            pending.frozen.close()
            pending.error = exc
        return pending

    def finish(self, pending: PendingScore) -> Scored:
        """Wait for the scores: rewards in row order (NaN for a neutral group's), metrics, failure messages."""
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
            # A neutral group's rewards are NaN: TRL leaves NaN rows out of baselines and logged means and
            # gives them zero advantage; PPO's critic skips them too.
            rewards.extend(float(r) for r in result.rewards)
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


def gather_rows(rows: list[dict[str, Any]], group_size: int, process_index: int) -> list[dict[str, Any]]:
    """Every process's reward rows, in process order (a collective); a group may span processes."""
    return gather_object(compact_rows(rows, group_size, process_index * len(rows)))


@dataclass(frozen=True)
class _ScoringError:
    """What the main process broadcasts when scoring raised: the error as text (always picklable)."""

    message: str


def share_from_main(is_main: bool, score: Callable[[], T], what: str = "Reward scoring") -> T:
    """`score()` on the main process, broadcast to every process (a collective). If it raises, the main process
    re-raises and the others raise a `RuntimeError` quoting it, instead of waiting."""
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
    """Drop the rubrics and references of every row but its group's first (this slice starts at global row
    `offset`): a group's context crosses the gather once, not G times."""
    for i, row in enumerate(rows):
        if i > 0 and (offset + i) % group_size:
            row["rubrics"], row["references"] = (), None
    return rows
