"""The pairwise baselines with an oracle judge: RRC-SCR, RRC-AGR, Pairwise Rank and their shared pair
helpers; Tournament-GRPO and the single-elimination bracket; ArenaRL (seed comparisons, seeded bracket,
both-order judging, rank rewards).
"""

import asyncio
from collections import Counter

import pytest

from trl_rankreward.judging.requests import PairwiseRequest
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.pairwise import (
    ArenaReward,
    PairwiseRankReward,
    PairwiseWinRateReward,
    ReferenceWinRateReward,
    TournamentReward,
    all_pairs,
    bracket_slots,
    shared_ranks,
    single_elimination,
    win_rates,
)
from trl_rankreward.testing import OracleJudge

RUBRICS = [{"text": "helpful", "weight": 1}]
EIGHT = [f"t{i}" for i in range(8)]


def _score(method, group, judge, step=0):
    (result,) = asyncio.run(judge.run_in_rounds(method.score([group], epoch=0, step=step)))
    return result


def test_helpers():
    assert all_pairs(3) == [(0, 1), (0, 2), (1, 2)]
    # 0 beats 1, ties 2; 1 loses to 2; multiplicities 1, 1, 2 (n = 4, three opponents each)
    # 0: 1*1 + 2*0.5 = 2 -> 2/3; 1: 0 + 2*0 = 0; 2: each copy: 1*0.5 + 1*1 + its twin 0.5 = 2 -> 2/3
    assert win_rates(all_pairs(3), [1.0, 0.5, 0.0], [1, 1, 2]) == pytest.approx([2 / 3, 0.0, 2 / 3])
    assert win_rates([], [], [1]) == [0.5]  # no opponent
    assert shared_ranks([0.9, 0.9, 0.1]) == [1, 1, 3]
    assert shared_ranks([0.9, 0.9, 0.1], ties="average") == [1.5, 1.5, 3]
    assert shared_ranks([0.9, 0.1], [2, 1]) == [1, 3]  # two copies occupy places 1 and 2


def test_scr_win_rates_ties_count_half():
    # a beats all; b and c tie with each other and beat d
    judge = OracleJudge({"a": 3, "b": 2, "c": 2, "d": 1}, gated=True)
    res = _score(PairwiseWinRateReward(judge), Group("q", "Q?", RUBRICS, ["a", "b", "c", "d"]), judge)
    # a: 3/3; b: (0 + 0.5 + 1)/3; c: same; d: 0/3
    assert res.rewards == pytest.approx([1.0, 0.5, 0.5, 0.0])
    assert res.details["requests"] == 6 == len(judge.requests)  # C(4, 2)
    assert res.details["rounds"] == 1 == judge.rounds
    assert all(isinstance(r, PairwiseRequest) and r.display == "auto" for r in judge.requests)


def test_scr_makes_c_g_2_requests_for_eight():
    judge = OracleJudge({t: i for i, t in enumerate(EIGHT)}, gated=True)
    res = _score(PairwiseWinRateReward(judge), Group("q", "Q?", RUBRICS, EIGHT), judge)
    assert len(judge.requests) == 28 == res.details["requests"] and judge.rounds == 1
    # quality i beats the i worse answers: rate i/7
    assert res.rewards == pytest.approx([i / 7 for i in range(8)])


def test_scr_duplicates_and_invalid():
    judge = OracleJudge({"a": 2, "b": 1})
    (res,) = asyncio.run(
        PairwiseWinRateReward(judge).score([Group("q", "Q?", RUBRICS, ["a", "a", "b", ""])], epoch=0, step=0)
    )
    # one request (a vs b); n = 3 valid: a: (1*1 + twin 0.5)/2 = 0.75; b: 0/2; invalid 0
    assert res.rewards == pytest.approx([0.75, 0.75, 0.0, 0.0])
    assert len(judge.requests) == 1 == res.details["requests"]


def test_both_orders_doubles_requests_and_forces_displays():
    judge = OracleJudge({"a": 3, "b": 2, "c": 1})
    (res,) = asyncio.run(
        PairwiseWinRateReward(judge, both_orders=True).score(
            [Group("q", "Q?", RUBRICS, ["a", "b", "c"])], epoch=0, step=0
        )
    )
    assert len(judge.requests) == 6 == res.details["requests"]  # 2 x C(3, 2)
    assert sorted(r.display for r in judge.requests) == ["ab"] * 3 + ["ba"] * 3
    assert res.rewards == pytest.approx([1.0, 0.5, 0.0])


def test_agr_win_rate_against_references():
    refs = ["r1", "r2", "r3"]
    judge = OracleJudge({"x": 5, "y": 4, "r1": 6, "r2": 4, "r3": 1}, gated=True)
    group = Group("q", "Q?", RUBRICS, ["x", "y", ""], references=refs)
    res = _score(ReferenceWinRateReward(judge), group, judge)
    # x: lose r1, beat r2, beat r3 -> 2/3; y: lose r1, tie r2, beat r3 -> 1.5/3; invalid 0
    assert res.rewards == pytest.approx([2 / 3, 0.5, 0.0])
    # G x references requests; each holds one answer and one reference, never two references
    assert sorted((r.a, r.b) for r in judge.requests) == [(a, ref) for a in "xy" for ref in refs]
    assert res.details["requests"] == 6 and res.details["rounds"] == 1 == judge.rounds


def test_agr_eight_by_seven():
    refs = [f"ref{k}" for k in range(7)]
    quality = {**{t: i for i, t in enumerate(EIGHT)}, **{r: k + 0.5 for k, r in enumerate(refs)}}
    judge = OracleJudge(quality)
    (res,) = asyncio.run(
        ReferenceWinRateReward(judge).score([Group("q", "Q?", RUBRICS, EIGHT, references=refs)], epoch=0, step=0)
    )
    assert len(judge.requests) == 56 == res.details["requests"]
    # t_i beats references 0.5 .. i-0.5: i of 7
    assert res.rewards == pytest.approx([i / 7 for i in range(8)])


def test_agr_without_references_is_a_clear_error():
    with pytest.raises(ValueError, match="references"):
        asyncio.run(ReferenceWinRateReward(OracleJudge({})).score([Group("q", "Q?", RUBRICS, ["a"])], epoch=0, step=0))


def test_pairwise_rank_ties_share_first_rank_and_empty_gets_minus_one():
    judge = OracleJudge({"a": 2, "b": 2, "c": 1}, gated=True)
    group = Group("q", "Q?", RUBRICS, ["a", "b", "c", ""])
    res = _score(PairwiseRankReward(judge), group, judge)
    # rates a = b = 0.75, c = 0 -> ranks 1, 1, 3 over n = 3: 2(3-1)/2-1 = 1, 1; 2(3-3)/2-1 = -1; empty -1
    assert res.rewards == pytest.approx([1.0, 1.0, -1.0, -1.0])
    assert res.details["requests"] == 3 and res.details["rounds"] == 1 == judge.rounds
    assert all("" not in (r.a, r.b) for r in judge.requests)  # empty answers are never judged


def test_pairwise_rank_average_ties_and_eight():
    judge = OracleJudge({"a": 2, "b": 2, "c": 1})
    (res,) = asyncio.run(
        PairwiseRankReward(judge, ties="average").score([Group("q", "Q?", RUBRICS, ["a", "b", "c"])], epoch=0, step=0)
    )
    # ranks 1.5, 1.5, 3: 2(1.5)/2 - 1 = 0.5
    assert res.rewards == pytest.approx([0.5, 0.5, -1.0])
    judge = OracleJudge({t: i for i, t in enumerate(EIGHT)})
    (res,) = asyncio.run(PairwiseRankReward(judge).score([Group("q", "Q?", RUBRICS, EIGHT)], epoch=0, step=0))
    # t_i has rank 8 - i: 2(8 - (8 - i))/7 - 1 = 2i/7 - 1
    assert len(judge.requests) == 28 and res.rewards == pytest.approx([2 * i / 7 - 1 for i in range(8)])
    with pytest.raises(ValueError, match="ties"):
        PairwiseRankReward(judge, ties="dense")


def test_pairwise_rank_single_valid_answer_gets_zero():
    judge = OracleJudge({"a": 1})
    (res,) = asyncio.run(PairwiseRankReward(judge).score([Group("q", "Q?", RUBRICS, ["a", ""])], epoch=0, step=0))
    assert res.rewards == [0.0, -1.0] and judge.requests == []


@pytest.mark.parametrize("cls", [PairwiseWinRateReward, PairwiseRankReward])
def test_failed_pair_makes_group_neutral(cls):
    judge = OracleJudge({"a": 3, "b": 2, "c": 1}, fail=lambda r: "c" in (r.a, r.b))
    (res,) = asyncio.run(cls(judge).score([Group("q", "Q?", RUBRICS, ["a", "b", "c"])], epoch=0, step=0))
    assert res.neutral and len(res.rewards) == 3


# ----------------------------------------------------------------- Tournament-GRPO and the bracket
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
    assert res.neutral and len(res.rewards) == 8
    with pytest.raises(ValueError, match="brackets"):
        TournamentReward(judge, brackets=0)


# ----------------------------------------------------------------- ArenaRL
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
    assert res.neutral and len(res.rewards) == 4
