"""ArenaRL: seed comparisons, seeded bracket, both-order judging, rank rewards."""

import asyncio

import pytest

from trl_rankreward.rewards.arena import ArenaReward
from trl_rankreward.rewards.base import Group
from trl_rankreward.testing import OracleJudge

RUBRICS = [{"text": "helpful", "weight": 1}]


def _score(method, group, judge):
    (result,) = asyncio.run(judge.run_in_rounds(method.score([group], epoch=0, step=0)))
    return result


def test_arena_four_fully_determined():
    # seed c0 (q=2). Anchor scores: c1 beats it (1), c2 and c3 lose (0), c0 itself 1/2.
    # Seeding: c1, c0, then {c2, c3}. Bracket of 4 (seeds 1-4, 2-3): c1 and c0 win, c1 wins the final.
    # Order: c2, c3 (out in round 1, anchor 0: tied, positions 0,1), c0 (round 2), c1 (champion).
    # Eq. 9 with G=4: tied mean position 0.5 -> -2/3; position 2 -> 1/3; position 3 -> 1
    judge = OracleJudge({"c0": 2, "c1": 3, "c2": 0, "c3": 1}, gated=True)
    res = _score(ArenaReward(judge), Group("q", "Q?", RUBRICS, ["c0", "c1", "c2", "c3"]), judge)
    assert res.rewards == pytest.approx([1 / 3, 1.0, -2 / 3, -2 / 3])
    assert res.details["anchor_scores"] == [0.5, 1.0, 0.0, 0.0]
    # 3 seed matches + 3 tournament matches, both orders: 12 requests; rounds 1 + log2(4) = 3
    assert res.details["matches"] == 6 and len(judge.requests) == 12 == res.details["requests"]
    assert judge.rounds == 3 == res.details["rounds"]
    # round 1: every other answer against the seed, once per display order
    assert sorted((r.a, r.b, r.display) for r in judge.requests[:6]) == [
        (c, "c0", d) for c in ("c1", "c2", "c3") for d in ("ab", "ba")
    ]


def test_arena_eight_costs_14_matches_28_requests_4_rounds():
    texts = [f"c{i}" for i in range(8)]
    quality = dict(zip(texts, [3, 0, 7, 1, 5, 2, 6, 4], strict=True))
    judge = OracleJudge(quality, gated=True)
    res = _score(ArenaReward(judge), Group("q", "Q?", RUBRICS, texts), judge)
    assert res.details["matches"] == 14 and len(judge.requests) == 28 == res.details["requests"]
    assert judge.rounds == 4 == res.details["rounds"]
    # anchors vs seed c0 (q=3): c2, c4, c6, c7 win (1); c1, c3, c5 lose (0). Seeds 1-4 are the four
    # winners, who beat seeds 5-8 in round 1. Out in round 1: c0 (anchor 1/2, position 3 -> -1/7) and
    # c1, c3, c5 (anchor 0, tied at positions 0-2, mean 1 -> -5/7). c2 (q=7) is champion (1); of
    # c4, c6, c7 two go out in round 2 (tied, positions 4-5 -> 2/7) and one is runner-up (5/7).
    r = res.rewards
    assert r[2] == pytest.approx(1.0) and r[0] == pytest.approx(-1 / 7)
    assert [r[1], r[3], r[5]] == pytest.approx([-5 / 7] * 3)
    assert sorted([r[4], r[6], r[7]]) == pytest.approx([2 / 7, 2 / 7, 5 / 7])


def test_arena_tied_final_goes_to_higher_seed():
    # c0 (seed) and c1 tie (anchor 1/2 each), c2 loses (0). Bracket of 3: seed 1 has a bye,
    # seed 2 beats c2, the final is a tie won by seed 1. So {c0, c1} get {1, 0}; c2 gets -1.
    judge = OracleJudge({"c0": 1, "c1": 1, "c2": 0})
    (res,) = asyncio.run(ArenaReward(judge).score([Group("q", "Q?", RUBRICS, ["c0", "c1", "c2"])], epoch=0, step=0))
    assert sorted(res.rewards[:2]) == pytest.approx([0.0, 1.0]) and res.rewards[2] == pytest.approx(-1.0)
    # 2 seed matches + 2 tournament matches, both orders
    assert len(judge.requests) == 8 == res.details["requests"]


def test_arena_seed_is_first_valid_answer():
    judge = OracleJudge({"x": 1, "y": 2})
    (res,) = asyncio.run(ArenaReward(judge).score([Group("q", "Q?", RUBRICS, ["", "x", "y"])], epoch=0, step=0))
    # seed x; y beats it; bracket of 2: y wins. Order: invalid, x, y -> -1, 0, 1 (G=3)
    assert res.rewards == pytest.approx([-1.0, 0.0, 1.0])
    assert all("x" in (r.a, r.b) for r in judge.requests)


def test_arena_single_order_option_and_failure():
    judge = OracleJudge({"c0": 2, "c1": 3, "c2": 0, "c3": 1})
    group = Group("q", "Q?", RUBRICS, ["c0", "c1", "c2", "c3"])
    (res,) = asyncio.run(ArenaReward(judge, both_orders=False).score([group], epoch=0, step=0))
    assert len(judge.requests) == 6 == res.details["requests"]
    assert all(r.display == "auto" for r in judge.requests)
    failing = OracleJudge({"c0": 2, "c1": 3, "c2": 0, "c3": 1}, fail=lambda r: r.display == "ba")
    (res,) = asyncio.run(ArenaReward(failing).score([group], epoch=0, step=0))
    assert res.neutral and res.rewards == [0.0] * 4
