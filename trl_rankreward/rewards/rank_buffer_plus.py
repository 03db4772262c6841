"""RankBuffer+ (`rank_buffer_plus`): RankBuffer with more than one look per rollout. Ours, not the paper's.

The paper's RankBuffer (`rank_buffer`) sees each rollout once: one coarse call places it
among the anchors and at most one listwise call orders its bucket, so the judge's per-call
noise is never averaged (RankBuffer paper, Sec. 3.3). This variant keeps the buffer, its
maintenance (Algorithm 2) and the rank rewards (Eq. 9-10), and changes how a group is
ranked:

1. **Placement** (`placement`):
   - `"coarse"`: the paper's coarse round (one `CoarseRequest` per unique answer) and fine
     round (one `ListwiseRequest` per bucket of >= 2 answers);
   - `"joint"`: one `ListwiseRequest` over the K anchors and the U answers together. An
     answer's position is the number of anchors the verdict puts below it (counted, so
     anchors judged out of their known order do not break it) and its bucket follows, as
     with a coarse call. Every answer is judged against the same perception of every anchor:
     anchor noise can shift a bucket boundary but cannot reorder two answers, and the
     anchors' texts are sent once per group instead of once per answer.
2. **Second look** (`second_look`): one more `ListwiseRequest` over the U answers only, in the
   placement's round, fused with the placement order by Borda count (rank sum, ties broken by it).
3. **Extra looks** (`extra_calls`, `extra_scope`, `disagreement`: their helps say how): more listwise
   calls over the answers the looks so far dispute, each fused in by Borda; a group whose looks agree
   costs nothing more. The defaults ranked best on every judge of docs/benchmarks.md's judge family.

Maintenance uses the placement's buckets, with each bucket's answers in the fused order
(so interval refinement picks the fused median), and `max_anchors` caps the buffer.

In code: `RankBufferPlusOptions`; the ranking is `MultiLookRanking` over a placement
(`rank_buffer.CoarseToFine` or `JointPlacement`), both `RankingStrategy`s, and the
maintenance `rank_buffer.RuleManager` with the cap; `RankBufferPlusReward` only picks them.

Failure policy: as the paper's for the placement (a failed coarse call or joint call makes
the group neutral; a failed fine call keeps its bucket as one tie block). A failed second
or extra look is skipped: the order is fused from the looks that came back, the group is
not neutral, and `details["look_failures"]` counts it.

Per-group `details` add to RankBuffer's: `placement_calls`, `look_calls` (second and extra
looks that came back), `look_failures`. Every listwise answer (joint placement, fine calls,
looks) is audited against its display order in `details["listwise_display"]` (`rank_buffer`'s display audit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judging.requests import Judge
from .base import Group
from .options import check_int
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
    listwise_order,
    listwise_request,
    new_tally,
    order_or_none,
)

PLACEMENTS = ("coarse", "joint")
#: RankBuffer's variants that rank every answer (`rank_buffer.VARIANTS` without the Sec. 4.5 ablations)
VARIANTS = ("dynamic", "static")
SCOPES = ("set", "window")


@dataclass
class RankBufferPlusOptions(AnchorBufferOptions):
    """The anchor buffer's options, the two variants that rank every answer, and the looks (module docstring);
    the maintenance is Algorithm 2 (no LLM buffer manager)."""

    k0: int = field(default=2, metadata=AnchorBufferOptions.__dataclass_fields__["k0"].metadata)
    buffer_variant: str = field(
        default="dynamic",
        metadata={
            "help": "'dynamic' (Algorithm 2 maintenance) or 'static' (the buffer frozen after its first epoch).",
            "choices": list(VARIANTS),
        },
    )
    placement: str = field(
        default="joint",
        metadata={
            "help": "'coarse' (the paper's coarse + fine rounds) or 'joint' (one listwise call over anchors and "
            "answers).",
            "choices": list(PLACEMENTS),
        },
    )
    second_look: bool = field(
        default=True, metadata={"help": "One listwise call over the group's answers, fused with the placement order."}
    )
    extra_calls: int = field(
        default=2, metadata={"help": "At most this many more listwise calls per group, over the disputed answers."}
    )
    extra_scope: str = field(
        default="window",
        metadata={
            "help": "Extra looks over the disputed answers ('set') or the stretch of the fused order between the "
            "first and the last of them ('window').",
            "choices": list(SCOPES),
        },
    )
    disagreement: int = field(
        default=1, metadata={"help": "Places two looks must differ by for an answer to count as disputed."}
    )
    max_anchors: int | None = field(
        default=2,
        metadata={"help": "Cap of the buffer after maintenance (evenly spaced, both ends kept); None: no cap."},
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
    """RankBuffer with joint placement, a second look and budgeted extra looks (module docstring); takes
    `RankBufferReward`'s arguments."""

    name = "rank_buffer_plus"
    options_class = RankBufferPlusOptions
    citation = None  # ours: no paper

    def make_ranking(self) -> RankingStrategy:
        o = self.options
        if o.placement == "coarse":
            placement = CoarseToFine(self.judge, seed=self.seed, reshuffle_check=o.reshuffle_check)
        else:
            placement = JointPlacement(self.judge, reshuffle_check=o.reshuffle_check)
        return MultiLookRanking(self.judge, placement, second_look=o.second_look, extra_calls=o.extra_calls,
                              extra_scope=o.extra_scope, disagreement=o.disagreement,
                              reshuffle_check=o.reshuffle_check)  # fmt: skip

    def make_manager(self) -> BufferManager:
        o = self.options
        return RuleManager(o.inactivity_epochs, static=o.buffer_variant == "static", max_anchors=o.max_anchors)

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "placement": self.options.placement, "max_anchors": self.options.max_anchors}


class JointPlacement(RankingStrategy):
    """One `ListwiseRequest` over the anchors and the answers together (module docstring, placement "joint")."""

    def __init__(self, judge: Judge, *, reshuffle_check: float = 0.0):
        self.judge = judge
        self.reshuffle_check = reshuffle_check

    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        K, U = len(anchors), len(answers)
        if U == 0:
            return Ranking([], [[] for _ in range(K + 1)], 0, coarse_calls=0)
        request, tally = listwise_request(group, [*anchors, *answers], step), new_tally()
        order = await listwise_order(self.judge, request, tally, self.reshuffle_check)
        positions, buckets, below = [0] * U, [[] for _ in range(K + 1)], 0
        for i in order:  # worst -> best: an answer's position counts the anchors seen before it
            if i < K:
                below += 1
            else:
                positions[i - K] = below
                buckets[below].append(i - K)
        return Ranking(positions, buckets, 0, coarse_calls=1, extra={DETAILS_KEY: tally})


class MultiLookRanking(RankingStrategy):
    """A placement strategy, then the second look in the same round, then extra looks over disputed
    answers, fused by Borda count (module docstring); buckets keep the placement's, in fused order. The
    knobs have no defaults here: `RankBufferPlusOptions` holds them, once."""

    def __init__(self, judge: Judge, placement: RankingStrategy, *, second_look: bool, extra_calls: int,
                 extra_scope: str, disagreement: int, reshuffle_check: float):  # fmt: skip
        self.judge = judge
        self.placement = placement
        self.second_look = second_look
        self.extra_calls = extra_calls
        self.extra_scope = extra_scope
        self.disagreement = disagreement
        self.reshuffle_check = reshuffle_check

    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        tally = new_tally()  # the looks' audit; the placement's is merged in below
        place = self._place(group, anchors, answers, step=step)
        if self.second_look and len(answers) >= 2:
            look = ask_listwise(self.judge, listwise_request(group, answers, step), tally, self.reshuffle_check)
            ranking, second = await asyncio.gather(place, look)
            looks = [second]
        else:
            ranking, looks = await place, []
        placed = [u for bucket in ranking.buckets for u in bucket]
        orders, failures = [placed], 0
        for verdict in looks:
            order = order_or_none(verdict, len(answers))
            failures += order is None
            orders += [order] if order is not None else []
        fused = borda(orders, len(answers))
        for _ in range(self.extra_calls):
            window = disputed_window(orders, fused, self.disagreement, self.extra_scope)
            if len(window) < 2:
                break
            request = listwise_request(group, [answers[u] for u in window], step)
            verdict = await ask_listwise(self.judge, request, tally, self.reshuffle_check)
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
    """Fuse orders (each worst -> best over range(n), or over a subset embedded in the first) by
    rank sum; ties keep the first order's sequence.

    Example: orders [0, 1, 2] and [1, 0, 2] give rank sums 0+1, 1+0, 2+2: 0 and 1 tie at 1 and
    keep the first order, so the fused order is [0, 1, 2].
    """
    total = [0] * n
    for order in orders:
        for place, u in enumerate(order):
            total[u] += place
    first = {u: i for i, u in enumerate(orders[0])}
    return sorted(range(n), key=lambda u: (total[u], first[u]))


def disputed_window(orders: Sequence[Sequence[int]], fused: Sequence[int], disagreement: int, scope: str) -> list[int]:
    """The answers the looks dispute: those whose places in two of `orders` differ by at least
    `disagreement`, in fused order (scope "set"), or the contiguous stretch of `fused` from the
    first to the last of them (scope "window"). Empty when all orders agree that closely.

    Example: orders [0, 1, 2, 3] and [1, 0, 2, 3] with fused [0, 1, 2, 3]: answers 0 and 1
    differ by one place, 2 and 3 agree, so disagreement 1 disputes [0, 1] and 2 disputes nothing.
    """
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


__all__ = [
    "PLACEMENTS",
    "SCOPES",
    "JointPlacement",
    "MultiLookRanking",
    "RankBufferPlusOptions",
    "RankBufferPlusReward",
    "borda",
    "disputed_window",
]
