"""RRC-SCR, RRC-AGR, Pairwise Rank and their shared pair helpers, with an oracle judge."""

import asyncio

import pytest

from trl_rankreward.judging.requests import PairwiseRequest
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.pair_judging import all_pairs, shared_ranks, win_rates
from trl_rankreward.rewards.pairwise import PairwiseRankReward, PairwiseWinRateReward, ReferenceWinRateReward
from trl_rankreward.testing import OracleJudge

RUBRICS = [{"text": "helpful", "weight": 1}]
EIGHT = [f"t{i}" for i in range(8)]


def _score(method, group, judge):
    (result,) = asyncio.run(judge.run_in_rounds(method.score([group], epoch=0, step=0)))
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
    assert res.neutral and res.rewards == [0.0, 0.0, 0.0]
