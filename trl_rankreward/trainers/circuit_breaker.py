"""`JudgeCircuitBreaker`: stop a run whose judge keeps failing, instead of training on nothing.

A neutral group has all-zero rewards, hence zero advantages: a step whose groups are all
neutral trains on nothing. The breaker watches, per training generation batch, how many
groups were neutral, and trips when

- every group was neutral in `max_failed_batches` consecutive batches (a dead or garbage
  judge trips it after that many batches), or
- over the last `window` batches (once that many were seen) more than `max_neutral_fraction`
  of all groups were neutral (a judge failing often but not always).

A transient outage shorter than both (say a judge restarted within two batches) does not
trip it. The trainer saves a checkpoint and stops with `reason()`, which quotes the first
failure messages of the failing stretch.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

_QUOTED = 3


@dataclass
class JudgeCircuitBreaker:
    """Counts neutral groups per batch and decides when judging has failed for too long (module docstring).

    Set `max_failed_batches=0` or `max_neutral_fraction=1.0` to turn a rule off.
    """

    max_failed_batches: int = 3
    window: int = 20
    max_neutral_fraction: float = 0.5
    _failed_streak: int = field(default=0, init=False)
    _recent: deque = field(default_factory=deque, init=False)
    _messages: list[str] = field(default_factory=list, init=False)
    _tripped: str | None = field(default=None, init=False)

    def __post_init__(self):
        """The one check of the thresholds; errors name the settings users set (`judge_*` of the configs and
        of `as_reward_func`)."""
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
