"""`complete_and_parse`: one chat request to a backend, parsed, retried by the shared `RetryPolicy`.

Every caller that asks a chat model and checks its answer goes through it, so all count, retry and report
failures alike: each try is one ledger call; what says it is `retryable` (a `BackendError` of a transient kind, an
unusable answer) is retried, and when the policy gives up `JudgeError` says what failed, how often and why; bugs
propagate. An answer cut at `max_tokens` is never parsed: the next try gets twice the room, within the window.
`RetryPolicy` waits the server's `Retry-After` or an exponential backoff with seeded jitter (docs/judging.md,
"Retries"); `JudgeLedger` counts calls, parsed calls, failures by kind and tokens on one scale for every method
("The ledger and token accounting").
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import operator
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .backends.base import BackendError, ChatBackend, Completion
from .parsing import InvalidAnswer, UnfinishedAnswer
from .requests import JudgeError, seeded_rng

#: without a known window, a cut answer's retries grow `max_tokens` to at most this many times the first try's
LENGTH_GROWTH_LIMIT = 4


def room_to_finish(max_tokens: int, first: int, completion: Completion, window: int | None) -> int:
    """`max_tokens` for the try after `completion` was cut at `max_tokens` (module docstring)."""
    ceiling = LENGTH_GROWTH_LIMIT * first
    if window is not None and completion.prompt_tokens > 0:
        ceiling = window - completion.prompt_tokens
    return max(max_tokens, min(2 * max_tokens, ceiling))


class Watched:
    """A backend whose calls teach a watcher (`prompt_budget.Watch`): `server` is the backend, told what it
    answered (`seen`) or refused (`refused`); this base watches nothing."""

    def __init__(self, server: ChatBackend):
        self.server = server

    def seen(self, completion: Completion) -> None: ...

    def refused(self, error: BackendError) -> None: ...

    async def complete(self, messages: list[dict], **decoding) -> Completion:
        try:
            completion = await self.server.complete(messages, **decoding)
        except BackendError as exc:
            self.refused(exc)
            raise
        self.seen(completion)
        return completion


async def complete_and_parse(
    backend: ChatBackend,
    messages: list[dict],
    parse: Callable[[Completion], Any],
    *,
    retry: RetryPolicy,
    ledger: JudgeLedger,
    request_kind: str,
    what: str,
    on_format_refused: Callable[[BackendError], None] | None = None,
    **decoding: Any,
) -> tuple[Any, int]:
    """`(parse(completion), tries)` of the first try that succeeds; once `retry` gives up, `JudgeError` with
    `.errors` (every failed try's reason) and, from a `BackendError`, `.backend_error`.

    `what` names the request in messages; `decoding` goes to `backend.complete`. An HTTP 400 refusing
    `response_format` is told to `on_format_refused`, when given, and the request is tried afresh without it.
    """
    errors, first = [], decoding.get("max_tokens")
    window = getattr(backend, "context_window", lambda: None)()
    watch = backend if isinstance(backend, Watched) else Watched(backend)  # the server is called here, not in watch
    tries = 0
    while True:
        tries += 1
        usage, completion = {}, None
        try:
            try:
                completion = await watch.server.complete(messages, **decoding)
            except BackendError as exc:
                watch.refused(exc)
                raise
            watch.seen(completion)
            usage = {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens}
            reason = getattr(completion, "finish_reason", None)  # duck-typed completions may not carry one
            if reason == "length":
                raise UnfinishedAnswer(
                    f"Judge answer was cut at max_tokens={decoding.get('max_tokens')} (finish_reason 'length') before "
                    "it finished; what it holds is not a verdict, so it is asked again with more room"
                )
            if reason not in (None, "stop"):
                raise InvalidAnswer(
                    f"Judge answer ended with finish_reason {reason!r}; expected 'stop' (a finished answer)"
                )
            value = parse(completion)
        except Exception as exc:
            if not is_retryable(exc) and not isinstance(exc, BackendError):
                raise  # a bug, not a judge failure
            kind = getattr(exc, "kind", "invalid")
            ledger.record(request_kind=request_kind, parsed=False, failure=kind, **usage)
            errors.append(f"{kind}: {exc}")
            refused = isinstance(exc, BackendError) and exc.status == 400 and "response_format" in str(exc).lower()
            if on_format_refused is not None and decoding.get("response_format") and refused:
                on_format_refused(exc)
                decoding["response_format"], tries = None, 0
                continue
            if not is_retryable(exc) or tries >= retry.max_attempts:
                raise _gave_up(exc, what, tries, errors) from exc
            if isinstance(exc, UnfinishedAnswer) and first:
                decoding["max_tokens"] = room_to_finish(decoding["max_tokens"], first, completion, window)
            await asyncio.sleep(retry.wait_s(tries, exc))
            continue
        ledger.record(request_kind=request_kind, parsed=True, **usage)
        return value, tries


def _gave_up(exc: Exception, what: str, tries: int, errors: list[str]) -> JudgeError:
    """The `JudgeError` that says why a request failed after `tries`."""
    if isinstance(exc, BackendError):
        how = "" if exc.retryable else " (an error that repeats on every try, so not retried)"
        error = JudgeError(f"{what} failed after {tries} attempt(s){how}: {exc}", exc.kind, tries)
        error.backend_error = exc
    else:
        kind = getattr(exc, "kind", "invalid")
        error = JudgeError(f"{what} failed after {tries} attempt(s): {kind} answer: {exc}", kind, tries)
    error.errors = errors
    return error


T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    return bool(getattr(exc, "retryable", False))


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a judge request is tried (module docstring): `max_attempts` tries in all
    (MatrixReward App. A.2: three); the jitter is drawn from the policy's own `random.Random`, seeded with `seed`,
    never from the global one that other code reseeds."""

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
        retry_after = getattr(error, "retry_after_s", None)
        if retry_after is not None:
            return min(float(retry_after), self.max_retry_after_s)
        if not getattr(error, "backoff", True):
            return 0.0
        return self._backoff_s(attempt) + self._rng.uniform(0.0, self.jitter_s)

    def worst_case_s(self, timeout_s: float) -> float:
        """Longest one request can take when every try takes `timeout_s` and every wait is the longest."""
        waits = (max(self._backoff_s(n) + self.jitter_s, self.max_retry_after_s) for n in range(1, self.max_attempts))
        return self.max_attempts * timeout_s + sum(waits)

    def _backoff_s(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))

    async def run(self, attempt: Callable[[int], Awaitable[T]]) -> T:
        """Await `attempt(n)` for n = 1, 2, ... until it returns or the policy gives up (then it raises)."""
        for number in range(1, self.max_attempts + 1):
            try:
                return await attempt(number)
            except Exception as exc:
                if not is_retryable(exc) or number == self.max_attempts:
                    raise
                await asyncio.sleep(self.wait_s(number, exc))


@dataclass
class LedgerSnapshot:
    """Counters at one moment; subtract two snapshots to get one step's numbers."""

    calls: int = 0
    parsed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    parsed_by_kind: dict[str, int] = field(default_factory=dict)
    truncated_requests: int = 0
    truncated_chars: int = 0
    context_refusals: int = 0

    def _combine(self, other: LedgerSnapshot, op) -> LedgerSnapshot:
        counts = [f for f in dataclasses.fields(self) if f.type == "int"]
        return LedgerSnapshot(
            **{f.name: op(getattr(self, f.name), getattr(other, f.name)) for f in counts},
            failures=_by_kind(self.failures, other.failures, op),
            parsed_by_kind=_by_kind(self.parsed_by_kind, other.parsed_by_kind, op),
        )

    __sub__ = functools.partialmethod(_combine, op=operator.sub)
    __add__ = functools.partialmethod(_combine, op=operator.add)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def metrics(self, prefix: str = "judge/") -> dict[str, float]:
        """Flat metric dict with the documented `judge/...` names (docs/metrics.md)."""
        out = {
            f"{prefix}calls": float(self.calls),
            f"{prefix}parsed_calls": float(self.parsed),
            f"{prefix}prompt_tokens": float(self.prompt_tokens),
            f"{prefix}completion_tokens": float(self.completion_tokens),
            f"{prefix}failures": float(sum(self.failures.values())),
            f"{prefix}truncated_requests": float(self.truncated_requests),
            f"{prefix}truncated_chars": float(self.truncated_chars),
            f"{prefix}context_refusals": float(self.context_refusals),
        }
        for kind, n in sorted(self.failures.items()):
            out[f"{prefix}failures_{kind}"] = float(n)
        return out


def _by_kind(a: dict[str, int], b: dict[str, int], op) -> dict[str, int]:
    values = {k: op(a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b)}
    return {k: v for k, v in values.items() if v}


class JudgeLedger:
    """Counts calls, parsed calls, failures by kind and tokens of one judge."""

    def __init__(self):
        self._totals = LedgerSnapshot()

    def record(
        self,
        *,
        request_kind: str,
        parsed: bool,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        failure: str | None = None,
    ) -> None:
        t = self._totals
        t.calls += 1
        t.prompt_tokens += int(prompt_tokens)
        t.completion_tokens += int(completion_tokens)
        if parsed:
            t.parsed += 1
            t.parsed_by_kind[request_kind] = t.parsed_by_kind.get(request_kind, 0) + 1
        if failure:
            t.failures[failure] = t.failures.get(failure, 0) + 1

    def record_truncation(self, chars: int) -> None:
        self._totals.truncated_requests += 1
        self._totals.truncated_chars += int(chars)

    def record_context_refusal(self) -> None:
        self._totals.context_refusals += 1

    def record_unsent(self, failure: str) -> None:
        self._totals.failures[failure] = self._totals.failures.get(failure, 0) + 1

    def add(self, usage: LedgerSnapshot) -> None:
        """Count here the calls another copy of this judge made (a judging worker's, `trainers.judge_workers`)."""
        self._totals = self._totals + usage

    def snapshot(self) -> LedgerSnapshot:
        t = self._totals
        return dataclasses.replace(t, failures=dict(t.failures), parsed_by_kind=dict(t.parsed_by_kind))

    # the running totals
    calls = property(lambda self: self._totals.calls)
    parsed = property(lambda self: self._totals.parsed)
    prompt_tokens = property(lambda self: self._totals.prompt_tokens)
    completion_tokens = property(lambda self: self._totals.completion_tokens)
    failures = property(lambda self: dict(self._totals.failures))

    def __repr__(self) -> str:
        t = self._totals
        return (
            f"JudgeLedger(calls={t.calls}, parsed={t.parsed}, prompt_tokens={t.prompt_tokens}, "
            f"completion_tokens={t.completion_tokens}, failures={dict(t.failures)})"
        )
