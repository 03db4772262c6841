"""`ranking_strategy`: the paper's coarse-to-fine ranking on its own, and `Ranking.blocks`, hand-computed.

Anchors a1 < a2 (qualities 1, 3) give positions 0 (below 1), 1 (between) and 2 (above 3).
Answers x (0.5), y (2), z (2.5), w (4): positions 0, 1, 1, 2, so buckets [x] [y z] [w] and
one fine call, over bucket 1, which orders y before z.
"""

import asyncio

import pytest

from trl_rankreward.judging.requests import CoarseRequest, ListwiseRequest
from trl_rankreward.rewards.base import Group, GroupJudgingFailed
from trl_rankreward.rewards.ranking_strategy import CoarseToFine, Ranking
from trl_rankreward.testing import OracleJudge

QUALITY = {"a1": 1, "a2": 3, "x": 0.5, "y": 2, "z": 2.5, "w": 4}
ANCHORS = ["a1", "a2"]
ANSWERS = ["z", "x", "w", "y"]  # answer indices: z 0, x 1, w 2, y 3
GROUP = Group("q", "Q?", [], ["unused"])


def _rank(strategy):
    return asyncio.run(strategy.rank(GROUP, ANCHORS, ANSWERS, step=0))


def test_coarse_to_fine_places_then_orders_crowded_buckets():
    judge = OracleJudge(QUALITY)
    ranking = _rank(CoarseToFine(judge))
    assert ranking.positions == [1, 0, 2, 1]  # z, x, w, y
    assert ranking.buckets == [[1], [3, 0], [2]]  # bucket 1 ordered worst -> best: y (3) before z (0)
    assert (ranking.fine_calls, ranking.unranked, ranking.ties) == (1, frozenset(), False)
    assert dict(judge.counts) == {"coarse": 4, "listwise": 1}
    assert ranking.blocks() == [[1], [3], [0], [2]]  # one answer per block: the full order


def test_coarse_only_ties_each_bucket_and_order_only_hides_anchor_texts():
    judge = OracleJudge(QUALITY)
    ranking = _rank(CoarseToFine(judge, fine=False, show_anchor_text=False))
    assert judge.counts == {"coarse": 4}  # no fine calls
    assert ranking.ties and sorted(ranking.buckets[1]) == [0, 3]  # a seeded shuffle of z, y
    assert [sorted(b) for b in ranking.blocks()] == [[1], [0, 3], [2]]  # bucket 1 is one tie block
    assert all(not r.show_anchor_text for r in judge.requests if isinstance(r, CoarseRequest))


def test_a_failed_fine_call_keeps_its_bucket_as_one_tie_block_and_a_failed_coarse_call_raises():
    fine_fails = OracleJudge(QUALITY, fail=lambda r: isinstance(r, ListwiseRequest))
    ranking = _rank(CoarseToFine(fine_fails))
    assert ranking.unranked == frozenset({1}) and len(ranking.failures) == 1
    assert ranking.blocks() == [[1], [0, 3], [2]]  # x | z, y tied (coarse order kept) | w
    with pytest.raises(GroupJudgingFailed):
        _rank(CoarseToFine(OracleJudge(QUALITY, fail=lambda r: isinstance(r, CoarseRequest))))


def test_blocks_follow_an_explicit_order_and_skip_empty_buckets():
    # An order (RankBuffer+'s fused looks) replaces the buckets' concatenation; empty buckets make no block.
    assert Ranking([0, 0], [[0, 1], [], []], 1, order=[1, 0]).blocks() == [[1], [0]]
    assert Ranking([0, 2], [[0], [], [1]], 0, ties=True).blocks() == [[0], [1]]
