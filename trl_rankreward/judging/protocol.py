"""The `Judge` protocol, and `ask`, the one way reward methods call a judge."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .requests import JudgeError, JudgeFailure, JudgeRequest


@runtime_checkable
class Judge(Protocol):
    """Anything with `async judge(request) -> verdict` is a judge.

    A judge receives requests in canonical order (see `judging.requests`) and either
    returns the verdict, returns a `JudgeFailure`, or raises `JudgeError`. Judges of this
    package also carry a `ledger` (`JudgeLedger`) that counts what they did.
    """

    async def judge(self, request: JudgeRequest) -> Any: ...


async def ask(judge: Judge, request: JudgeRequest) -> Any:
    """Call `judge` and return its verdict, or a `JudgeFailure` if it could not answer.

    A judge reports failure by returning a `JudgeFailure` or raising `JudgeError`. Any other
    exception is a bug (in a custom judge, or ours), not a judge failure: it propagates and
    stops the step, instead of hiding as a neutral group.
    """
    try:
        return await judge.judge(request)
    except JudgeError as exc:
        return exc.as_failure()


def is_failure(verdict: Any) -> bool:
    return isinstance(verdict, JudgeFailure)
