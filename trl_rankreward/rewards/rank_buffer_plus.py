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
2. **Second look** (`second_look`): one more `ListwiseRequest` over the U answers only,
   issued in the same round as the placement. Its order and the placement order are fused by
   Borda count: rank sum, ties broken by the placement order.
3. **Extra looks** (`extra_calls`): up to that many more listwise calls per group, only over
   the answers whose place the looks so far disagree on (a contiguous window of the fused
   order, from the first to the last answer whose ranks differ by more than
   `disagreement` places), each fused in by Borda as well. A group whose looks agree
   costs nothing more.

4. **Soft flags** (`soft_entropy`, with `soft_placement` and placement "coarse"): an answer
   whose coarse position distribution has an entropy above `soft_entropy` nats (a placement
   the judge was unsure of) is disputed as well; the first extra look goes over the
   disputed answers and the flagged ones with their neighbours in the fused order, within
   the same `extra_calls` budget. Off (None) by default.

Maintenance uses the placement's buckets, with each bucket's answers in the fused order
(so interval refinement picks the fused median).

Failure policy: as the paper's for the placement (a failed coarse call or joint call makes
the group neutral; a failed fine call keeps its bucket as one tie block). A failed second
or extra look is skipped: the order is fused from the looks that came back, the group is
not neutral, and `details["look_failures"]` counts it.

Per-group `details` add to RankBuffer's: `placement_calls`, `look_calls` (second and extra
looks that came back), `look_failures`. Every listwise answer (joint placement, fine calls,
looks) is audited against its display order in `details["listwise_display"]` (`display_audit`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..judging.subsample import select_endpoints
from .anchor_buffer import AnchorBuffer, BufferUpdate
from .base import Group, require
from .display_audit import DETAILS_KEY, ask_listwise, new_tally
from .rank_buffer import RankBufferReward, _Ranking
from .verdicts import check_order, order_or_none

PLACEMENTS = ("coarse", "joint")
SCOPES = ("set", "window")


class RankBufferPlusReward(RankBufferReward):
    """RankBuffer with joint placement, a second look and budgeted extra looks (module docstring).

    Args:
        judge: answers `CoarseRequest` (placement "coarse") and `ListwiseRequest`.
        placement: "coarse" (the paper's coarse + fine rounds) or "joint" (one listwise call
            over anchors and answers).
        second_look: one listwise call over the group's answers, fused with the placement order.
        extra_calls: at most this many more listwise calls per group, over the answers the
            looks disagree on.
        disagreement: ranks (places) two looks must differ by for an answer to count as disputed.
        soft_entropy: with `soft_placement` and placement "coarse", the entropy (nats) above which a
            coarse placement is flagged for an extra look; None (default): no flags.
        **kwargs: `RankBufferReward`'s options (k0, init, inactivity_epochs, variant
            "dynamic" or "static", anchor_store, lambda_fmt, ...).
    """

    name = "rank_buffer_plus"

    def __init__(
        self,
        judge,
        *,
        placement: str = "joint",
        second_look: bool = True,
        extra_calls: int = 2,
        extra_scope: str = "set",
        disagreement: int = 1,
        max_anchors: int | None = 2,
        k0: int = 2,
        soft_entropy: float | None = None,
        **kwargs: Any,
    ):
        super().__init__(judge, k0=k0, **kwargs)
        if self.soft_placement and placement != "coarse":
            raise ValueError(
                f"soft_placement reads the coarse calls' position probabilities, but placement={placement!r} "
                "makes none; set placement='coarse' or soft_placement=False"
            )
        if soft_entropy is not None and not (self.soft_placement and soft_entropy >= 0):
            raise ValueError(
                f"soft_entropy={soft_entropy!r} flags uncertain coarse placements: it needs soft_placement=True "
                "and a value >= 0 (nats)"
            )
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        if extra_scope not in SCOPES:
            raise ValueError(f"extra_scope must be one of {SCOPES}, got {extra_scope!r}")
        if self.variant not in ("dynamic", "static"):
            raise ValueError(
                f"rank_buffer_plus ranks every answer, so variant must be 'dynamic' or 'static', got {self.variant!r}"
            )
        if self.manager is not None:
            raise ValueError(f"rank_buffer_plus keeps the rule-based maintenance (manager=None), got {self.manager!r}")
        for name, value, low in (("extra_calls", extra_calls, 0), ("disagreement", disagreement, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if max_anchors is not None and (isinstance(max_anchors, bool) or not isinstance(max_anchors, int)):
            raise ValueError(f"max_anchors must be None or an integer >= k0, got {max_anchors!r}")
        if max_anchors is not None and max_anchors < k0:
            raise ValueError(f"max_anchors={max_anchors} is below k0={k0}: the first buffer would not fit; raise it")
        self.placement = placement
        self.second_look = bool(second_look)
        self.extra_calls = extra_calls
        self.extra_scope = extra_scope
        self.disagreement = disagreement
        self.max_anchors = max_anchors
        self.soft_entropy = soft_entropy

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "placement": self.placement, "max_anchors": self.max_anchors}

    def _maintain(self, buffer: AnchorBuffer, key_buckets: list[list[str]], epoch: int) -> BufferUpdate:
        """Algorithm 2, then, past `max_anchors`, keep an evenly spaced subset (both ends kept: Select_K0's rule)."""
        update = super()._maintain(buffer, key_buckets, epoch)
        anchors = update.buffer.anchors
        if self.max_anchors is None or len(anchors) <= self.max_anchors:
            return update
        kept_idx = set(select_endpoints(list(range(len(anchors))), self.max_anchors))
        kept = tuple(a for i, a in enumerate(anchors) if i in kept_idx)
        dropped = tuple(a for i, a in enumerate(anchors) if i not in kept_idx)
        b = update.buffer
        capped = AnchorBuffer(kept, b.created_epoch, b.observed_epoch, b.left_epoch, b.right_epoch)
        added = tuple(a for a in update.added if a in kept)  # an anchor added and dropped at once was never there
        pruned = update.pruned + tuple(a for a in dropped if a not in update.added)
        return BufferUpdate(capped, added, pruned)

    # ------------------------------------------------------------------ ranking
    async def _rank(self, group: Group, buffer: AnchorBuffer, answers: list[str], *, step: int) -> _Ranking:
        """Placement and the second look in one round, then extra looks over disputed windows."""
        tally = new_tally()  # the looks' audit; the placement's is merged in below
        place = self._place(group, buffer, answers, step=step)
        if self.second_look and len(answers) >= 2:
            look = ask_listwise(self.judge, self._listwise(group, answers, step), tally, self.reshuffle_check)
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
        flagged = self._flagged(ranking, fused)
        for _ in range(self.extra_calls):
            window = disputed_window(orders, fused, self.disagreement, self.extra_scope)
            if flagged:
                wanted = set(window) | flagged
                window, flagged = [u for u in fused if u in wanted], set()
            if len(window) < 2:
                break
            request = self._listwise(group, [answers[u] for u in window], step)
            verdict = await ask_listwise(self.judge, request, tally, self.reshuffle_check)
            sub = order_or_none(verdict, len(window))
            if sub is None:
                failures += 1
                continue
            orders.append(_embed([window[j] for j in sub], fused))
            fused = borda(orders, len(answers))
        rank = {u: i for i, u in enumerate(fused)}
        buckets = [sorted(bucket, key=rank.__getitem__) for bucket in ranking.buckets]
        ranking.buckets = buckets
        ranking.order = fused if not ranking.unranked else None
        for key, value in ranking.extra.get(DETAILS_KEY, {}).items():
            tally[key] += value
        ranking.extra.update({"look_calls": len(orders) - 1, "look_failures": failures, DETAILS_KEY: tally})
        return ranking

    def _flagged(self, ranking: _Ranking, fused: list[int]) -> set[int]:
        """Answers whose coarse placement is flat (entropy > `soft_entropy`), with their neighbours in `fused`."""
        if self.soft_entropy is None or ranking.soft is None:
            return set()
        flat = {u for u, s in enumerate(ranking.soft) if s is not None and s.entropy > self.soft_entropy}
        ranking.extra["soft_flagged"] = len(flat)
        return {fused[j] for i, u in enumerate(fused) if u in flat for j in (i - 1, i, i + 1) if 0 <= j < len(fused)}

    async def _place(self, group: Group, buffer: AnchorBuffer, answers: list[str], *, step: int) -> _Ranking:
        if self.placement == "coarse":
            ranking = await super()._rank(group, buffer, answers, step=step)
            ranking.extra["placement_calls"] = len(answers) + ranking.fine_calls
            return ranking
        anchors = [self.store.get(k) for k in buffer.keys]
        K, U = len(anchors), len(answers)
        if U == 0:
            return _Ranking([], [[] for _ in range(K + 1)], 0, coarse_calls=0, extra={"placement_calls": 0})
        request, tally = self._listwise(group, anchors + answers, step), new_tally()
        (verdict,) = require([await ask_listwise(self.judge, request, tally, self.reshuffle_check)])
        order = check_order(verdict, K + U)
        positions, buckets, below = [0] * U, [[] for _ in range(K + 1)], 0
        for i in order:  # worst -> best: an answer's position counts the anchors seen before it
            if i < K:
                below += 1
            else:
                positions[i - K] = below
                buckets[below].append(i - K)
        return _Ranking(positions, buckets, 0, coarse_calls=1, extra={"placement_calls": 1, DETAILS_KEY: tally})


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


__all__ = ["PLACEMENTS", "SCOPES", "RankBufferPlusReward", "borda", "disputed_window"]
