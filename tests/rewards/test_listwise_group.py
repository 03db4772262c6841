"""ListwiseGroupReward: one listwise call per group, rank rewards, failures neutral."""

import asyncio

from trl_rankreward.judging.requests import JudgeFailure, ListwiseRequest
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.listwise_group import ListwiseGroupReward
from trl_rankreward.testing import OracleJudge

QUALITY = {"a": 1.0, "b": 2.0, "c": 3.0}


def _score(method, completions, qid="q"):
    (result,) = asyncio.run(method.score([Group(qid, "Q?", [], completions)], epoch=0, step=0))
    return result


def test_one_call_ranks_unique_answers_with_duplicates_and_invalid():
    judge = OracleJudge(QUALITY)
    result = _score(ListwiseGroupReward(judge), ["b", "a", "c", "a", "<think>cut off"])
    # Unique valid answers [b, a, c] in one call; worst -> best a, b, c; the cut-off rollout is
    # invalid and below all. Places (G = 5): invalid 0; a's two copies 1 and 2 (mean 1.5); b 3; c 4.
    # r = -1 + 2q/4: -1, -0.25, 0.5, 1.
    assert result.rewards == [0.5, -0.25, 1.0, -0.25, -1.0]
    assert result.order == [4, 1, 3, 0, 2]
    assert dict(judge.counts) == {"listwise": 1}
    (request,) = judge.requests
    assert isinstance(request, ListwiseRequest) and request.candidates == ("b", "a", "c")
    assert result.details["requests"] == 1 and not result.neutral


def test_one_unique_answer_needs_no_call():
    judge = OracleJudge(QUALITY)
    result = _score(ListwiseGroupReward(judge), ["a", "a"])
    # one tie block over places 0 and 1: mean 0.5, r = -1 + 2 * 0.5 / 1 = 0
    assert result.rewards == [0.0, 0.0] and judge.requests == [] and result.details["requests"] == 0


def test_failed_call_makes_the_group_neutral_and_counted():
    judge = OracleJudge(QUALITY, fail=lambda request: request.query_id == "bad")
    method = ListwiseGroupReward(judge)
    result = _score(method, ["a", "b"], qid="bad")
    assert result.neutral and result.rewards == [0.0, 0.0]
    assert method.step_metrics([result])["reward/neutral_groups"] == 1.0


class _NotAPermutation:
    """Answers every listwise request with a repeated index."""

    async def judge(self, request):
        return [0, 0, 1]


def test_invalid_order_is_an_invalid_failure_not_a_made_up_order():
    result = _score(ListwiseGroupReward(_NotAPermutation()), ["a", "b", "c"])
    assert result.neutral and result.details["failure_kind"] == "invalid"
    assert "expected a permutation of [0, 1, 2]" in result.details["failure"]


def test_failure_value_from_judge_is_neutral_too():
    class Failing:
        async def judge(self, request):
            return JudgeFailure("timeout", "judge timed out")

    result = _score(ListwiseGroupReward(Failing()), ["a", "b"])
    assert result.neutral and result.details["failure_kind"] == "timeout"
