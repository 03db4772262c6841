"""RankBuffer's `soft_placement` option: answers of a bucket without a fine order are ordered by E[position].

A hand-made judge returns fixed `SoftPosition`s, so the expected positions are known:
x: P = (0.3, 0.6, 0.1) -> E = 0.6 + 0.2 = 0.8;  y: P = (0.0, 0.7, 0.3) -> E = 0.7 + 0.6 = 1.3.
Both are placed in bucket 1 of a two-anchor buffer (K = 2).
"""

import asyncio

import pytest

from trl_rankreward.evaluation.simulated_judge import SimulatedJudge
from trl_rankreward.judging.requests import CoarseRequest, JudgeFailure, SoftPosition
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import RankBufferReward

SOFT = {"x": SoftPosition(1, (0.3, 0.6, 0.1)), "y": SoftPosition(1, (0.0, 0.7, 0.3))}


class _SoftJudge:
    """Coarse: the fixed SoftPosition (a plain int when `plain` or when not asked); listwise: fails."""

    def __init__(self, plain=()):
        self.plain, self.requests = set(plain), []

    async def judge(self, request):
        self.requests.append(request)
        if isinstance(request, CoarseRequest):
            soft = SOFT[request.candidate]
            return int(soft) if request.candidate in self.plain or not request.probabilities else soft
        return JudgeFailure("invalid", "no fine order in this test")


def _score(method, completions=("x", "y")):
    group = Group("q", "What?", [], list(completions), references=["best", "worst"])
    (result,) = asyncio.run(method.score([group], epoch=0, step=0))
    return result


@pytest.mark.parametrize("variant", ["coarse_only", "dynamic"])
def test_bucket_without_fine_order_is_ordered_by_expected_position(variant):
    # coarse_only sends no fine call; dynamic's fine call fails. Off: x and y tie (rewards 0, 0 on
    # r = -1 + 2q/(G-1) with q = 0.5 each). On: x (E 0.8) below y (E 1.3): rewards -1, 1.
    off = _score(RankBufferReward(_SoftJudge(), k0=2, variant=variant))
    on_judge = _SoftJudge()
    on = _score(RankBufferReward(on_judge, k0=2, variant=variant, soft_placement=True))
    assert off.rewards == [0.0, 0.0]
    assert on.rewards == [-1.0, 1.0] and on.details["soft_fallbacks"] == 0
    assert all(r.probabilities for r in on_judge.requests if isinstance(r, CoarseRequest))
    assert "soft_fallbacks" not in off.details


def test_answers_without_probabilities_tie_and_are_counted():
    # y comes back as a plain int: its E is its position 1.0 > x's 0.8, so still x below y; one fallback.
    result = _score(RankBufferReward(_SoftJudge(plain={"y"}), k0=2, variant="coarse_only", soft_placement=True))
    assert result.rewards == [-1.0, 1.0] and result.details["soft_fallbacks"] == 1


def test_soft_placement_changes_nothing_when_every_bucket_gets_its_fine_order():
    # The simulated judge draws the same noise whether or not probabilities are asked, and the paper's
    # variant orders every shared bucket by a fine call, so the rewards and calls are identical.
    quality = {f"r{i}": float(i) for i in range(4)}
    quality.update({f"c{i}": 0.5 * i for i in range(8)})
    completions = [f"c{i}" for i in range(8)]

    def run(soft):
        judge = SimulatedJudge(quality, noise=1.0, seed=3)
        group = Group("q", "What?", [], completions, references=["r3", "r2", "r1", "r0"])
        method = RankBufferReward(judge, k0=4, soft_placement=soft)
        (result,) = asyncio.run(method.score([group], epoch=0, step=0))
        return result, judge.ledger.snapshot().calls

    (hard, hard_calls), (soft, soft_calls) = run(False), run(True)
    assert hard.rewards == soft.rewards and hard_calls == soft_calls
    assert soft.details["soft_fallbacks"] == 0
