"""Checks of coarse and listwise verdicts, shared by RankBuffer and the listwise methods.

A verdict of the wrong shape is a judge failure of kind `invalid` (`GroupJudgingFailed`),
never a made-up order: the caller decides whether it neutralizes the group.
"""

from __future__ import annotations

from typing import Any

from ..judging.protocol import is_failure
from ..judging.requests import JudgeFailure
from .base import GroupJudgingFailed


def _invalid(message: str) -> GroupJudgingFailed:
    return GroupJudgingFailed(JudgeFailure("invalid", message))


def check_position(verdict: Any, K: int) -> int:
    """A coarse verdict must be an integer position in 0..K (RankBuffer Eq. 6)."""
    if isinstance(verdict, bool) or not isinstance(verdict, int) or not 0 <= verdict <= K:
        raise _invalid(f"Judge returned coarse position {verdict!r} for {K} anchors; expected an integer in 0..{K}")
    return verdict


def check_order(verdict: Any, n: int) -> list[int]:
    """A listwise verdict must be a permutation of range(n), worst -> best (RankBuffer Eq. 8)."""
    ints = isinstance(verdict, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in verdict)
    if not ints or sorted(verdict) != list(range(n)):
        raise _invalid(
            f"Judge returned order {verdict!r} for {n} candidates; expected a permutation of {list(range(n))}"
        )
    return list(verdict)


def order_or_none(verdict: Any, n: int) -> list[int] | None:
    """`check_order`'s order, or None for a judge failure or an answer that is not a permutation
    (for the optional looks and audits, which skip such answers instead of failing the group)."""
    if is_failure(verdict):
        return None
    try:
        return check_order(verdict, n)
    except GroupJudgingFailed:
        return None


__all__ = ["check_order", "check_position", "order_or_none"]
