"""Pointwise rubric reward and GDPO: rewards, request counts and rounds with an oracle judge."""

import asyncio

import pytest

from trl_rankreward.judging.requests import PointwiseRequest
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.pointwise import GDPOReward, PointwiseRubricReward
from trl_rankreward.testing import OracleJudge

RUBRICS = [{"text": "accurate", "weight": 3}, {"text": "concise", "weight": 1}]


def _score(method, group, judge, step=0):
    (result,) = asyncio.run(judge.run_in_rounds(method.score([group], epoch=0, step=step)))
    return result


def test_pointwise_maps_scores_and_judges_each_unique_answer_once():
    # "<think>x" (unclosed) and "" have no final answer: not judged, reward -1 (score 0).
    group = Group("q", "Q?", RUBRICS, ["a", "b", "a", "<think>x", ""])
    judge = OracleJudge({"a": 7.0, "b": 2.5}, gated=True)
    res = _score(PointwiseRubricReward(judge), group, judge, step=3)
    # 2s/10 - 1: a -> 0.4, b -> -0.5
    assert res.rewards == pytest.approx([0.4, -0.5, 0.4, -1.0, -1.0])
    # duplicates judged once: 2 unique answers -> 2 requests, one round
    assert sorted(r.response for r in judge.requests) == ["a", "b"]
    assert all(isinstance(r, PointwiseRequest) and r.rubric_index is None for r in judge.requests)
    assert all(r.query_id == "q" and r.step == 3 and len(r.rubrics) == 2 for r in judge.requests)
    assert res.details["requests"] == 2 and res.details["rounds"] == 1 == judge.rounds


def test_pointwise_makes_g_requests_for_g_distinct_answers():
    texts = [f"t{i}" for i in range(8)]
    judge = OracleJudge({t: float(i) for i, t in enumerate(texts)}, gated=True)
    res = _score(PointwiseRubricReward(judge), Group("q", "Q?", RUBRICS, texts), judge)
    assert len(judge.requests) == 8 == res.details["requests"]
    assert judge.rounds == 1 == res.details["rounds"]
    assert res.order == list(range(8))  # quality i -> reward increasing in i


def test_gdpo_normalizes_each_rubric_before_weighting():
    judge = OracleJudge({}, rubric_quality={"x": [8.0, 2.0], "y": [4.0, 2.0], "z": [0.0, 8.0]}, gated=True)
    res = _score(GDPOReward(judge), Group("q", "Q?", RUBRICS, ["x", "y", "z"]), judge)
    # rubric 0: 8, 4, 0 -> mean 4, sample std sqrt(32/2) = 4 -> z = 1, 0, -1
    # rubric 1: 2, 2, 8 -> mean 4, sample std sqrt(24/2) = 3.4641 -> z = -0.57735, -0.57735, 1.15470
    # weights 3:1 -> 0.75, 0.25: x = 0.75 - 0.14434, y = -0.14434, z = -0.75 + 0.28868
    assert res.rewards == pytest.approx([0.60566, -0.14434, -0.46132], abs=1e-3)
    assert sum(res.rewards) == pytest.approx(0.0, abs=1e-9)
    # G x K = 3 x 2 requests, one per (answer, rubric), one round
    assert sorted((r.response, r.rubric_index) for r in judge.requests) == [(t, k) for t in "xyz" for k in (0, 1)]
    assert res.details["requests"] == 6 and res.details["rounds"] == 1 == judge.rounds


def test_gdpo_counts_duplicates_and_scores_invalid_as_zero():
    judge = OracleJudge({"x": 6.0})
    group = Group("q", "Q?", [RUBRICS[0]], ["x", "x", ""])
    (res,) = asyncio.run(GDPOReward(judge).score([group], epoch=0, step=0))
    # population 6, 6, 0 (invalid scored 0): mean 4, sample std sqrt((4+4+16)/2) = 3.4641
    # x: 2/3.4641 = 0.57735; invalid: -4/3.4641 = -1.15470
    assert res.rewards == pytest.approx([0.57735, 0.57735, -1.15470], abs=1e-3)
    assert len(judge.requests) == 1 == res.details["requests"]  # one unique answer x one rubric


def test_gdpo_needs_rubrics():
    with pytest.raises(ValueError, match="rubrics"):
        asyncio.run(GDPOReward(OracleJudge({"a": 1.0})).score([Group("q", "Q?", [], ["a"])], epoch=0, step=0))


@pytest.mark.parametrize("cls", [PointwiseRubricReward, GDPOReward])
def test_failed_request_makes_group_neutral(cls):
    judge = OracleJudge({"a": 7.0, "b": 3.0}, fail=lambda r: r.response == "b")
    (res,) = asyncio.run(cls(judge, lambda_fmt=0.2).score([Group("q", "Q?", RUBRICS, ["a", "b"])], epoch=0, step=0))
    assert res.neutral and len(res.rewards) == 2


def test_out_of_range_verdict_is_a_failure_not_a_reward():
    class _Broken(OracleJudge):
        async def _verdict(self, request, display):
            return 11.0

    (res,) = asyncio.run(PointwiseRubricReward(_Broken({})).score([Group("q", "Q?", RUBRICS, ["a"])], epoch=0, step=0))
    assert res.neutral and "[0, 10]" in res.details["failure"]
