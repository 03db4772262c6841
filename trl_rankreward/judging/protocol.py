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
    """Call `judge` and return its verdict, or a `JudgeFailure` if it failed in any way.

    Exceptions other than `JudgeError` from a user judge are turned into failures of kind
    "error" as well, so that one broken call neutralizes its group instead of the run.
    """
    try:
        return await judge.judge(request)
    except JudgeError as exc:
        return exc.as_failure()
    except Exception as exc:  # a user judge's bug must not kill a training step
        return JudgeFailure("error", f"{type(exc).__name__}: {exc}")


def is_failure(verdict: Any) -> bool:
    return isinstance(verdict, JudgeFailure)
