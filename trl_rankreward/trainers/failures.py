"""Judge failure messages of a scoring batch, and how often the trainer prints them.

A failed judge call is counted (`judge/failures_<kind>`, `reward/neutral_groups`) every
step; its message is printed too, so that a user sees *why* without opening the metrics,
but at most once per `FailureLog.interval_s`, so a dead judge does not flood the console.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..rewards.base import GroupResult

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
