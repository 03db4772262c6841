"""R-Align reward table, MetaRM call policy, hooks and failure handling."""

import asyncio

import pytest

from trl_rankreward.judging.calls import JudgeLedger
from trl_rankreward.judging.requests import JudgeError, MetaJudgeRequest
from trl_rankreward.rewards.ralign_reward import (
    SWAP_NOTE,
    CallableMetaJudge,
    GenRMSample,
    RAlignReward,
    RAlignRewardValues,
)


class CountingMetaJudge:
    """Answers `answer` (or raises) and remembers every request it got."""

    def __init__(self, answer=True):
        self.answer = answer
        self.requests = []
        self.ledger = JudgeLedger()

    async def judge(self, request):
        self.requests.append(request)
        self.ledger.record(request_kind="meta", parsed=not isinstance(self.answer, Exception))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _sample(completion, label="A", order="ab", key="k"):
    return GenRMSample("Q?", "resp a", "resp b", label, "A gives the right formula.", completion, order, key)


def _score(method, samples):
    return asyncio.run(method.score(samples, step=3))


VALUES = RAlignRewardValues(correct_and_consistent=2.0, correct_but_spurious=0.5, wrong=-1.5, invalid_format=-3.0)


@pytest.mark.parametrize(
    "completion, meta, status, reward",
    [
        # label A shown in order ab: "\boxed{A}" is correct; the MetaRM decides consistent / spurious
        ("A has the right formula. \\boxed{A}", True, "consistent", 2.0),
        ("A is longer. \\boxed{A}", False, "spurious", 0.5),
        ("B is nicer. \\boxed{B}", True, "wrong", -1.5),  # meta answer irrelevant: never asked
        ("B is nicer. \\boxed{B}", False, "wrong", -1.5),
        ("I cannot decide.", True, "invalid", -3.0),
        ("I cannot decide.", False, "invalid", -3.0),
    ],
)
def test_reward_table(completion, meta, status, reward):
    judge = CountingMetaJudge(meta)
    (score,) = _score(RAlignReward(judge, values=VALUES), [_sample(completion)])
    assert (score.status, score.reward) == (status, reward)
    assert len(judge.requests) == (1 if status in ("consistent", "spurious") else 0)


def test_default_values_documented():
    v = RAlignRewardValues()
    assert (v.correct_and_consistent, v.correct_but_spurious, v.wrong, v.invalid_format) == (1.0, 0.0, -1.0, -1.0)
    with pytest.raises(ValueError, match="correct_but_spurious"):
        RAlignRewardValues(correct_but_spurious=2.0)


def test_metarm_not_called_on_wrong_labels():
    judge = CountingMetaJudge(True)
    samples = [
        _sample("\\boxed{A}", label="A", key="1"),  # correct
        _sample("\\boxed{B}", label="A", key="2"),  # wrong
        _sample("\\boxed{A}", label="B", key="3"),  # wrong
        _sample("\\boxed{B}", label="B", key="4"),  # correct
        _sample("nothing", label="B", key="5"),  # invalid
        # shown swapped: displayed B is canonical A = label -> correct
        _sample("\\boxed{B}", label="A", order="ba", key="6"),
    ]
    method = RAlignReward(judge)
    scores = _score(method, samples)
    assert [s.status for s in scores] == ["consistent", "wrong", "wrong", "consistent", "invalid", "consistent"]
    assert sorted(r.query_id for r in judge.requests) == ["1", "4", "6"]
    assert method.meta_calls == 3 and judge.ledger.calls == 3


def test_swapped_sample_tells_the_metarm():
    judge = CountingMetaJudge(True)
    _score(RAlignReward(judge), [_sample("<think>hmm</think>B has it. \\boxed{B}", order="ba")])
    (req,) = judge.requests
    assert isinstance(req, MetaJudgeRequest)
    assert (req.response_a, req.response_b, req.label, req.step) == ("resp a", "resp b", "A", 3)
    assert req.rationale == SWAP_NOTE + "B has it. \\boxed{B}"  # thinking stripped, note prepended


def test_outcome_mode_never_calls_metarm():
    judge = CountingMetaJudge(False)
    method = RAlignReward(judge, mode="outcome", values=VALUES)
    scores = _score(method, [_sample("\\boxed{A}"), _sample("\\boxed{B}")])
    assert [(s.status, s.reward) for s in scores] == [("correct", 2.0), ("wrong", -1.5)]
    assert judge.requests == [] and method.meta_calls == 0


def test_ralign_mode_needs_a_metarm():
    with pytest.raises(ValueError, match="needs a MetaRM"):
        RAlignReward(None)
    with pytest.raises(ValueError, match="reward mode"):
        RAlignReward(CountingMetaJudge(), mode="ppo")


@pytest.mark.parametrize("answer", [JudgeError("bad json", kind="invalid"), "yes"])
def test_meta_failure_is_unscorable_not_a_verdict(answer):
    (score,) = _score(RAlignReward(CountingMetaJudge(answer)), [_sample("\\boxed{A}")])
    assert score.status == "meta_failed" and score.reward is None and score.failure is not None


def test_a_bug_in_the_meta_judge_propagates_instead_of_becoming_a_failure():
    with pytest.raises(RuntimeError, match="boom"):
        _score(RAlignReward(CountingMetaJudge(RuntimeError("boom"))), [_sample("\\boxed{A}")])


def test_sync_and_async_hooks_with_ledger():
    seen = []

    def sync_hook(request):
        seen.append(request.query_id)
        return "formula" in request.rationale

    async def async_hook(request):
        return True

    samples = [_sample("formula \\boxed{A}", key="x"), _sample("style \\boxed{A}", key="y"), _sample("\\boxed{B}")]
    method = RAlignReward(sync_hook)
    assert isinstance(method.meta_judge, CallableMetaJudge)
    assert [s.status for s in _score(method, samples)] == ["consistent", "spurious", "wrong"]
    assert sorted(seen) == ["x", "y"] and method.meta_judge.ledger.parsed == 2
    assert [s.status for s in _score(RAlignReward(async_hook), samples[:1])] == ["consistent"]


def test_bad_hook_answer_is_counted_as_invalid():
    method = RAlignReward(lambda request: 1)  # 1 is not a bool
    (score,) = _score(method, [_sample("\\boxed{A}")])
    assert score.status == "meta_failed" and score.failure.kind == "invalid"
    assert method.meta_judge.ledger.failures == {"invalid": 1}


def test_meta_calls_run_concurrently():
    # each hook call waits until all 4 have started: sequential calls would deadlock (timeout)
    started = []
    barrier = asyncio.Event()

    async def hook(request):
        started.append(request.query_id)
        if len(started) == 4:
            barrier.set()
        await asyncio.wait_for(barrier.wait(), timeout=2)
        return True

    samples = [_sample("\\boxed{A}", key=str(i)) for i in range(4)]
    assert [s.status for s in _score(RAlignReward(hook), samples)] == ["consistent"] * 4
