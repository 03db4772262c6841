"""GroupRewardMethod plumbing: answers, duplicates, invalid rollouts, neutral groups, format reward."""

import asyncio
import math

import pytest

from trl_rankreward.judging.parsing import strip_thinking
from trl_rankreward.judging.requests import JudgeFailure, PairwiseRequest, Rubric
from trl_rankreward.rewards.base import (
    AnswerFormat,
    Group,
    GroupJudgingFailed,
    GroupRewardMethod,
    RankOutcome,
    ScoreOutcome,
    rank_reward,
    tie_block_rewards,
)


class _NoJudge:
    async def judge(self, request):  # never called by these methods
        raise AssertionError


class _LengthRank(GroupRewardMethod):
    """Orders unique answers by length (a stand-in for a judge), one block each."""

    async def score_group(self, group, candidates, *, epoch, step):
        order = sorted(range(len(candidates.answers)), key=lambda u: len(candidates.answers[u]))
        return RankOutcome([[u] for u in order])


class _Failing(GroupRewardMethod):
    async def score_group(self, group, candidates, *, epoch, step):
        raise GroupJudgingFailed(JudgeFailure("invalid", "bad json", 3))


def _group(completions):
    return Group("q", "query?", [{"text": "correct", "weight": 2}], completions)


def test_group_request_fills_in_the_group_context():
    # The group's query, rubrics and query_id, the given step, plus the request's own fields.
    request = _group(["x", "y"]).request(PairwiseRequest, step=7, a="x", b="y")
    assert request == PairwiseRequest(
        query="query?", rubrics=(Rubric("correct", 2.0),), query_id="q", step=7, a="x", b="y"
    )


def test_group_texts_with_lone_surrogates_become_encodable():
    # b"\xff" decoded with surrogateescape is "\udcff": it cannot be hashed as UTF-8, stored in SQLite
    # or sent as JSON, so the group carries U+FFFD there instead.
    bad = b"x \xff y".decode("utf-8", errors="surrogateescape")
    group = Group("q", bad, [], [bad, "ok"], references=[bad])
    assert group.query == group.completions[0] == group.references[0] == "x \ufffd y"
    assert group.completions[1] == "ok"


def test_rank_reward_endpoints():
    # Eq. 9 with G=8: q=0 -> -1, q=7 -> 1, q=3.5 -> 0
    assert rank_reward(0, 8) == -1.0 and rank_reward(7, 8) == 1.0 and rank_reward(3.5, 8) == 0.0


def test_tie_blocks_share_mean_position():
    # G=4, blocks [[3], [0, 2], [1]]: positions 0, (1+2)/2=1.5, 3 -> -1, 0, 1 (step 2/3)
    r = tie_block_rewards([[3], [0, 2], [1]], 4)
    assert r == pytest.approx([0.0, 1.0, 0.0, -1.0])
    with pytest.raises(ValueError, match="cover"):
        tie_block_rewards([[0], [0]], 2)


def test_invalid_below_valid_and_duplicates_share_a_place():
    # completions: "bb" (len 2), "<think>x" (unclosed: invalid), "a" (len 1), "bb" (dup), "" (invalid)
    g = _group(["bb", "<think>x", "a", "bb", ""])
    (res,) = asyncio.run(_LengthRank(_NoJudge()).score([g], epoch=0, step=0))
    # tie blocks: invalid [1, 4] -> positions 0,1 (mean 0.5); "a" [2] -> 2; "bb" [0, 3] -> 3,4 (mean 3.5)
    # r = -1 + 2q/4: 0.5 -> -0.75, 2 -> 0, 3.5 -> 0.75
    assert res.rewards == pytest.approx([0.75, -0.75, 0.0, 0.75, -0.75])
    assert res.order == [1, 4, 2, 0, 3]
    assert res.details["invalid"] == 2 and res.details["duplicates"] == 1
    assert sum(res.rewards) == pytest.approx(0.0)


def test_format_reward_added_with_lambda():
    fmt = AnswerFormat(thinking=True)
    g = _group(["<think>t</think>long answer", "no think block", "<think>t</think>ok"])
    (res,) = asyncio.run(_LengthRank(_NoJudge(), lambda_fmt=0.2, answer_format=fmt).score([g], epoch=0, step=0))
    # invalid: index 1 (no </think>) -> q=0 -> -1 + 0; "ok" q=1 -> 0 + 0.2; "long answer" q=2 -> 1 + 0.2
    assert res.rewards == pytest.approx([1.2, -1.0, 0.2])


def test_failed_group_is_neutral_and_counted():
    method = _Failing(_NoJudge(), lambda_fmt=0.5)
    results = asyncio.run(method.score([_group(["a", "b"]), _group(["c", "d", "e"])], epoch=0, step=0))
    # NaN, TRL's own "no reward", for every completion; no format bonus on top
    assert [[math.isnan(x) for x in r.rewards] for r in results] == [[True, True], [True, True, True]]
    assert all(r.neutral for r in results)
    assert method.step_metrics(results)["reward/neutral_groups"] == 2.0


def test_score_outcome_invalid_reward():
    class _Score(GroupRewardMethod):
        async def score_group(self, group, candidates, *, epoch, step):
            return ScoreOutcome([len(a) / 10 for a in candidates.answers], invalid_reward=-1.0)

    (res,) = asyncio.run(_Score(_NoJudge()).score([_group(["abc", "", "abc", "a"])], epoch=0, step=0))
    assert res.rewards == pytest.approx([0.3, -1.0, 0.3, 0.1])
    assert res.order == [1, 3, 0, 2]


def test_strip_thinking_variants():
    assert strip_thinking("<think>a</think>\n answer ") == "answer"
    assert strip_thinking("reasoning only</think>final") == "final"
    assert strip_thinking('answer <think>cut off, quoting {"score": 10}') == "answer"  # unclosed: not an answer
    assert AnswerFormat().final_answer("<think>never closed") is None


def test_group_validation_messages():
    with pytest.raises(ValueError, match="no completions"):
        Group("q", "x", [], [])
    with pytest.raises(ValueError, match="query_id"):
        Group("", "x", [], ["a"])
    with pytest.raises(ValueError, match="unknown keys"):
        Group("q", "x", [{"text": "t", "score": 1}], ["a"])


class _Counting(_LengthRank):
    """A stateful stand-in: counts scored groups per query (state_dict / load_state_dict)."""

    def __init__(self, judge):
        super().__init__(judge)
        self.seen: dict[str, int] = {}

    async def score_group(self, group, candidates, *, epoch, step):
        self.seen[group.query_id] = self.seen.get(group.query_id, 0) + 1
        return await super().score_group(group, candidates, epoch=epoch, step=step)

    def state_dict(self):
        return {"seen": dict(self.seen)}

    def load_state_dict(self, state):
        self.seen = dict(state["seen"])


def test_frozen_state_default_works_for_a_stateless_method():
    method = _LengthRank(_NoJudge())
    with method.frozen_state():
        (res,) = asyncio.run(method.score([_group(["aa", "b"])], epoch=0, step=0))
    assert res.rewards == [1.0, -1.0]  # "b" (shorter) worst: G=2 -> -1, 1
    assert method.state_dict() == {}


def test_frozen_state_default_snapshots_and_restores_also_on_an_exception():
    method = _Counting(_NoJudge())
    asyncio.run(method.score([_group(["a"])], epoch=0, step=0))
    assert method.seen == {"q": 1}
    with method.frozen_state():
        asyncio.run(method.score([_group(["a"]), Group("q2", "?", [], ["b"])], epoch=0, step=1))
        assert method.seen == {"q": 2, "q2": 1}
    assert method.state_dict() == {"seen": {"q": 1}}
    with pytest.raises(RuntimeError, match="stop"):
        with method.frozen_state():
            asyncio.run(method.score([_group(["a"])], epoch=0, step=2))
            raise RuntimeError("stop")
    assert method.state_dict() == {"seen": {"q": 1}}
