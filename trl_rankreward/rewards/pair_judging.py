"""Pairwise building blocks shared by the comparison baselines (RRC, Pairwise Rank, Tournament, ArenaRL):
judging text pairs (`judge_pairs`, holistic `PairwiseRequest`s), win rates, shared ranks, knockout brackets.

Presentation order is not chosen here: requests carry `query_id` and `step`, and the judge
picks the display order from the judging layer's deterministic hash (`display="auto"`).
With `both_orders`, each logical comparison is two requests, one per display order
(`judging.outcomes.ask_pair`). How the judge answers (a bare JSON verdict, or a rationale
first with `JudgeTemplates(pairwise_rationale=True)`) is the judge's template choice; the
verdicts these functions receive are the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..judging.outcomes import ask_pair
from ..judging.protocol import Judge
from ..judging.requests import PairwiseRequest
from .base import Group, require

#: the help of the pairwise methods' `both_orders` option
BOTH_ORDERS_HELP = "Judge each comparison in both display orders and average (2 requests per comparison)."


def all_pairs(n: int) -> list[tuple[int, int]]:
    """Every unordered pair (i, j), i < j, of `range(n)`: C(n, 2) pairs."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def requests_per_match(both_orders: bool) -> int:
    return 2 if both_orders else 1


async def judge_pairs(
    judge: Judge, group: Group, pairs: Sequence[tuple[str, str]], *, step: int, both_orders: bool = False
) -> list[float]:
    """Score of `a` against `b` for each text pair, judged concurrently.

    Raises `GroupJudgingFailed` when any comparison failed after the judge's retries.
    """
    requests = [group.request(PairwiseRequest, step=step, a=a, b=b) for a, b in pairs]
    outcomes = await asyncio.gather(*(ask_pair(judge, r, both_orders=both_orders) for r in requests))
    return [float(s) for s in require(outcomes)]


def win_rates(pairs: Sequence[tuple[int, int]], scores: Sequence[float], multiplicities: Sequence[int]) -> list[float]:
    """Opponent-averaged win rate of each unique answer, duplicates counted with multiplicity.

    `scores[p]` is the outcome of `pairs[p][0]` against `pairs[p][1]`. Answer u with m_u
    copies meets each copy of every other answer and its own m_u - 1 copies (ties, 1/2):
        rate_u = (sum_v m_v s(u, v) + (m_u - 1) / 2) / (n - 1),  n = sum_u m_u,
    which is what judging the undeduplicated group would give with a judge that ties
    identical texts. With no opponent (n = 1) the rate is 1/2.
    """
    n = sum(multiplicities)
    if n <= 1:
        return [0.5] * len(multiplicities)
    totals = [(m - 1) * 0.5 for m in multiplicities]
    for (u, v), s in zip(pairs, scores, strict=True):
        totals[u] += multiplicities[v] * s
        totals[v] += multiplicities[u] * (1.0 - s)
    return [t / (n - 1) for t in totals]


def shared_ranks(
    values: Sequence[float], multiplicities: Sequence[int] | None = None, *, ties: str = "min"
) -> list[float]:
    """Rank 1 = highest value. Equal values share a rank: the first they occupy (`ties="min"`,
    competition ranking, e.g. 1, 1, 3) or the mean of the places they occupy (`ties="average"`,
    e.g. 1.5, 1.5, 3). An entry with multiplicity m occupies m places.
    """
    if ties not in ("min", "average"):
        raise ValueError(f"ties must be 'min' or 'average', got {ties!r}")
    mult = list(multiplicities or [1] * len(values))
    ranks = []
    for v in values:
        first = 1 + sum(m for w, m in zip(values, mult, strict=True) if w > v)
        tied = sum(m for w, m in zip(values, mult, strict=True) if w == v)
        ranks.append(float(first) if ties == "min" else first + (tied - 1) / 2)
    return ranks


@dataclass
class BracketResult:
    """Outcome of one single-elimination bracket over entrant ids.

    `score[e]`: accumulated match scores of entrant e (a won match 1, a tie 1/2, a bye 0);
    `survived[e]`: rounds e got through (the champion: all `rounds`); `matches`: logical
    matches judged (entrants - 1); `rounds`: sequential judge rounds, ceil(log2(entrants)).
    """

    score: dict[int, float] = field(default_factory=dict)
    survived: dict[int, int] = field(default_factory=dict)
    matches: int = 0
    rounds: int = 0


def bracket_slots(ranked: Sequence[int]) -> list[int | None]:
    """Standard seeded bracket: `ranked[0]` is seed 1; `None` marks a bye.

    Slots are filled so seeds 1 and 2 can only meet in the final (size 8 slots: seeds
    1, 8, 4, 5, 2, 7, 3, 6). With n entrants and P = next power of two, the P - n best
    seeds get a first-round bye, and no two byes meet.
    """
    size = 1 << max(len(ranked) - 1, 0).bit_length()
    seeds = [1]
    while len(seeds) < size:
        seeds = [x for s in seeds for x in (s, 2 * len(seeds) + 1 - s)]
    return [ranked[s - 1] if s <= len(ranked) else None for s in seeds]


async def single_elimination(
    ranked: Sequence[int],
    play: Callable[[list[tuple[int, int]]], Awaitable[list[float]]],
    tie_break: Callable[[int, int], int],
) -> BracketResult:
    """Run one knockout bracket; each round's matches are judged concurrently by `play`.

    `ranked` gives the bracket seeding (see `bracket_slots`). `play(matches)` returns the
    score of the first entrant of each match in [0, 1]; above 1/2 the first advances,
    below the second, at exactly 1/2 (a tie) `tie_break(a, b)` names who advances.
    """
    result = BracketResult(score={e: 0.0 for e in ranked}, survived={e: 0 for e in ranked})
    alive = bracket_slots(ranked)
    while len(alive) > 1:
        pairs = [(alive[k], alive[k + 1]) for k in range(0, len(alive), 2)]
        matches = [(a, b) for a, b in pairs if a is not None and b is not None]
        scores = dict(zip(matches, await play(matches), strict=True)) if matches else {}
        result.matches += len(matches)
        result.rounds += 1 if matches else 0
        alive = []
        for a, b in pairs:
            if a is None or b is None:
                winner = b if a is None else a
            else:
                s = scores[(a, b)]
                result.score[a] += s
                result.score[b] += 1.0 - s
                winner = a if s > 0.5 else b if s < 0.5 else tie_break(a, b)
            if winner is not None:
                result.survived[winner] += 1
            alive.append(winner)
    return result


def match_player(
    judge: Judge, group: Group, answers: Sequence[str], *, step: int, both_orders: bool
) -> Callable[[list[tuple[int, int]]], Awaitable[list[float]]]:
    """A `play` function for `single_elimination` over answer indices of one group."""

    async def play(matches: list[tuple[int, int]]) -> list[float]:
        texts = [(answers[a], answers[b]) for a, b in matches]
        return await judge_pairs(judge, group, texts, step=step, both_orders=both_orders)

    return play
