"""RankBufferPlusReward (`rank_buffer_plus`): joint placement, second look, extra looks, capped buffer.

Scenario of tests/rewards/test_rank_buffer.py (the oracle's qualities): references n1..n7 best
first with quality 8 - i; group c0 c1 "" c3 c1 c5 c6 c7 with qualities 0.5, 2, -, 4, 2, 2.5, 8,
1.5. With a noiseless judge every look agrees with the truth, so the variant must give the
paper's rewards and, with the same buckets, the paper's buffer.
"""

import asyncio
import json

import pytest

from trl_rankreward.judging.requests import CoarseRequest, JudgeFailure, ListwiseRequest
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.rewards.rank_buffer_plus import RankBufferPlusReward, borda, disputed_window
from trl_rankreward.testing import OracleJudge

REFS = [f"n{i}" for i in range(1, 8)]  # best first
QUALITY = {f"n{i}": 8 - i for i in range(1, 8)}
QUALITY.update(c0=0.5, c1=2, c3=4, c5=2.5, c6=8, c7=1.5)
COMPLETIONS = ["c0", "c1", "", "c3", "c1", "c5", "c6", "c7"]
# r = -1 + 2q/7 for places q = 1, 3.5, 0, 6, 3.5, 5, 7, 2 (worst -> best: "" c0 c7 c1 c1 c5 c3 c6)
EXPECTED_REWARDS = [-5 / 7, 0.0, -1.0, 5 / 7, 0.0, 3 / 7, 1.0, -3 / 7]


def _score(method, completions=COMPLETIONS, epoch=0):
    group = Group("q", "Q?", [{"text": "Answers", "weight": 1}], completions, references=REFS)
    (result,) = asyncio.run(method.score([group], epoch=epoch, step=epoch))
    return result


def test_joint_placement_gives_the_papers_rewards_and_buffer_without_noise():
    judge = OracleJudge(QUALITY)
    plus = RankBufferPlusReward(judge, k0=4, max_anchors=None, lambda_fmt=0.0)
    result = _score(plus)
    assert result.rewards == pytest.approx(EXPECTED_REWARDS)
    # one joint call (4 anchors + 6 unique answers) and the second look; the looks agree: no extra call
    assert dict(judge.counts) == {"listwise": 2}
    joint, second = sorted(judge.requests, key=lambda r: -len(r.candidates))
    assert joint.candidates == ("n7", "n5", "n3", "n1", "c0", "c1", "c3", "c5", "c6", "c7")
    assert second.candidates == ("c0", "c1", "c3", "c5", "c6", "c7")
    # positions = anchors judged below: c0 0, c1 1, c3 2, c5 1, c6 4, c7 1 (as the coarse calls give)
    assert result.details["bucket_sizes"] == [1, 3, 1, 0, 1]
    assert result.details["coarse_calls"] == 1 and result.details["look_calls"] == 1
    paper = RankBufferReward(OracleJudge(QUALITY), k0=4, lambda_fmt=0.0)
    _score(paper)
    assert plus.anchors("q") == paper.anchors("q")  # same buckets -> the same Algorithm 2 update


def test_coarse_placement_is_the_papers_rounds_plus_the_second_look():
    judge = OracleJudge(QUALITY)
    result = _score(RankBufferPlusReward(judge, placement="coarse", k0=4, max_anchors=None, lambda_fmt=0.0))
    assert result.rewards == pytest.approx(EXPECTED_REWARDS)
    # 6 coarse calls, 1 fine call (bucket C1 = c7 c1 c5), 1 second look over the 6 answers
    assert dict(judge.counts) == {"coarse": 6, "listwise": 2}
    assert result.details["placement_calls"] == 7


def test_buffer_is_capped_to_evenly_spaced_anchors():
    judge = OracleJudge(QUALITY)
    plus = RankBufferPlusReward(judge, lambda_fmt=0.0)  # defaults: k0 = 2, max_anchors = 2
    result = _score(plus)
    # K0 = 2 keeps n7 (1) and n1 (7). Positions: c0 0, c6 2, the others 1. Algorithm 2: c0 becomes
    # the left anchor, c6 the right one, and C1 = [c7 c1 c5 c3] (4 >= 3) gets its lower median c1:
    # [c0 n7 c1 n1 c6]. The cap keeps Select_2 of that, the two ends: [c0, c6].
    assert [a.text for a in plus.anchors("q")] == ["c0", "c6"]
    assert result.details["anchors_added"] == {"references": 2, "left": 1, "right": 1}
    assert result.details["anchors_pruned"] == {"references": 2}  # the refine anchor c1 never entered
    assert result.details["buffer_size"] == 2
    assert result.rewards == pytest.approx(EXPECTED_REWARDS)


class _Scripted:
    """Orders by `joint` quality in calls that show the anchor n1, else by `look` quality;
    `fail_looks` fails every call without anchors (the second and extra looks)."""

    def __init__(self, joint, look, fail_looks=False):
        self.joint, self.look, self.fail_looks = joint, look, fail_looks
        self.requests = []

    async def judge(self, request):
        self.requests.append(request)
        joint = "n1" in request.candidates
        if self.fail_looks and not joint:
            return JudgeFailure("invalid", "scripted failure")
        quality = self.joint if joint else self.look
        return sorted(range(len(request.candidates)), key=lambda i: quality[request.candidates[i]])


# Answers c0 c7 c1 c5 (indices 0..3, true order 0 < 1 < 2 < 3). The joint call misjudges c7 (2.2 > c1's 2).
WRONG_JOINT = {**QUALITY, "c7": 2.2}
GROUP4 = ["c0", "c7", "c1", "c5"]


def test_extra_looks_go_to_the_disputed_answers_and_fix_the_order():
    # Placement [0, 2, 1, 3]; second look [0, 1, 2, 3]. Borda sums: 0, 3, 3, 6 -> c7 and c1 tie and keep
    # the placement order: fused [0, 2, 1, 3], wrong. Without extra looks that is the answer:
    judge = _Scripted(WRONG_JOINT, QUALITY)
    result = _score(RankBufferPlusReward(judge, extra_calls=0, lambda_fmt=0.0), GROUP4)
    assert result.rewards == pytest.approx([-1, 1 / 3, -1 / 3, 1])  # -1 + 2q/3, c7 above c1
    assert len(judge.requests) == 2
    # Only c7 and c1 differ (by one place): each extra look shows just them, in the fused order of
    # the moment, and says c7 < c1. The first shows (c1, c7); after it the sums are 0, 4, 5, 9:
    # fused [0, 1, 2, 3], so the second shows (c7, c1) and agrees.
    judge = _Scripted(WRONG_JOINT, QUALITY)
    result = _score(RankBufferPlusReward(judge, extra_calls=2, lambda_fmt=0.0), GROUP4)
    assert result.rewards == pytest.approx([-1, -1 / 3, 1 / 3, 1])
    extra = judge.requests[2:]
    assert [r.candidates for r in extra] == [("c1", "c7"), ("c7", "c1")]
    assert result.details["look_calls"] == 3 and result.details["look_failures"] == 0


def test_a_failed_look_is_skipped_and_counted_not_neutral():
    judge = _Scripted(WRONG_JOINT, QUALITY, fail_looks=True)
    result = _score(RankBufferPlusReward(judge, lambda_fmt=0.0), GROUP4)
    assert not result.neutral
    assert result.rewards == pytest.approx([-1, 1 / 3, -1 / 3, 1])  # the placement order alone
    # one order left: nothing is disputed, so no extra look is spent
    assert result.details["look_failures"] == 1 and result.details["look_calls"] == 0
    assert len(judge.requests) == 2


def test_a_failed_joint_call_makes_the_group_neutral():
    judge = OracleJudge(QUALITY, fail=lambda r: isinstance(r, ListwiseRequest) and "n1" in r.candidates)
    plus = RankBufferPlusReward(judge)
    result = _score(plus)
    assert result.neutral and plus.anchors("q") == []  # nothing about the query changed


def test_borda_and_disputed_window_by_hand():
    # rank sums 0+1, 1+0, 2+2: 0 and 1 tie and keep the first order
    assert borda([[0, 1, 2], [1, 0, 2]], 3) == [0, 1, 2]
    # sums: 0 -> 2+2 = 4, 1 -> 0+1 = 1, 2 -> 1+0 = 1 (tie: first order has 1 before 2)
    assert borda([[1, 2, 0], [2, 1, 0]], 3) == [1, 2, 0]
    orders = [[0, 1, 2, 3], [0, 2, 1, 3]]
    assert disputed_window(orders, [0, 1, 2, 3], 1, "set") == [1, 2]
    assert disputed_window(orders, [0, 1, 2, 3], 2, "set") == []  # they differ by one place only
    # set vs window: 0 and 3 swap ends, 1 and 2 agree
    orders = [[0, 1, 2, 3], [3, 1, 2, 0]]
    assert disputed_window(orders, [0, 1, 2, 3], 1, "set") == [0, 3]
    assert disputed_window(orders, [0, 1, 2, 3], 1, "window") == [0, 1, 2, 3]


def test_state_round_trip_and_config_check():
    plus = RankBufferPlusReward(OracleJudge(QUALITY))
    _score(plus)
    state = json.loads(json.dumps(plus.state_dict()))
    resumed = RankBufferPlusReward(OracleJudge(QUALITY))
    resumed.load_state_dict(state)
    assert resumed.anchors("q") == plus.anchors("q")
    with pytest.raises(ValueError, match="max_anchors"):
        RankBufferPlusReward(OracleJudge(QUALITY), max_anchors=3).load_state_dict(state)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"placement": "pairs"}, "placement must be one of"),
        ({"extra_scope": "all"}, "extra_scope must be one of"),
        ({"buffer_variant": "coarse_only"}, r"buffer_variant must be one of \['dynamic', 'static'\]"),
        ({"buffer_manager": "llm"}, "buffer_manager"),  # not an option of rank_buffer_plus: Algorithm 2 only
        ({"extra_calls": -1}, "extra_calls must be an integer >= 0"),
        ({"k0": 4, "max_anchors": 3}, "max_anchors=3 is below k0=4"),
    ],
)
def test_bad_options_say_what_was_expected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RankBufferPlusReward(OracleJudge(QUALITY), **kwargs)


def test_rank_buffer_default_is_unchanged_by_the_variant_hooks():
    # the paper's method still makes one coarse call per answer and one fine call per crowded bucket
    judge = OracleJudge(QUALITY)
    result = _score(RankBufferReward(judge, k0=4, lambda_fmt=0.0))
    assert result.rewards == pytest.approx(EXPECTED_REWARDS)
    assert dict(judge.counts) == {"coarse": 6, "listwise": 1}
    assert all(isinstance(r, (CoarseRequest, ListwiseRequest)) for r in judge.requests)
