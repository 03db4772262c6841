"""`RetryPolicy`: the one retry policy of every judge call (judges, the GenRM reward, rubric generation).

Built on tenacity. An attempt that raises an exception whose `retryable` attribute is true
is tried again, up to `max_attempts` tries in all; anything else propagates at once:

- `BackendError` (transport, timeout, HTTP 408/429/5xx, a malformed 200 response) waits
  before the next try: the server's `Retry-After` when it sent one (capped at
  `max_retry_after_s`), else exponential backoff with jitter,
  `min(max_backoff_s, backoff_s * 2**(n-1)) + uniform(0, jitter_s)` after try n, the jitter
  drawn from the policy's own generator, seeded with `seed` (the judge's);
- an unusable answer (`parsing.InvalidAnswer`: invalid, ambiguous, or cut at `max_tokens`; the
  server is fine, its answer was not) is asked again at once (a cut one with more room,
  `calls.complete_and_parse`);
- HTTP 400/401/404 are not retryable (they repeat on every try), and a bug (any other
  exception) is not a judge failure: both reach the caller on the first try.

Worst case for one request against a hung or rate-limiting server: `max_attempts * timeout_s`
plus the waits between tries, each the larger of the backoff (with its jitter) and the
`Retry-After` cap `max_retry_after_s`; `worst_case_s` computes it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

from .seeding import seeded_rng

T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    """Whether trying again may succeed: the exception says so with a true `retryable` attribute."""
    return bool(getattr(exc, "retryable", False))


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a judge request is tried (see the module docstring).

    Args:
        max_attempts: tries per request in all, retries included (MatrixReward App. A.2: three).
        backoff_s: wait after the first failed try; it doubles with every further try.
        max_backoff_s: cap of the exponential wait.
        jitter_s: a uniform random extra wait in [0, jitter_s], so that many clients do not retry in step.
        max_retry_after_s: cap on a server's `Retry-After`.
        seed: seed of the jitter (the judge's seed), so that a run's waits are drawn from its own
            `random.Random`, not from the global one that other code reseeds and draws from.
    """

    max_attempts: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    jitter_s: float = 1.0
    max_retry_after_s: float = 120.0
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_rng", seeded_rng("retry-jitter", self.seed))
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        for name in ("backoff_s", "max_backoff_s", "jitter_s", "max_retry_after_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"RetryPolicy.{name} must be >= 0, got {getattr(self, name)!r}")

    def wait_s(self, attempt: int, error: BaseException) -> float:
        """Seconds to wait after failed try number `attempt` (1-based) raised `error`, before its retry."""
        retry_after = getattr(error, "retry_after_s", None)
        if retry_after is not None:
            return min(float(retry_after), self.max_retry_after_s)
        if not getattr(error, "backoff", True):
            return 0.0
        return self._backoff_s(attempt) + self._rng.uniform(0.0, self.jitter_s)

    def worst_case_s(self, timeout_s: float) -> float:
        """Longest one request can take when every try takes `timeout_s` and each wait between tries is
        the longest a backoff or a server's `Retry-After` (capped at `max_retry_after_s`) can be."""
        waits = (max(self._backoff_s(n) + self.jitter_s, self.max_retry_after_s) for n in range(1, self.max_attempts))
        return self.max_attempts * timeout_s + sum(waits)

    def _backoff_s(self, attempt: int) -> float:
        """The exponential part of the wait after failed try number `attempt`, before jitter."""
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))

    async def run(self, attempt: Callable[[int], Awaitable[T]]) -> T:
        """Await `attempt(n)` for n = 1, 2, ... until it returns, raises a non-retryable
        exception, or `max_attempts` tries raised retryable ones; then the last exception propagates."""
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            wait=lambda state: self.wait_s(state.attempt_number, state.outcome.exception()),
            retry=tenacity.retry_if_exception(is_retryable),
            sleep=asyncio.sleep,
            reraise=True,
        )
        async for trial in retrying:
            with trial:
                return await attempt(trial.retry_state.attempt_number)
