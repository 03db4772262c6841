"""How RankBuffer ranks one group against its query's anchors: the extension point of its variants.

A `RankingStrategy` gets the anchor texts (worst -> best) and the group's unique valid answers
and returns a `Ranking`: each answer's insertion position 0..K, the buckets C_p in order, and
what it cost. `RankBufferReward` does the rest (buffer initialization, maintenance, state),
whichever strategy ranked. Two strategies ship: `CoarseToFine`, the paper's coarse and fine rounds
(Eq. 6-8, `rank_buffer` steps 2-3), and `rank_buffer_plus.MultiLookRanking`.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judging.protocol import Judge, ask
from ..judging.requests import CoarseRequest, ListwiseRequest
from ..judging.seeding import seeded_rng
from .base import Group, GroupJudgingFailed, require
from .display_audit import DETAILS_KEY, ask_listwise, new_tally
from .verdicts import check_order, check_position


@dataclass
class Ranking:
    """One group's ranking over unique-answer indices (what a `RankingStrategy` returns).

    `positions[u]`: answer u's insertion position 0..K; `buckets[p]`: the answers at position p,
    worst -> best, p = 0..K; `fine_calls`: listwise calls that ordered buckets; `unranked`: buckets
    whose fine call failed (one tie block each, and no maintenance from this group) with the
    failures' messages in `failures`; `ties`: every bucket is one tie block (no fine ranking);
    `coarse_calls`: placement calls when not one per answer; `order`: the final order worst ->
    best when it is not the buckets' concatenation; `extra`: more per-group details.
    """

    positions: list[int]
    buckets: list[list[int]]
    fine_calls: int
    unranked: frozenset[int] = frozenset()
    failures: tuple[str, ...] = ()
    ties: bool = False
    coarse_calls: int | None = None
    order: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def blocks(self) -> list[list[int]]:
        """Tie blocks worst -> best: the order's answers one by one, else each bucket in turn, one
        block per answer, or one block for the whole bucket when it has no fine order."""
        if self.order is not None and not self.ties:
            return [[u] for u in self.order]
        blocks: list[list[int]] = []
        for p, bucket in enumerate(self.buckets):
            if self.ties or p in self.unranked:
                blocks.extend([list(bucket)] if bucket else [])
            else:
                blocks.extend([u] for u in bucket)
        return blocks


class RankingStrategy(abc.ABC):
    """Places a group's answers among a buffer's anchors and orders them (module docstring)."""

    @abc.abstractmethod
    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        """Rank `answers` against `anchors` (texts, worst -> best); raise `GroupJudgingFailed` when
        the placement failed."""


def listwise_request(group: Group, texts: Sequence[str], step: int) -> ListwiseRequest:
    """Order `texts` worst -> best, for `group`'s query."""
    return group.request(ListwiseRequest, step=step, candidates=tuple(texts))


class CoarseToFine(RankingStrategy):
    """The paper's coarse round, then fine round (Eq. 6-8; module docstring).

    Args:
        judge: answers `CoarseRequest` and `ListwiseRequest`.
        fine: order buckets of >= 2 answers with one listwise call each; False: the coarse_only ablation,
            each bucket one tie block, and a seeded shuffle orders it for maintenance.
        show_anchor_text: False is the order_only control (anchor IDs without their texts; Sec. 4.5, App. H).
        seed: seeds the coarse_only shuffle (`seeded_rng(seed, query_id, step, position)`).
        reshuffle_check: fraction of listwise calls also asked under another shuffle (`display_audit`).
    """

    def __init__(self, judge: Judge, *, fine: bool = True, show_anchor_text: bool = True, seed: int = 0,
                 reshuffle_check: float = 0.0):  # fmt: skip
        self.judge = judge
        self.fine = fine
        self.show_anchor_text = show_anchor_text
        self.seed = seed
        self.reshuffle_check = reshuffle_check

    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        K, shown = len(anchors), tuple(anchors)
        coarse = [
            group.request(CoarseRequest, step=step, anchors=shown, candidate=a, show_anchor_text=self.show_anchor_text)
            for a in answers
        ]
        verdicts = require(await asyncio.gather(*(ask(self.judge, r) for r in coarse)))
        positions = [check_position(v, K) for v in verdicts]
        buckets: list[list[int]] = [[] for _ in range(K + 1)]
        for u, p in enumerate(positions):
            buckets[p].append(u)
        to_rank = [p for p, b in enumerate(buckets) if len(b) >= 2]
        if not self.fine:
            for p in to_rank:  # no fine information: a seeded order picks maintenance anchors
                seeded_rng(self.seed, group.query_id, step, p).shuffle(buckets[p])
            return Ranking(positions, buckets, 0, ties=True)
        requests = [listwise_request(group, [answers[u] for u in buckets[p]], step) for p in to_rank]
        unranked, failures, tally = set(), [], new_tally()
        verdicts = await asyncio.gather(*(ask_listwise(self.judge, r, tally, self.reshuffle_check) for r in requests))
        for p, verdict in zip(to_rank, verdicts, strict=True):
            try:
                buckets[p] = [buckets[p][j] for j in check_order(require([verdict])[0], len(buckets[p]))]
            except GroupJudgingFailed as exc:  # keep the coarse bucket as one tie block
                unranked.add(p)
                failures.append(str(exc))
        return Ranking(positions, buckets, len(to_rank), frozenset(unranked), tuple(failures),
                       extra={DETAILS_KEY: tally})  # fmt: skip
