"""Tournament-GRPO and the single-elimination bracket helper."""

import asyncio
from collections import Counter

import pytest

from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.pair_judging import bracket_slots, single_elimination
from trl_rankreward.rewards.tournament import TournamentReward
from trl_rankreward.testing import OracleJudge

RUBRICS = [{"text": "helpful", "weight": 1}]
EIGHT = [f"t{i}" for i in range(8)]


def _score(method, group, judge, step=0):
    (result,) = asyncio.run(judge.run_in_rounds(method.score([group], epoch=0, step=step)))
    return result


def test_bracket_slots_put_byes_against_best_seeds():
    # standard 8-slot seeding 1, 8, 4, 5, 2, 7, 3, 6; seeds 6..8 do not exist for 5 entrants
    assert bracket_slots([10, 11, 12, 13, 14]) == [10, None, 13, 14, 11, None, 12, None]
    assert bracket_slots([7]) == [7] and bracket_slots([]) == [None]


def test_single_elimination_with_byes():
    async def play(matches):  # lower id is better
        return [1.0 if a < b else 0.0 for a, b in matches]

    res = asyncio.run(single_elimination([0, 1, 2, 3, 4], play, lambda a, b: a))
    # round 1: 0, 1, 2 have byes, 3 beats 4; round 2: 0 beats 3, 1 beats 2; final: 0 beats 1
    assert res.score == {0: 2.0, 1: 1.0, 2: 0.0, 3: 1.0, 4: 0.0}
    assert res.survived == {0: 3, 1: 2, 2: 1, 3: 1, 4: 0}
    assert res.matches == 4 and res.rounds == 3


def test_single_elimination_tie_splits_score_and_uses_tie_break():
    async def play(matches):
        return [0.5] * len(matches)

    res = asyncio.run(single_elimination([0, 1], play, lambda a, b: b))
    assert res.score == {0: 0.5, 1: 0.5} and res.survived == {0: 0, 1: 1}


def test_tournament_eight_costs_21_requests_in_3_rounds():
    judge = OracleJudge({t: i for i, t in enumerate(EIGHT)}, gated=True)
    res = _score(TournamentReward(judge), Group("q", "Q?", RUBRICS, EIGHT), judge)
    assert len(judge.requests) == 21 == res.details["requests"]  # 3 brackets x 7 matches
    assert judge.rounds == 3 == res.details["rounds"]  # brackets concurrent, 3 rounds each
    # round 1 of the three brackets (first 12 requests): every answer plays once per bracket
    first_round = Counter(t for r in judge.requests[:12] for t in (r.a, r.b))
    assert first_round == {t: 3 for t in EIGHT}
    # every match hands out exactly one point: 21 in all
    assert sum(res.details["wins"]) == pytest.approx(21)
    # the best answer wins 3 matches in each of 3 brackets: 2*9/9 - 1 = 1; the worst loses at once: -1
    assert res.rewards[7] == pytest.approx(1.0) and res.rewards[0] == pytest.approx(-1.0)
    assert res.order[-1] == 7


def test_tournament_shuffles_are_seeded():
    quality = {t: i for i, t in enumerate(EIGHT)}
    group = Group("q", "Q?", RUBRICS, EIGHT)

    def pairs(seed, step):
        judge = OracleJudge(quality)
        asyncio.run(TournamentReward(judge, seed=seed).score([group], epoch=0, step=step))
        return [(r.a, r.b) for r in judge.requests]

    assert pairs(0, 0) == pairs(0, 0)
    assert pairs(0, 0) != pairs(0, 1) and pairs(0, 0) != pairs(1, 0)


def test_tournament_duplicates_and_invalid():
    judge = OracleJudge({"a": 2, "b": 1})
    (res,) = asyncio.run(
        TournamentReward(judge).score([Group("q", "Q?", RUBRICS, ["a", "a", "b", ""])], epoch=0, step=0)
    )
    # 2 unique answers: one match per bracket, 3 requests, R = 1 round
    # a: 3 wins of B*R = 3 -> 1; b: 0 -> -1; invalid -1
    assert res.rewards == pytest.approx([1.0, 1.0, -1.0, -1.0])
    assert len(judge.requests) == 3 == res.details["requests"] and res.details["rounds"] == 1


def test_tournament_five_answers_use_byes():
    texts = EIGHT[:5]
    judge = OracleJudge({t: i for i, t in enumerate(texts)}, gated=True)
    res = _score(TournamentReward(judge, brackets=2), Group("q", "Q?", RUBRICS, texts), judge)
    # 5 entrants: 4 matches per bracket (3 byes in round 1), ceil(log2 5) = 3 rounds
    assert len(judge.requests) == 8 == res.details["requests"] and judge.rounds == 3 == res.details["rounds"]
    # the best answer wins every match it plays, 2 or 3 per bracket (3 without a bye); 8 points in all
    assert 4 <= res.details["wins"][4] <= 6 and sum(res.details["wins"]) == pytest.approx(8)
    # top = B * R = 6 possible wins: the best answer's reward is 2w/6 - 1 >= 1/3
    assert res.rewards[4] == pytest.approx(2 * res.details["wins"][4] / 6 - 1)


def test_tournament_failure_is_neutral_and_bad_brackets_rejected():
    judge = OracleJudge({t: i for i, t in enumerate(EIGHT)}, fail=lambda r: "t7" in (r.a, r.b))
    (res,) = asyncio.run(TournamentReward(judge).score([Group("q", "Q?", RUBRICS, EIGHT)], epoch=0, step=0))
    assert res.neutral and res.rewards == [0.0] * 8
    with pytest.raises(ValueError, match="brackets"):
        TournamentReward(judge, brackets=0)
