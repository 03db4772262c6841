"""`RewardRunState`: what a judged run keeps beside its reward method (`JudgeRewardGRPOTrainer` and
`as_reward_func`): judge usage totals (`judge/*_total` continue across a resume), the circuit breaker and the
neutral-group count (recorded on every process, so all stop at the same step), rate-limited failure messages,
saved with every checkpoint (`judge_usage.json`). The judge journal (`judge_journal.jsonl`, appended after every
scored batch) lets a resume count the calls of steps a crash lost. The breaker trips when every group was neutral
in `max_failed_batches` consecutive batches, or more than `max_neutral_fraction` of the last `window` batches'.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field, fields

from transformers.utils import logging

from .._gc import paused_gc
from ..evaluation.step_counts import step_counts
from ..judging.calls import LedgerSnapshot
from ..rewards.base import GroupRewardMethod
from ..rewards.state_files import (
    METHOD_STATE_NAME,
    CheckpointStateError,
    corrupt_entry,
    read_json,
    remove_write_debris,
    write_json_atomic,
)
from .group_scoring import FailureLog, JudgeUsage, Scored, combined_snapshot

_QUOTED = 3


@dataclass
class JudgeCircuitBreaker:
    """Counts neutral groups per batch and decides when judging has failed for too long (module docstring);
    `max_failed_batches=0` or `max_neutral_fraction=1.0` turns a rule off."""

    max_failed_batches: int = 3
    window: int = 20
    max_neutral_fraction: float = 0.5
    _failed_streak: int = field(default=0, init=False)
    _recent: deque = field(default_factory=deque, init=False)
    _messages: list[str] = field(default_factory=list, init=False)
    _tripped: str | None = field(default=None, init=False)

    def __post_init__(self):
        """The one check of the thresholds; errors name the `judge_*` settings users set."""
        if self.max_failed_batches < 0:
            raise ValueError(f"judge_stop_after_failed_batches must be >= 0, got {self.max_failed_batches}")
        if self.window < 1:
            raise ValueError(f"judge_failure_window must be >= 1, got {self.window}")
        if not 0.0 <= self.max_neutral_fraction <= 1.0:
            raise ValueError(f"judge_max_neutral_fraction must be in [0, 1], got {self.max_neutral_fraction}")

    @property
    def tripped(self) -> bool:
        return self._tripped is not None

    def record(self, neutral: int, groups: int, failures: list[str]) -> bool:
        """Add one batch's counts and failure messages; True when this batch trips the breaker."""
        if groups <= 0 or self.tripped:
            return False
        self._failed_streak = self._failed_streak + 1 if neutral == groups else 0
        self._recent.append((neutral, groups))
        if len(self._recent) > self.window:
            self._recent.popleft()
        if not any(n for n, _ in self._recent):
            self._messages.clear()  # a clean window: forget the last stretch's messages
        for message in failures:
            if len(self._messages) < _QUOTED and message not in self._messages:
                self._messages.append(message)
        if self.max_failed_batches and self._failed_streak >= self.max_failed_batches:
            self._tripped = f"every group was neutral in {self._failed_streak} consecutive generation batches"
        elif len(self._recent) == self.window and self.max_neutral_fraction < 1.0:
            bad, total = (sum(column) for column in zip(*self._recent, strict=True))
            if bad / total > self.max_neutral_fraction:
                self._tripped = (f"{bad} of {total} groups ({bad / total:.0%}) were neutral over the last {self.window} "
                                 f"generation batches (limit {self.max_neutral_fraction:.0%})")  # fmt: skip
        return self.tripped

    def reason(self) -> str:
        """Why it tripped, with the first failure messages of the failing stretch."""
        if not self.tripped:
            return ""
        quoted = "\n".join(f"  - {m}" for m in self._messages) or "  (no failure message was recorded)"
        return f"Judging keeps failing: {self._tripped}. First failures:\n{quoted}"

    def state_dict(self) -> dict:
        return {"failed_streak": self._failed_streak, "recent": [list(r) for r in self._recent]}

    def load_state_dict(self, state: dict) -> None:
        self._failed_streak = int(state.get("failed_streak", 0))
        self._recent = deque((int(n), int(g)) for n, g in state.get("recent", ()))


class JudgeFailureError(RuntimeError):
    """The judge kept failing (the breaker tripped); a checkpoint was saved before this was raised."""


logger = logging.get_logger(__name__)

JUDGE_USAGE_NAME = "judge_usage.json"
#: the judge bill, appended after every scored batch, in output_dir (module docstring)
JUDGE_JOURNAL_NAME = "judge_journal.jsonl"


@dataclass(frozen=True)
class Restored:
    """What `RewardRunState.load` restored from `checkpoint`, for `resume_message`."""

    checkpoint: str
    method_state: bool  # False: the method started afresh (stateless, or allowed)
    method_summary: dict[str, float] = field(default_factory=dict)
    judge_totals: dict | None = None  # None: the checkpoint held no judge_usage.json
    neutral_groups: int = 0
    journal_calls: int = 0  # judge calls after the checkpoint, counted from the journal (steps a crash lost)


class RewardRunState:
    """Judge totals, circuit breaker and neutral-group count of one run, saved with its checkpoints. `method` is
    None off the scoring process; `fresh_setting` (named in the error) lets a resume start the method afresh."""

    def __init__(self, method: GroupRewardMethod | None, breaker: JudgeCircuitBreaker, *, fresh_setting: str):
        self.method = method
        self.breaker = breaker
        self.fresh_setting = fresh_setting
        self.usage = JudgeUsage()
        self.failure_log = FailureLog()
        self.neutral_total = 0
        self.journal: str | None = None  # output_dir/judge_journal.jsonl (main process), see use_journal

    def use_journal(self, output_dir: str, *, fresh: bool) -> None:
        """Append the judge totals to `output_dir/judge_journal.jsonl` after every scored batch (module docstring);
        `fresh`: the run starts at step 0, so an earlier run's journal there is removed. Main process only."""
        if self.method is None:
            return
        self.journal = os.path.join(output_dir, JUDGE_JOURNAL_NAME)
        if fresh and os.path.exists(self.journal):
            os.remove(self.journal)

    def record(self, scored: Scored, mode: str, *, step: int, is_main: bool) -> None:
        """One scored batch: print its judge failures (rate-limited, main process), feed a training batch to the
        circuit breaker. `step`: finished optimizer steps."""
        if scored.failures and is_main and self.failure_log.due():
            logger.warning(
                # step counts finished steps; the one being computed is the next, as the console numbers it
                f"trl-rankreward: {scored.neutral} of {scored.groups} groups neutral at step {step + 1} "
                f"({mode}); judge failures: " + " | ".join(scored.failures)
            )
        if self.journal is not None:
            os.makedirs(os.path.dirname(self.journal), exist_ok=True)
            line = json.dumps({"step": step, "mode": mode, "totals": self.judge_totals()})
            with open(self.journal, "a", encoding="utf-8") as f:  # closed: in the OS's hands before the step goes on
                f.write(line + "\n")
        if mode == "train":
            self.neutral_total += scored.neutral
            if self.breaker.record(scored.neutral, scored.groups, scored.failures):
                logger.error(f"trl-rankreward: {self.breaker.reason()}\nSaving a checkpoint and stopping.")

    def judge_totals(self) -> dict:
        """The judge usage since the run began, resumes included; {} without a method."""
        if self.method is None:
            return {}
        return self.usage.state_dict(combined_snapshot(self.method.judges))

    def save(self, checkpoint: str) -> None:
        """Write the method's state and `judge_usage.json` into `checkpoint` (a no-op without a method), first
        removing the temporary files a killed save of this checkpoint left (the run resumed from an earlier one)."""
        if self.method is None:
            return
        remove_write_debris(checkpoint)
        totals = self.judge_totals()
        self.method.save_state(checkpoint)
        usage = {**totals, "breaker": self.breaker.state_dict(), "neutral_groups": self.neutral_total}
        write_json_atomic(os.path.join(checkpoint, JUDGE_USAGE_NAME), usage)

    def load(self, checkpoint: str, *, fresh_allowed: bool = False) -> Restored:
        """Restore what `save` wrote, every file checked first. A checkpoint without the method's state is an error
        for a method with state (RankBuffer's buffers) unless `fresh_allowed`."""
        usage_path = os.path.join(checkpoint, JUDGE_USAGE_NAME)
        totals = checked_judge_usage(usage_path) if os.path.exists(usage_path) else None
        method_state = True
        if self.method is not None:
            if os.path.exists(os.path.join(checkpoint, METHOD_STATE_NAME)):
                with paused_gc():  # millions of small objects at 10^5 queries (see _gc.py)
                    self.method.load_state(checkpoint)
            else:
                self._start_fresh(checkpoint, fresh_allowed)
                method_state = False
        if totals is not None:
            self.breaker.load_state_dict(totals.pop("breaker", {}))
            self.neutral_total = int(totals.pop("neutral_groups", 0))
        journal_calls = 0
        if self.method is not None:
            journaled, checkpointed = self._journal_totals(), (totals or {}).get("calls", 0)
            if journaled is not None and journaled["calls"] > checkpointed:
                journal_calls, totals = journaled["calls"] - checkpointed, journaled
            if totals is not None:
                self.usage.load_state_dict(totals, combined_snapshot(self.method.judges))
        summary = self.method.summary() if self.method is not None and method_state else {}
        return Restored(checkpoint, method_state, dict(summary), totals, self.neutral_total, journal_calls)

    def _journal_totals(self) -> dict | None:
        """The totals of the journal's last complete line (None: no journal). A line cut by a crash is skipped."""
        if self.journal is None or not os.path.exists(self.journal):
            return None
        with open(self.journal, encoding="utf-8") as f:
            text = f.read()
        for line in reversed(text.splitlines()):
            try:
                totals = json.loads(line)["totals"]
            except (ValueError, KeyError, TypeError):
                continue  # half-written when the process died
            return check_usage(totals, self.journal)
        return None

    def _start_fresh(self, checkpoint: str, fresh_allowed: bool) -> None:
        if fresh_allowed or not self.method.state_dict():
            logger.warning(f"{checkpoint} holds no {METHOD_STATE_NAME}: the reward method starts from a fresh state")
            return
        path = os.path.join(checkpoint, METHOD_STATE_NAME)
        raise CheckpointStateError(
            path,
            "missing",
            f"{path} not found: {checkpoint} does not hold the state of the "
            f"reward method {self.method.name!r} (e.g. RankBuffer's buffers), so resuming would silently "
            f"restart it. Resume from a checkpoint written with this reward method, or set {self.fresh_setting} to "
            "start the method afresh.",
        )


def checked_judge_usage(path: str) -> dict:
    """`judge_usage.json` as `RewardRunState.save` wrote it: the judge totals (`LedgerSnapshot`'s fields), the
    breaker's counters and the neutral groups; `CheckpointStateError` naming the file for anything else."""
    return check_usage(read_json(path, "judge usage totals"), path)


def check_usage(usage, path: str) -> dict:
    """`usage` if it holds what `checked_judge_usage` describes; `CheckpointStateError` naming `path` otherwise
    (also for the journal's totals)."""
    if not isinstance(usage, dict):
        raise corrupt_entry(path, f"a JSON object was expected, got {usage!r:.60}")
    empty, totals = LedgerSnapshot(), {f.name for f in fields(LedgerSnapshot)}
    for name, value in usage.items():
        if name == "breaker":
            ok = isinstance(value, dict) and set(value) <= {"failed_streak", "recent"}
            ok = ok and _is_count(value.get("failed_streak", 0)) and isinstance(value.get("recent", []), list)
            ok = ok and all(isinstance(r, list) and len(r) == 2 and all(map(_is_count, r)) for r in value.get("recent", []))
        elif name == "neutral_groups":
            ok = _is_count(value)
        elif name not in totals:
            raise corrupt_entry(path, f"unknown field {name!r}")
        elif isinstance(getattr(empty, name), dict):
            ok = isinstance(value, dict) and all(isinstance(k, str) and _is_count(v) for k, v in value.items())
        else:
            ok = _is_count(value)
        if not ok:
            raise corrupt_entry(path, f"field {name!r} holds {value!r:.80}, not the counts it should")
    return usage


def _is_count(value) -> bool:
    """`value` is a count: an integer (not a bool) >= 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def startup_message(
    *,
    processes: int,
    per_device_batch: int,
    gradient_accumulation: int,
    num_generations: int,
    num_iterations: int,
    queries: int | None,
    max_steps: int,
    method: str,
    judge: str,
) -> str:
    """The block the main process prints before the first step (counts as `evaluation.step_counts` counts them).
    `queries`: training queries per epoch (None: not known)."""
    counts = step_counts(per_device_batch=per_device_batch, processes=processes,
                         gradient_accumulation=gradient_accumulation, num_generations=num_generations,
                         num_iterations=num_iterations, dataset_queries=queries)  # fmt: skip
    completions, groups = counts.completions, counts.queries
    reuse = f", each batch trained on {num_iterations} times" if num_iterations > 1 else ""
    lines = [
        "trl-rankreward: training run",
        f"  processes:              {processes}",
        f"  completions per step:   {completions} ({per_device_batch} per device x {processes} processes x "
        f"{gradient_accumulation} accumulation)",
        f"  queries per step:       {_count(groups)} group{'' if groups == 1 else 's'} of G={num_generations} "
        f"judged{reuse}",
    ]
    if counts.steps_per_epoch is not None:
        lines.append(f"  steps per epoch:        {_count(counts.steps_per_epoch)} ({queries} queries); max_steps {max_steps}")
    else:
        lines.append(f"  max_steps:              {max_steps}")
    lines += [
        f"  reward method:          {method}",
        f"  judge:                  {judge}",
        "  judge calls per step:   on the console line at each log (estimate: trl-rankreward bench --config)",
    ]
    return "\n".join(lines)


def resume_message(restored: Restored, step: int, method: str) -> str:
    """What a resume restored: the checkpoint, the method's state, the judge totals, the neutral groups."""
    lines = [f"trl-rankreward: resumed from {restored.checkpoint} at step {step}"]
    if restored.method_state:
        stats = ", ".join(f"{key} {_count(value)}" for key, value in restored.method_summary.items() if value)
        state = stats or "restored (no statistics)"  # e.g. "buffer/count 4, buffer/size_mean 5.25"
        lines.append(f"  {method} state:  {state}")
    else:
        lines.append(f"  {method} state:  none in the checkpoint; started afresh")
    totals = restored.judge_totals
    if totals is not None:
        tokens = totals.get("prompt_tokens", 0) + totals.get("completion_tokens", 0)
        failed = sum(totals.get("failures", {}).values())
        lines.append(f"  judge totals:  {totals.get('calls', 0):,} calls, {tokens:,} tokens, {failed:,} failed; "
                     f"{restored.neutral_groups:,} neutral groups")  # fmt: skip
        if restored.journal_calls:
            lines.append(f"                 ({restored.journal_calls:,} of the calls after the checkpoint, of steps "
                         f"that were lost: {JUDGE_JOURNAL_NAME})")  # fmt: skip
    else:
        lines.append("  judge totals:  none in the checkpoint; counted from 0")
    return "\n".join(lines)


def _count(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"
