"""`complete_and_parse`: one chat request to a backend, parsed, retried by the shared policy.

Every caller that asks a chat model and checks its answer (`LLMJudge`, `GenRMJudge`, the
rubric and rationale runner) goes through this function, so they count, retry and report
failures the same way: each try is one ledger call; a `BackendError` or a parse error
(`InvalidAnswer`, or any exception with a true `retryable` attribute) is retried by
`RetryPolicy`; when it gives up, `JudgeError` says what failed, how often, and why.
Exceptions that are neither (bugs) propagate unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .backends.base import BackendError, ChatBackend, Completion
from .ledger import JudgeLedger
from .requests import JudgeError
from .retry import RetryPolicy, is_retryable


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
    goes to `backend.complete` (temperature, max_tokens, response_format). A `JudgeError` from a
    `BackendError` holds it in `.backend_error` (a "maximum context length" refusal is read from it).
    """
    tries, errors = 0, []

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
            value = parse(completion)
        except Exception as exc:
            if not is_retryable(exc):
                raise
            ledger.record(request_kind=request_kind, parsed=False, failure="invalid", **usage)
            errors.append(f"invalid: {exc}")
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
        error = JudgeError(f"{what} failed after {tries} attempt(s): invalid answer: {exc}", "invalid", tries)
    error.errors = errors
    raise error
