"""Per-step and cumulative judge usage, from the ledgers of every judge a method calls.

Step numbers are differences of ledger snapshots between two calls of `step_metrics`;
totals add an offset restored from a checkpoint, so `judge/*_total` continue across a
resume. Failure kinds seen once stay in every later step's metrics (as 0 when absent), so
TRL's averaging over a logging window sees the same keys every step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from ..judging.calls import LedgerSnapshot

TOTAL_SUFFIX = "_total"


def combined_snapshot(judges: Iterable[Any]) -> LedgerSnapshot:
    """Sum of the ledger snapshots of `judges` (judges without a `ledger` count nothing)."""
    total = LedgerSnapshot()
    for judge in judges:
        ledger = getattr(judge, "ledger", None)
        if ledger is not None:
            total = total + ledger.snapshot()
    return total


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
