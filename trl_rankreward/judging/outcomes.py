"""Pairwise outcomes as numbers, and both-order judging.

An outcome is the score of response `a` against `b`: 1 if `a` wins, 0 if `b` wins, 1/2 for
a tie. Judging both display orders and averaging the identity-aligned outcomes removes a
judge's position bias at twice the calls (MatrixReward Sec. 3.1; RankBuffer App. E).
"""

from __future__ import annotations

import asyncio
import dataclasses

from .protocol import Judge, ask, is_failure
from .requests import JudgeFailure, PairwiseRequest, RubricPairwiseRequest

_SCORE = {"A": 1.0, "B": 0.0, "TIE": 0.5}


def win_score(winner: str) -> float:
    """Score of response A for one verdict: A -> 1, B -> 0, TIE -> 0.5."""
    try:
        return _SCORE[winner]
    except KeyError:
        raise ValueError(f"Pairwise verdict must be 'A', 'B' or 'TIE', got {winner!r}") from None


def _scores(verdict) -> float | list[float]:
    if isinstance(verdict, str):
        return win_score(verdict)
    return [win_score(v) for v in verdict]


async def ask_pair(
    judge: Judge, request: PairwiseRequest | RubricPairwiseRequest, *, both_orders: bool = False
) -> float | list[float] | JudgeFailure:
    """Score of `request.a` against `request.b`: a float (pairwise) or one per judged rubric.

    With `both_orders`, the pair is shown once as (a, b) and once as (b, a) and the two
    outcomes for `a` are averaged, so results are multiples of 1/4. Any failed call makes
    the whole comparison a `JudgeFailure`.
    """
    if not both_orders:
        verdict = await ask(judge, request)
        return verdict if is_failure(verdict) else _scores(verdict)
    first, second = await asyncio.gather(
        ask(judge, dataclasses.replace(request, display="ab")),
        ask(judge, dataclasses.replace(request, display="ba")),
    )
    for verdict in (first, second):
        if is_failure(verdict):
            return verdict
    s1, s2 = _scores(first), _scores(second)
    if isinstance(s1, float):
        return (s1 + s2) / 2
    return [(x + y) / 2 for x, y in zip(s1, s2)]
