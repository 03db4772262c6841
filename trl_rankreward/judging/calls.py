"""`complete_and_parse`: one chat request to a backend, parsed, retried by the shared policy.

Every caller that asks a chat model and checks its answer (`LLMJudge`, `GenRMJudge`, the
rubric and rationale runner) goes through this function, so they count, retry and report
failures the same way: each try is one ledger call; a `BackendError` or a parse error
(`InvalidAnswer`, or any exception with a true `retryable` attribute) is retried by
`RetryPolicy`; when it gives up, `JudgeError` says what failed, how often, and why.
Exceptions that are neither (bugs) propagate unchanged.

Only a finished answer is parsed: one the server reports cut at `max_tokens`
(`finish_reason: "length"`) is an `UnfinishedAnswer` (failure kind `length`), whatever it holds,
and the next try gets room to finish: twice the `max_tokens`, at most what the window leaves
after the prompt (where the backend knows the window: `context_window()`), else at most
`LENGTH_GROWTH_LIMIT` times the first try's. Any other reason than "stop" (a content filter, an abort) is invalid; a backend that
gives no reason (None) is taken at its word.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .backends.base import BackendError, ChatBackend, Completion
from .ledger import JudgeLedger
from .parsing import InvalidAnswer, UnfinishedAnswer
from .requests import JudgeError
from .retry import RetryPolicy, is_retryable

#: without a known window, a cut answer's retries grow `max_tokens` to at most this many times the first try's
LENGTH_GROWTH_LIMIT = 4


def check_finished(completion: Completion, max_tokens: int | None) -> None:
    """`UnfinishedAnswer` for an answer cut at `max_tokens`, `InvalidAnswer` for one that ended for another
    reason than "stop"; nothing for a finished one (or one whose backend does not say)."""
    reason = getattr(completion, "finish_reason", None)  # duck-typed completions may not carry one
    if reason == "length":
        raise UnfinishedAnswer(
            f"Judge answer was cut at max_tokens={max_tokens} (finish_reason 'length') before it finished; "
            "what it holds is not a verdict, so it is asked again with more room"
        )
    if reason not in (None, "stop"):
        raise InvalidAnswer(f"Judge answer ended with finish_reason {reason!r}; expected 'stop' (a finished answer)")


def room_to_finish(max_tokens: int, first: int, completion: Completion, window: int | None) -> int:
    """`max_tokens` for the try after `completion` was cut at `max_tokens` (module docstring): doubled,
    within the window's room after the prompt where known, else within `LENGTH_GROWTH_LIMIT * first`."""
    ceiling = LENGTH_GROWTH_LIMIT * first
    if window is not None and completion.prompt_tokens > 0:
        ceiling = window - completion.prompt_tokens
    return max(max_tokens, min(2 * max_tokens, ceiling))


async def complete_and_parse(
    backend: ChatBackend,
    messages: list[dict],
    parse: Callable[[Completion], Any],
    *,
    retry: RetryPolicy,
    ledger: JudgeLedger,
    request_kind: str,
    what: str,
    **decoding: Any,
) -> tuple[Any, int]:
    """`(parse(completion), tries)` of the first try that succeeds; `JudgeError` once `retry` gives up,
    with `.errors`: the reason of every failed try, in order.

    `what` names the request in messages (e.g. "coarse request (query_id='q1')"); `decoding`
    goes to `backend.complete` (temperature, max_tokens, response_format). The backend's
    `context_window()`, where it has one and knows it, bounds the room a cut answer is given. A
    `JudgeError` from a `BackendError` holds it in `.backend_error` (a "maximum context length"
    refusal is read from it).
    """
    tries, errors, first = 0, [], decoding.get("max_tokens")
    window = getattr(backend, "context_window", lambda: None)()

    async def attempt(number: int) -> Any:
        nonlocal tries
        tries = number
        try:
            completion = await backend.complete(messages, **decoding)
        except BackendError as exc:
            ledger.record(request_kind=request_kind, parsed=False, failure=exc.kind)
            errors.append(f"{exc.kind}: {exc}")
            raise
        usage = {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens}
        try:
            check_finished(completion, decoding.get("max_tokens"))
            value = parse(completion)
        except Exception as exc:
            if not is_retryable(exc):
                raise
            kind = _answer_failure(exc)
            ledger.record(request_kind=request_kind, parsed=False, failure=kind, **usage)
            errors.append(f"{kind}: {exc}")
            if isinstance(exc, UnfinishedAnswer) and first:
                decoding["max_tokens"] = room_to_finish(decoding["max_tokens"], first, completion, window)
            raise
        ledger.record(request_kind=request_kind, parsed=True, **usage)
        return value

    try:
        return await retry.run(attempt), tries
    except BackendError as exc:
        how = "" if exc.retryable else " (an error that repeats on every try, so not retried)"
        error = JudgeError(f"{what} failed after {tries} attempt(s){how}: {exc}", exc.kind, tries)
        error.backend_error = exc
    except Exception as exc:
        if not is_retryable(exc):
            raise
        kind = _answer_failure(exc)
        error = JudgeError(f"{what} failed after {tries} attempt(s): {kind} answer: {exc}", kind, tries)
    error.errors = errors
    raise error


def _answer_failure(exc: BaseException) -> str:
    """The failure kind of an unusable answer: `InvalidAnswer.kind` (invalid, ambiguous, length), else invalid."""
    return exc.kind if isinstance(exc, InvalidAnswer) else "invalid"
