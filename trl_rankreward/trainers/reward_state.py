"""`RewardRunState`: what a judged run keeps beside its reward method, and how it travels in checkpoints.

Both ways of training with a group reward method hold one: `JudgeRewardGRPOTrainer` and the TRL
reward function of `reward_func` (`as_reward_func`). It holds

- the judge usage totals (`JudgeUsage`), so `judge/*_total` continue across a resume;
- the circuit breaker (`JudgeCircuitBreaker`) and the count of neutral groups, fed every batch
  by `record` on every process alike (every process gets the same broadcast `Scored`), so every
  process stops at the same step;
- the rate-limited printing of judge failure messages (`FailureLog`).

`save(checkpoint)` writes the method's state (`reward_method_state.json`) and `judge_usage.json`;
`load(checkpoint)` reads them back: the breaker and neutral count on every process, the method and
judge totals where the method lives (the main process).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from transformers.utils import logging

from .._gc import paused_gc
from ..rewards.base import GroupRewardMethod
from ..rewards.state_files import METHOD_STATE_NAME, CheckpointStateError, read_json, write_json_atomic
from .circuit_breaker import JudgeCircuitBreaker
from .failures import FailureLog
from .group_scoring import Scored
from .judge_usage import JudgeUsage, combined_snapshot

logger = logging.get_logger(__name__)

JUDGE_USAGE_NAME = "judge_usage.json"


@dataclass(frozen=True)
class Restored:
    """What `RewardRunState.load` restored from `checkpoint`, for the resume message (`run_summary`)."""

    checkpoint: str
    method_state: bool  # False: the method started afresh (stateless, or allowed)
    method_summary: dict[str, float] = field(default_factory=dict)
    judge_totals: dict | None = None  # None: the checkpoint held no judge_usage.json
    neutral_groups: int = 0


class RewardRunState:
    """Judge totals, circuit breaker and neutral-group count of one run, saved with its checkpoints.

    Args:
        method: the reward method on the process that scores (None elsewhere).
        breaker: the run's circuit breaker (its thresholds come from the caller's settings).
        fresh_setting: the setting that lets a resume start the method afresh, named in the error.
    """

    def __init__(self, method: GroupRewardMethod | None, breaker: JudgeCircuitBreaker, *, fresh_setting: str):
        self.method = method
        self.breaker = breaker
        self.fresh_setting = fresh_setting
        self.usage = JudgeUsage()
        self.failure_log = FailureLog()
        self.neutral_total = 0

    def record(self, scored: Scored, mode: str, *, step: int, is_main: bool) -> None:
        """One scored batch: print its judge failures (rate-limited, main process) and feed a training batch
        to the circuit breaker. `step` is the number of finished optimizer steps."""
        if scored.failures and is_main and self.failure_log.due():
            logger.warning(
                # step counts finished steps; the one being computed is the next, as the console numbers it
                f"trl-rankreward: {scored.neutral} of {scored.groups} groups neutral at step {step + 1} "
                f"({mode}); judge failures: " + " | ".join(scored.failures)
            )
        if mode == "train":
            self.neutral_total += scored.neutral
            if self.breaker.record(scored.neutral, scored.groups, scored.failures):
                logger.error(f"trl-rankreward: {self.breaker.reason()}\nSaving a checkpoint and stopping.")

    def judge_totals(self) -> dict:
        """The judge usage since the run began, resumes included (`JudgeUsage.state_dict`); {} without a method."""
        if self.method is None:
            return {}
        return self.usage.state_dict(combined_snapshot(self.method.judges))

    def save(self, checkpoint: str) -> None:
        """Write the method's state and `judge_usage.json` into `checkpoint` (a no-op without a method)."""
        if self.method is None:
            return
        totals = self.judge_totals()
        self.method.save_state(checkpoint)
        usage = {**totals, "breaker": self.breaker.state_dict(), "neutral_groups": self.neutral_total}
        write_json_atomic(os.path.join(checkpoint, JUDGE_USAGE_NAME), usage)

    def load(self, checkpoint: str, *, fresh_allowed: bool = False) -> Restored:
        """Restore what `save` wrote. A checkpoint without the method's state is an error for a method with
        state (RankBuffer's buffers) unless `fresh_allowed`; for a stateless one it is fine."""
        method_state = True
        if self.method is not None:
            if os.path.exists(os.path.join(checkpoint, METHOD_STATE_NAME)):
                with paused_gc():  # millions of small objects at 10^5 queries (see _gc.py)
                    self.method.load_state(checkpoint)
            else:
                self._start_fresh(checkpoint, fresh_allowed)
                method_state = False
        totals = None
        usage_path = os.path.join(checkpoint, JUDGE_USAGE_NAME)
        if os.path.exists(usage_path):
            usage = read_json(usage_path, "judge usage totals")
            self.breaker.load_state_dict(usage.pop("breaker", {}))
            self.neutral_total = int(usage.pop("neutral_groups", 0))
            if self.method is not None:
                self.usage.load_state_dict(usage, combined_snapshot(self.method.judges))
            totals = usage
        summary = self.method.summary() if self.method is not None and method_state else {}
        return Restored(checkpoint, method_state, dict(summary), totals, self.neutral_total)

    def _start_fresh(self, checkpoint: str, fresh_allowed: bool) -> None:
        """A checkpoint without the method's state: fine for stateless methods or when allowed; else an error."""
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
