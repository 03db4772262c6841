"""RankBuffer+ (`rank_buffer_plus`): RankBuffer with more than one look per rollout. Ours, not the paper's.

The paper's RankBuffer sees each rollout once, so the judge's per-call noise is never averaged (Sec. 3.3).
This variant keeps the buffer, its maintenance (Algorithm 2, capped by `max_anchors`) and the rank rewards
(Eq. 9-10), and ranks a group by a placement ("coarse": the paper's rounds; "joint": one `ListwiseRequest`
over the K anchors and U answers, an answer's position the count of anchors ranked below it, so anchors out of
their known order break nothing and the anchors' texts are sent once), a second look (one listwise call over
the answers, in the placement's round) and extra looks over the answers the looks dispute (none when they
agree), fused by Borda count (rank sum, ties broken by the placement). Maintenance uses the placement's
buckets in fused order. A failed placement is handled as in the paper; a failed second or extra look is
skipped and counted (`look_failures`), never neutral.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judging.requests import Judge
from .base import Group
from .options import check_int, option
from .rank_buffer import (
    DETAILS_KEY,
    AnchorBufferOptions,
    BufferManager,
    CoarseToFine,
    RankBufferReward,
    Ranking,
    RankingStrategy,
    RuleManager,
    ask_listwise,
    listwise_request,
    new_tally,
    order_all,
    order_or_none,
)


@dataclass
class RankBufferPlusOptions(AnchorBufferOptions):
    """The anchor buffer's options, the variants that rank every answer, and the looks (no LLM manager)."""

    k0: int = field(default=2, metadata=AnchorBufferOptions.__dataclass_fields__["k0"].metadata)
    buffer_variant: str = option(
        "dynamic",
        "'dynamic' (Algorithm 2 maintenance) or 'static' (the buffer frozen after its first epoch).",
        choices=["dynamic", "static"],
    )
    placement: str = option(
        "joint",
        "'coarse' (the paper's coarse + fine rounds) or 'joint' (one listwise call over anchors and answers).",
        choices=["coarse", "joint"],
    )
    second_look: bool = option(True, "One listwise call over the group's answers, fused with the placement order.")
    extra_calls: int = option(2, "At most this many more listwise calls per group, over the disputed answers.")
    extra_scope: str = option(
        "window",
        "Extra looks over the disputed answers ('set') or the stretch of the fused order between the "
        "first and the last of them ('window').",
        choices=["set", "window"],
    )
    disagreement: int = option(1, "Places two looks must differ by for an answer to count as disputed.")
    max_anchors: int | None = option(
        2, "Cap of the buffer after maintenance (evenly spaced, both ends kept); None: no cap."
    )

    def __post_init__(self):
        super().__post_init__()
        check_int("extra_calls", self.extra_calls, 0)
        check_int("disagreement", self.disagreement, 1)
        if self.max_anchors is not None:
            check_int("max_anchors", self.max_anchors, 0, " or None")
            if self.max_anchors < self.k0:
                raise ValueError(
                    f"max_anchors={self.max_anchors} is below k0={self.k0}: the first buffer would not fit; raise it"
                )
        self.second_look = bool(self.second_look)


class RankBufferPlusReward(RankBufferReward):
    """RankBuffer with joint placement, a second look and budgeted extra looks; `RankBufferReward`'s arguments."""

    name = "rank_buffer_plus"
    options_class = RankBufferPlusOptions
    citation = None  # ours: no paper

    def make_ranking(self) -> RankingStrategy:
        o = self.options
        if o.placement == "coarse":
            placement = CoarseToFine(self.judge, seed=self.seed, reshuffle_check=o.reshuffle_check)
        else:
            placement = JointPlacement(self.judge, reshuffle_check=o.reshuffle_check)
        return MultiLookRanking(self.judge, placement, o)

    def make_manager(self) -> BufferManager:
        o = self.options
        return RuleManager(o.inactivity_epochs, static=o.buffer_variant == "static", max_anchors=o.max_anchors)

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "placement": self.options.placement, "max_anchors": self.options.max_anchors}


class JointPlacement(RankingStrategy):
    """Placement "joint": one `ListwiseRequest` over the anchors and the answers together."""

    def __init__(self, judge: Judge, *, reshuffle_check: float = 0.0):
        self.judge = judge
        self.reshuffle_check = reshuffle_check

    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        K, U = len(anchors), len(answers)
        if U == 0:
            return Ranking([], [[] for _ in range(K + 1)], 0, coarse_calls=0)
        tally = new_tally()
        order = await order_all(self.judge, group, [*anchors, *answers], tally, self.reshuffle_check, step=step)
        positions, buckets, below = [0] * U, [[] for _ in range(K + 1)], 0
        for i in order:  # worst -> best: an answer's position counts the anchors seen before it
            if i < K:
                below += 1
            else:
                positions[i - K] = below
                buckets[below].append(i - K)
        return Ranking(positions, buckets, 0, coarse_calls=1, extra={DETAILS_KEY: tally})


class MultiLookRanking(RankingStrategy):
    """A placement, the second look in the same round, then extra looks over disputed answers, fused by
    Borda count; buckets keep the placement's, in fused order. `options`: the looks' settings."""

    def __init__(self, judge: Judge, placement: RankingStrategy, options: RankBufferPlusOptions):
        self.judge = judge
        self.placement = placement
        self.options = options

    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        o, tally = self.options, new_tally()  # the looks' audit; the placement's is merged in below
        place = self._place(group, anchors, answers, step=step)
        if o.second_look and len(answers) >= 2:
            look = ask_listwise(self.judge, listwise_request(group, answers, step), tally, o.reshuffle_check)
            ranking, *looks = await asyncio.gather(place, look)
        else:
            ranking, looks = await place, []
        orders, failures = [[u for bucket in ranking.buckets for u in bucket]], 0
        for verdict in looks:
            order = order_or_none(verdict, len(answers))
            failures += order is None
            orders += [order] if order is not None else []
        fused = borda(orders, len(answers))
        for _ in range(o.extra_calls):
            window = disputed_window(orders, fused, o.disagreement, o.extra_scope)
            if len(window) < 2:
                break
            request = listwise_request(group, [answers[u] for u in window], step)
            verdict = await ask_listwise(self.judge, request, tally, o.reshuffle_check)
            sub = order_or_none(verdict, len(window))
            if sub is None:
                failures += 1
                continue
            orders.append(_embed([window[j] for j in sub], fused))
            fused = borda(orders, len(answers))
        rank = {u: i for i, u in enumerate(fused)}
        ranking.buckets = [sorted(bucket, key=rank.__getitem__) for bucket in ranking.buckets]
        ranking.order = fused if not ranking.unranked else None
        for key, value in ranking.extra.get(DETAILS_KEY, {}).items():
            tally[key] += value
        ranking.extra.update({"look_calls": len(orders) - 1, "look_failures": failures, DETAILS_KEY: tally})
        return ranking

    async def _place(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        ranking = await self.placement.rank(group, anchors, answers, step=step)
        placing = len(answers) if ranking.coarse_calls is None else ranking.coarse_calls  # None: one per answer
        ranking.extra["placement_calls"] = placing + ranking.fine_calls
        return ranking


def borda(orders: Sequence[Sequence[int]], n: int) -> list[int]:
    """Fuse orders (each worst -> best over range(n)) by rank sum; ties keep the first order's sequence."""
    total = [0] * n
    for order in orders:
        for place, u in enumerate(order):
            total[u] += place
    first = {u: i for i, u in enumerate(orders[0])}
    return sorted(range(n), key=lambda u: (total[u], first[u]))


def disputed_window(orders: Sequence[Sequence[int]], fused: Sequence[int], disagreement: int, scope: str) -> list[int]:
    """The answers whose places in two of `orders` differ by >= `disagreement`, in fused order (scope "set"),
    or the stretch of `fused` from the first to the last of them ("window"); empty when none."""
    ranks = [{u: i for i, u in enumerate(order)} for order in orders]
    spread = [max(r[u] for r in ranks) - min(r[u] for r in ranks) for u in fused]
    disputed = [i for i, d in enumerate(spread) if d >= disagreement]
    if not disputed:
        return []
    if scope == "set":
        return [fused[i] for i in disputed]
    return list(fused[disputed[0] : disputed[-1] + 1])


def _embed(sub: Sequence[int], fused: Sequence[int]) -> list[int]:
    """A full order: `fused` with the places of `sub`'s members refilled in `sub`'s order."""
    members = set(sub)
    it = iter(sub)
    return [next(it) if u in members else u for u in fused]
