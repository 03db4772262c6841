"""RankBuffer, hand-computed: `RankBufferReward` end to end with a noiseless OracleJudge (RankBuffer
paper, Sec. 3); its parts on their own (the coarse-to-fine ranking, the buffer managers, the display
audit of listwise answers); and `ListwiseGroupReward`.

The main scenario, used by several tests (qualities are the oracle's truth):

Nectar references best first n1..n7 with quality 8 - i (n1 = 7 ... n7 = 1); K0 = 4 keeps
ranks (7, 5, 3, 1), so the buffer worst -> best is n7(1) n5(3) n3(5) n1(7).

Group (G = 8):   idx  0      1     2    3     4          5      6     7
                 text c0     c1    ""   c3    c1 (dup)   c5     c6    c7
                 q    0.5    2     -    4     2          2.5    8     1.5
Coarse position = number of anchors below: c0 0, c1 1, c3 2, c5 1, c6 4, c7 1.
"" is invalid (not judged); c1 is judged once. Coarse calls = 6 unique valid answers.
Buckets: C0 [c0], C1 [c1 c5 c7], C2 [c3], C3 [], C4 [c6] -> one fine call (C1),
giving c7 c1 c5. Complete order: "" | c0 | c7 | c1 c1 | c5 | c3 | c6, so positions
q = 0, 1, 2, (3+4)/2, 5, 6, 7 and r = -1 + 2q/7.
"""

import asyncio
import json

import pytest

from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.judging.rendering import display_order, render
from trl_rankreward.judging.requests import BufferSelectRequest, CoarseRequest, JudgeFailure, ListwiseRequest, text_id
from trl_rankreward.rewards.anchor_buffer import Anchor, AnchorBuffer, SQLiteAnchorStore
from trl_rankreward.rewards.base import Group, GroupJudgingFailed
from trl_rankreward.rewards.rank_buffer import (
    DETAILS_KEY,
    CoarseToFine,
    ListwiseGroupReward,
    LLMManager,
    RankBufferReward,
    Ranking,
    RuleManager,
    audit_answer,
    changes,
    kendall_tau,
    new_tally,
    tally_metrics,
    twin_request,
)
from trl_rankreward.rewards.registry import make_reward_method
from trl_rankreward.testing import OracleJudge

REFS = [f"n{i}" for i in range(1, 8)]  # best first
QUALITY = {f"n{i}": 8 - i for i in range(1, 8)}
QUALITY.update(c0=0.5, c1=2, c3=4, c5=2.5, c6=8, c7=1.5)
COMPLETIONS = ["c0", "c1", "", "c3", "c1", "c5", "c6", "c7"]
# r = -1 + 2q/7 for q = 1, 3.5, 0, 6, 3.5, 5, 7, 2
EXPECTED_REWARDS = [-5 / 7, 0.0, -1.0, 5 / 7, 0.0, 3 / 7, 1.0, -3 / 7]
EXPECTED_ORDER = [2, 0, 7, 1, 4, 5, 3, 6]
RUBRICS = [{"text": "Answers the question", "weight": 3}]


def _group(completions=COMPLETIONS, qid="q", references=REFS):
    return Group(qid, "What?", RUBRICS, completions, references=references)


def _score(method, groups, epoch=0, step=0):
    return asyncio.run(method.score(groups, epoch=epoch, step=step))


def _texts(method, qid="q"):
    return [a.text for a in method.anchors(qid)]


def _of(judge, cls):
    return [r for r in judge.requests if isinstance(r, cls)]


# ----------------------------------------------------------------- the main scenario
def test_nectar_dynamic_scenario_rewards_buffer_and_calls():
    judge = OracleJudge(QUALITY)
    method = RankBufferReward(judge, k0=4, lambda_fmt=0.2)
    (res,) = _score(method, [_group()])
    # format reward 1 for every valid rollout, 0 for the empty one: +0.2 except index 2
    assert res.rewards == pytest.approx([r + (0.0 if i == 2 else 0.2) for i, r in enumerate(EXPECTED_REWARDS)])
    assert res.order == EXPECTED_ORDER
    assert judge.counts == {"coarse": 6, "listwise": 1}  # coarse = unique valid answers, fine = buckets >= 2
    (fine,) = _of(judge, ListwiseRequest)
    assert fine.candidates == ("c1", "c5", "c7")  # bucket 1 in group order
    assert all(r.anchors == ("n7", "n5", "n3", "n1") for r in _of(judge, CoarseRequest))
    # Algorithm 2, epoch 0: left c0 (sigma_0[1]), right c6 (sigma_4[1]), refine C1 (size 3):
    # ceil(3/2) = 2 -> sigma_1[2] = c1 between n7 and n5; a2 = n5 and a3 = n3 are active.
    assert _texts(method) == ["c0", "n7", "c1", "n5", "n3", "n1", "c6"]
    assert [a.source for a in method.anchors("q")] == [
        "left",
        "references",
        "refine",
        "references",
        "references",
        "references",
        "right",
    ]
    d = res.details
    assert d["bucket_sizes"] == [1, 3, 1, 0, 1]
    # positions / K over the 7 valid rollouts: (0 + 2*1 + 2 + 1 + 4 + 1) / 4 / 7 = 2.5 / 7
    assert d["coarse_position_mean"] == pytest.approx(2.5 / 7)
    assert (d["coarse_calls"], d["fine_calls"], d["buffer_size"]) == (6, 1, 7)
    assert d["anchors_added"] == {"references": 4, "left": 1, "right": 1, "refine": 1}
    assert d["anchors_pruned"] == {}


def test_step_metrics():
    method = RankBufferReward(OracleJudge(QUALITY), k0=4)
    results = _score(method, [_group(), _group(["c3", "c6"], qid="q2")])
    m = method.step_metrics(results)
    # q: 7 anchors (above). q2: c3 -> 2, c6 -> 4, singletons; right expansion adds c6: 5 anchors.
    assert m["buffer/count"] == 2 and m["buffer/size_mean"] == 6 and m["buffer/size_max"] == 7
    assert m["buffer/anchors_references"] == 8 and m["buffer/anchors_right"] == 2 and m["buffer/anchors_refine"] == 1
    assert m["buffer/added_right"] == 2 and m["buffer/added_references"] == 8 and m["buffer/pruned_references"] == 0
    # q2 mean position (2 + 4) / 4 / 2 = 0.75; step mean (2.5/7 + 0.75) / 2
    assert m["rank/coarse_position_mean"] == pytest.approx((2.5 / 7 + 0.75) / 2)
    assert m["rank/coarse_calls_mean"] == 4 and m["rank/fine_calls_mean"] == 0.5
    # buckets with >= 1 answer: q has sizes 1, 3, 1, 1; q2 has 1, 1
    assert m["rank/bucket_size_hist_1"] == 5 and m["rank/bucket_size_hist_3"] == 1
    assert "rank/bucket_size_hist_2" not in m
    assert m["reward/invalid_rollouts"] == 1 and m["reward/neutral_groups"] == 0


def test_groups_of_one_query_in_one_step_run_in_turn():
    judge = OracleJudge(QUALITY)
    method = RankBufferReward(judge, k0=4)
    _score(method, [_group(), _group(["c3", "c5"])])
    # the second group's coarse calls see the 7-anchor buffer the first group left
    sizes = [len(r.anchors) for r in _of(judge, CoarseRequest)]
    assert sizes == [4] * 6 + [7] * 2


def test_group_without_valid_answers_is_an_inactive_observation():
    judge = OracleJudge(QUALITY)
    method = RankBufferReward(judge, k0=4)
    _score(method, [_group()], epoch=0)  # buffer c0 n7 c1 n5 n3 n1 c6, every h = 0
    (res,) = _score(method, [_group(["", "<think>cut"])], epoch=1, step=1)
    # no answer is judged; every bucket is empty, so internal anchors 2..6 get h = 1
    assert judge.counts == {"coarse": 6, "listwise": 1} and res.rewards == [0.0, 0.0] and not res.neutral
    assert [a.inactive_epochs for a in method.anchors("q")] == [0, 1, 1, 1, 1, 1, 0]
    assert "coarse_position_mean" not in res.details
    assert "rank/coarse_position_mean" not in method.step_metrics([res])


# ----------------------------------------------------------------- initializations
@pytest.mark.parametrize("k0, ranks", [(2, [7, 1]), (4, [7, 5, 3, 1]), (7, [7, 6, 5, 4, 3, 2, 1])])
def test_nectar_init_subsets(k0, ranks):
    method = RankBufferReward(OracleJudge(QUALITY), k0=k0)
    _score(method, [_group()])
    nectar = [a.text for a in method.anchors("q") if a.source == "references"]
    assert nectar == [f"n{r}" for r in ranks]


def test_nectar_init_without_references_is_a_clear_error():
    method = RankBufferReward(OracleJudge(QUALITY), buffer_init="references")
    with pytest.raises(ValueError, match="init='references' needs ranked references.*init='auto'.*'bootstrap'"):
        _score(method, [_group(references=None)])


# bootstrap group: b_i has quality Q[i]; worst -> best is b3 b6 b1 b4 b7 b0 b5 b2
BOOT_Q = [5, 2, 7, 0, 3, 6, 1, 4]
BOOT = [f"b{i}" for i in range(8)]


@pytest.mark.parametrize(
    "k0, anchors",
    [
        (2, ["b3", "b2"]),  # positions (1, 8)
        (4, ["b3", "b1", "b0", "b2"]),  # positions (1, 3, 6, 8)
        (7, ["b3", "b6", "b1", "b7", "b0", "b5", "b2"]),  # positions (1, 2, 3, 5, 6, 7, 8)
    ],
)
def test_bootstrap_init_subsets_rewards_and_no_maintenance(k0, anchors):
    judge = OracleJudge(dict(zip(BOOT, BOOT_Q, strict=True)))
    method = RankBufferReward(judge, k0=k0, buffer_init="bootstrap", lambda_fmt=0.0)
    (res,) = _score(method, [_group(BOOT, references=None)])
    assert judge.counts == {"listwise": 1}  # no coarse calls on the bootstrap group
    # the quality IS the zero-based position here, so r = -1 + 2 * quality / 7
    assert res.rewards == pytest.approx([-1 + 2 * q / 7 for q in BOOT_Q])
    assert _texts(method) == anchors and {a.source for a in method.anchors("q")} == {"bootstrap"}
    buf = method.buffer("q")  # markers untouched: no Algorithm 2 on this group
    assert (buf.observed_epoch, buf.left_epoch, buf.right_epoch) == (None, None, None)
    assert res.details["bootstrap"] and res.details["anchors_added"] == {"bootstrap": len(anchors)}


def test_bootstrap_then_coarse_to_fine_in_the_same_epoch():
    quality = dict(zip(BOOT, BOOT_Q, strict=True)) | {"low": -1, "mid": 1.5}
    judge = OracleJudge(quality)
    method = RankBufferReward(judge, k0=4, buffer_init="bootstrap", lambda_fmt=0.0)
    _score(method, [_group(BOOT, references=None)])
    (res,) = _score(method, [_group(["mid", "low"], references=None)], step=1)
    # anchors b3(0) b1(2) b0(5) b2(7): mid -> 1, low -> 0; left expansion adds "low" (markers
    # were fresh); a2 = b1 (buckets 1, 2) is active, a3 = b0 (buckets 2, 3) inactive -> h = 1
    assert judge.counts == {"listwise": 1, "coarse": 2}
    assert res.rewards == pytest.approx([1.0, -1.0])
    assert _texts(method) == ["low", "b3", "b1", "b0", "b2"]
    assert [a.inactive_epochs for a in method.anchors("q")] == [0, 0, 0, 1, 0]


def test_bootstrap_with_only_invalid_rollouts_waits_for_the_next_group():
    method = RankBufferReward(OracleJudge({}), buffer_init="bootstrap")
    (res,) = _score(method, [_group(["", "  "], references=None)])
    assert res.rewards == [0.0, 0.0] and not res.neutral
    assert method.buffer("q") is None


def test_auto_init_takes_references_where_a_query_has_them_and_bootstraps_the_others():
    # The default, "auto": query "q" has the references (Nectar: ranks 7, 5, 3, 1 with K0 = 4, as above), query
    # "b" has none and is bootstrapped from its first group (positions 1, 3, 6, 8 of b3 b6 b1 b4 b7 b0 b5 b2).
    judge = OracleJudge(QUALITY | dict(zip(BOOT, BOOT_Q, strict=True)))
    method = RankBufferReward(judge, k0=4)
    assert method.options.buffer_init == "auto" and method.options.data_needs().references == 0
    _score(method, [_group(), _group(BOOT, qid="b", references=None)])
    assert [a.text for a in method.anchors("q") if a.source == "references"] == ["n7", "n5", "n3", "n1"]
    assert _texts(method, "b") == ["b3", "b1", "b0", "b2"]
    assert {a.source for a in method.anchors("b")} == {"bootstrap"}
    # 6 coarse + 1 fine call for "q" (the main scenario), 1 listwise call for "b"
    assert judge.counts == {"coarse": 6, "listwise": 2}


# ----------------------------------------------------------------- variants
def test_coarse_only_shares_the_average_rank_without_fine_calls():
    judge = OracleJudge(QUALITY)
    method = RankBufferReward(judge, k0=4, buffer_variant="coarse_only", lambda_fmt=0.0)
    (res,) = _score(method, [_group()])
    assert judge.counts == {"coarse": 6}
    # blocks: "" | c0 | {c1 c1 c5 c7} | c3 | c6 -> q = 0, 1, (2+3+4+5)/4 = 3.5, 6, 7
    assert res.rewards == pytest.approx([-5 / 7, 0.0, -1.0, 5 / 7, 0.0, 0.0, 1.0, 0.0])
    # maintenance still runs; the refinement anchor is one of bucket 1's answers
    texts = _texts(method)
    assert texts[0] == "c0" and texts[-1] == "c6" and texts[2] in {"c1", "c5", "c7"}
    assert method.anchors("q")[2].source == "refine"


def test_order_only_hides_anchor_text_in_coarse_requests():
    judge = OracleJudge(QUALITY)
    method = RankBufferReward(judge, k0=4, buffer_variant="order_only", lambda_fmt=0.0)
    (res,) = _score(method, [_group()])
    assert all(not r.show_anchor_text for r in _of(judge, CoarseRequest))
    assert judge.counts == {"coarse": 6, "listwise": 1}
    assert res.rewards == pytest.approx(EXPECTED_REWARDS)


def test_static_buffer_is_frozen_after_its_first_epoch():
    judge = OracleJudge(QUALITY)
    method = RankBufferReward(judge, k0=4, buffer_variant="static")
    _score(method, [_group()], epoch=0)
    after_epoch0 = _texts(method)
    assert after_epoch0 == ["c0", "n7", "c1", "n5", "n3", "n1", "c6"]  # maintained in epoch 0
    (res,) = _score(method, [_group(["c0", "c1", "c3", "c5", "c6", "c7"])], epoch=1, step=1)
    assert _texts(method) == after_epoch0 and not res.details["maintained"]
    assert res.details["anchors_added"] == {}


def test_dynamic_prunes_an_inactive_anchor_after_H_epochs():
    judge = OracleJudge(QUALITY | {"top": 9})
    method = RankBufferReward(judge, k0=4, inactivity_epochs=2)
    # Only "top" (above n1) each epoch. Epoch 0: right adds top; n5, n3 inactive (h = 1).
    # Epoch 1: top lies between n1 and top(anchor): position 4 of 5, bucket 4 is next to
    # a4 = n1 -> n1 active; n5, n3 reach h = 2 = H -> pruned.
    _score(method, [_group(["top"])], epoch=0)
    assert _texts(method) == ["n7", "n5", "n3", "n1", "top"]
    (res,) = _score(method, [_group(["top"])], epoch=1, step=1)
    assert _texts(method) == ["n7", "n1", "top"]
    assert res.details["anchors_pruned"] == {"references": 2}


# ----------------------------------------------------------------- failure policy
def test_failed_coarse_call_makes_the_group_neutral_and_leaves_no_buffer():
    judge = OracleJudge(QUALITY, fail=lambda r: isinstance(r, CoarseRequest) and r.candidate == "c5")
    method = RankBufferReward(judge, k0=4, lambda_fmt=0.2)
    (res,) = _score(method, [_group()])
    assert res.neutral and len(res.rewards) == 8
    assert method.buffer("q") is None  # not even initialized
    assert judge.counts["listwise"] == 0  # the fine round never started
    assert method.step_metrics([res])["reward/neutral_groups"] == 1


def test_failed_fine_call_keeps_the_coarse_ranking_and_leaves_the_buffer_unchanged():
    fail = {"on": False}
    judge = OracleJudge(QUALITY, fail=lambda r: fail["on"] and isinstance(r, ListwiseRequest))
    method = RankBufferReward(judge, k0=4)
    _score(method, [_group()])
    before = json.dumps(method.state_dict(), sort_keys=True)
    fail["on"] = True
    (res,) = _score(method, [_group()], epoch=1, step=1)
    assert not res.neutral and res.details["fine_fallbacks"] >= 1
    assert len(res.details["partial_failures"]) == res.details["fine_fallbacks"]
    assert json.dumps(method.state_dict(), sort_keys=True) == before  # no maintenance from an unordered bucket
    assert method.step_metrics([res])["rank/fine_fallbacks"] == 1


def test_failed_fine_call_on_first_sight_keeps_the_reference_buffer():
    judge = OracleJudge(QUALITY, fail=lambda r: isinstance(r, ListwiseRequest))
    method = RankBufferReward(judge, k0=4, lambda_fmt=0.0)
    (res,) = _score(method, [_group()])
    # The fine call over bucket C1 [c1 c5 c7] failed: those answers share one place. Order:
    # "" | c0 | {c1 c1 c5 c7} | c3 | c6 -> q = 0, 1, (2+3+4+5)/4 = 3.5, 6, 7 and r = -1 + 2q/7.
    assert not res.neutral and res.details["fine_fallbacks"] == 1
    assert res.rewards == pytest.approx([-5 / 7, 0.0, -1.0, 5 / 7, 0.0, 0.0, 1.0, 0.0])
    assert _texts(method) == ["n7", "n5", "n3", "n1"]  # Select_K0 of the references, nothing inserted


def test_invalid_verdict_is_a_failure_not_a_guess():
    class _OutOfRange(OracleJudge):
        async def _verdict(self, request, display):
            return 9 if isinstance(request, CoarseRequest) else await super()._verdict(request, display)

    method = RankBufferReward(_OutOfRange(QUALITY))
    (res,) = _score(method, [_group()])
    assert res.neutral and "expected an integer in 0..4" in res.details["failure"]
    assert res.details["failure_kind"] == "invalid"


def test_failed_bootstrap_ranking_is_neutral_and_retried_next_time():
    judge = OracleJudge(dict(zip(BOOT, BOOT_Q, strict=True)), fail=lambda r: r.step == 0)
    method = RankBufferReward(judge, buffer_init="bootstrap")
    (res,) = _score(method, [_group(BOOT, references=None)], step=0)
    assert res.neutral and method.buffer("q") is None
    (res,) = _score(method, [_group(BOOT, references=None)], step=1)
    assert res.details["bootstrap"] and _texts(method) == ["b3", "b1", "b0", "b2"]


# ----------------------------------------------------------------- LLM buffer manager
# pool for the main scenario: anchors n7 n5 n3 n1 (0-3), then rollouts worst -> best
# c0 c7 c1 c5 c3 c6 (4-9). Combined order: c0 n7 c7 c1 c5 n5 c3 n3 n1 c6.
def test_llm_manager_selects_and_sorts_by_the_combined_order():
    judge = OracleJudge(QUALITY, select=lambda r: [9, 1, 3, 4])
    method = RankBufferReward(judge, k0=4, buffer_manager="llm", lambda_fmt=0.0)
    (res,) = _score(method, [_group()])
    (req,) = _of(judge, BufferSelectRequest)
    assert req.anchors == ("n7", "n5", "n3", "n1") and req.rollouts == ("c0", "c7", "c1", "c5", "c3", "c6")
    assert req.size == 4 and req.lookahead == ()
    assert _texts(method) == ["c0", "n5", "n1", "c6"]
    assert [a.source for a in method.anchors("q")] == ["llm", "references", "references", "llm"]
    assert res.rewards == pytest.approx(EXPECTED_REWARDS)
    assert res.details["anchors_added"] == {"references": 4, "llm": 2}
    assert res.details["anchors_pruned"] == {"references": 2}


def test_llm_manager_is_shown_the_combined_order():
    judge = OracleJudge(QUALITY, select=lambda r: [9, 1, 3, 4])
    _score(RankBufferReward(judge, k0=4, buffer_manager="llm"), [_group()])
    (req,) = _of(judge, BufferSelectRequest)
    # pool indices: n7 0, n5 1, n3 2, n1 3, c0 4, c7 5, c1 6, c5 7, c3 8, c6 9. Buckets C0 [c0],
    # C1 [c7 c1 c5] (fine order), C2 [c3], C3 [], C4 [c6]; C_p sits before anchor p:
    # c0 n7 c7 c1 c5 n5 c3 n3 n1 c6
    assert req.combined_order == (4, 0, 5, 6, 7, 1, 8, 2, 3, 9)
    pool = req.anchors + req.rollouts
    assert [QUALITY[pool[i]] for i in req.combined_order] == sorted(QUALITY[t] for t in pool)  # truly worst -> best


def test_llm_lookahead_manager_is_shown_the_previous_epochs_combined_order():
    judge = OracleJudge(QUALITY | {"d1": 3.5, "d2": 9}, select=lambda r: [0, 1, 2, 3])
    method = RankBufferReward(judge, k0=4, buffer_manager="llm_lookahead")
    _score(method, [_group(["d1"])], epoch=0)
    _score(method, [_group(["d2"])], epoch=1, step=1)
    (req,) = _of(judge, BufferSelectRequest)
    # epoch 0's group: d1 (3.5) between n5 (3) and n3 (5) -> bucket C2. Pool n7 0, n5 1, n3 2,
    # n1 3, d1 4; combined: n7 n5 d1 n3 n1. The look-ahead rollout d2 is context, not in the order.
    assert req.rollouts == ("d1",) and req.lookahead == ("d2",)
    assert req.combined_order == (0, 1, 4, 2, 3)


@pytest.mark.parametrize("answer", [[1, 2, 3], [1, 1, 2, 3], [0, 1, 2, 10], "0,1,2,3", None])
def test_invalid_manager_answer_leaves_the_buffer_unchanged(answer):
    fail = (lambda r: isinstance(r, BufferSelectRequest)) if answer is None else None
    judge = OracleJudge(QUALITY, select=lambda r: answer, fail=fail)
    method = RankBufferReward(judge, k0=4, buffer_manager="llm", lambda_fmt=0.0)
    (res,) = _score(method, [_group()])
    assert _texts(method) == ["n7", "n5", "n3", "n1"]
    assert not res.neutral and res.rewards == pytest.approx(EXPECTED_REWARDS)
    assert res.details["manager_invalid"] == 1
    assert method.step_metrics([res])["buffer/manager_invalid"] == 1


def test_llm_lookahead_updates_when_the_query_returns_next_epoch():
    judge = OracleJudge(QUALITY | {"d1": 3.5, "d2": 9}, select=lambda r: [9, 1, 3, 4])
    method = RankBufferReward(judge, k0=4, buffer_manager="llm_lookahead")
    _score(method, [_group()], epoch=0)
    assert judge.counts["buffer_select"] == 0 and _texts(method) == ["n7", "n5", "n3", "n1"]
    _score(method, [_group(["d1"])], epoch=0, step=1)  # same epoch: still no update
    assert judge.counts["buffer_select"] == 0
    n_before = len(judge.requests)
    (res,) = _score(method, [_group(["d1", "d2"])], epoch=1, step=2)
    first = judge.requests[n_before]
    # the pending group is the last ranked one of epoch 0: ["d1"] (bucket 2 of n7 n5 n3 n1)
    assert isinstance(first, BufferSelectRequest)
    assert first.rollouts == ("d1",) and first.lookahead == ("d1", "d2") and first.size == 4
    # pool n7 n5 n3 n1 d1; the selection [9, 1, 3, 4] is invalid (index 9) -> unchanged
    assert res.details["manager_invalid"] == 1 and _texts(method) == ["n7", "n5", "n3", "n1"]


def test_llm_lookahead_ranks_with_the_updated_buffer():
    judge = OracleJudge(QUALITY | {"d1": 3.5, "d2": 9}, select=lambda r: [9, 1, 3, 4])
    method = RankBufferReward(judge, k0=4, buffer_manager="llm_lookahead")
    _score(method, [_group()], epoch=0)
    n_before = len(judge.requests)
    (res,) = _score(method, [_group(["d1", "d2"])], epoch=1, step=1)
    # manager picks c0 n5 n1 c6 from epoch 0's pool; d1 (3.5) -> 2, d2 (9) -> 4 against them
    assert _texts(method) == ["c0", "n5", "n1", "c6"]
    coarse = [r for r in judge.requests[n_before:] if isinstance(r, CoarseRequest)]
    assert all(r.anchors == ("c0", "n5", "n1", "c6") for r in coarse)
    assert res.details["bucket_sizes"] == [0, 0, 1, 0, 1]


def test_config_errors_name_the_fields():
    j = OracleJudge({})
    with pytest.raises(ValueError, match="variant must be one of"):
        RankBufferReward(j, buffer_variant="frozen")
    with pytest.raises(ValueError, match="manager='llm'.*variant='static'"):
        RankBufferReward(j, buffer_manager="llm", buffer_variant="static")
    with pytest.raises(ValueError, match="k0 must be"):
        RankBufferReward(j, k0=1)
    with pytest.raises(ValueError, match="init must be"):
        RankBufferReward(j, buffer_init="random")


# ----------------------------------------------------------------- state
def _two_epochs(method):
    _score(method, [_group(), _group(["c3", "c6"], qid="q2")], epoch=0, step=0)
    _score(method, [_group(["c0", "c5", "c6", "c7"]), _group(["c1"], qid="q2")], epoch=1, step=1)


@pytest.mark.parametrize("manager", [None, "llm_lookahead"])
def test_state_round_trip_in_memory(manager):
    kw = {"k0": 4, "buffer_manager": manager}
    a = RankBufferReward(OracleJudge(QUALITY), **kw)
    _two_epochs(a)
    state = json.loads(json.dumps(a.state_dict()))
    assert "texts" in state
    b = RankBufferReward(OracleJudge(QUALITY), **kw)
    b.load_state_dict(state)
    assert b.state_dict() == a.state_dict()
    assert [vars(x) for x in b.anchors("q")] == [vars(x) for x in a.anchors("q")]
    # the next step is the same for the original and the restored method
    nxt = [_group(["c3", "c5", "c6"]), _group(["c0", "c7"], qid="q2")]
    ra, rb = _score(a, nxt, epoch=2, step=2), _score(b, nxt, epoch=2, step=2)
    assert [r.rewards for r in ra] == [r.rewards for r in rb]
    assert b.state_dict() == a.state_dict()


def test_state_with_sqlite_store_keeps_the_buffers_in_the_store(tmp_path):
    a = RankBufferReward(OracleJudge(QUALITY), store=SQLiteAnchorStore(tmp_path / "a.sqlite"))
    _two_epochs(a)
    state = json.loads(json.dumps(a.state_dict()))
    # texts and buffer structures are in the store; the state holds the running totals only
    assert "texts" not in state and "buffers" not in state and "n7" not in json.dumps(state)
    assert state["buffers_stored"]["count"] == len(a.export_buffers()) == 2  # queries q and q2
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    a.save_state(str(checkpoint))  # the state file and a snapshot of the store
    b = RankBufferReward(OracleJudge(QUALITY), store=SQLiteAnchorStore(tmp_path / "b.sqlite"))
    b.load_state(str(checkpoint))
    assert b.export_buffers() == a.export_buffers() and b.state_dict() == a.state_dict() and _texts(b) == _texts(a)
    c = RankBufferReward(OracleJudge(QUALITY), store=SQLiteAnchorStore(tmp_path / "c.sqlite"))
    with pytest.raises(ValueError, match="holds 0 buffers, but the RankBuffer state counts 2"):
        c.load_state_dict(state)  # the state without its store: refused, not silently empty


def test_a_new_method_on_an_old_store_starts_without_buffers(tmp_path):
    # A fresh run reusing an output_dir must not inherit the previous run's buffers (texts may stay).
    path = tmp_path / "anchors.sqlite"
    _two_epochs(RankBufferReward(OracleJudge(QUALITY), store=SQLiteAnchorStore(path)))
    again = RankBufferReward(OracleJudge(QUALITY), store=SQLiteAnchorStore(path))
    assert again.export_buffers() == {} and again.anchors("q") == []


def test_state_with_other_settings_is_refused():
    a = RankBufferReward(OracleJudge(QUALITY))
    _score(a, [_group()])
    with pytest.raises(ValueError, match="inactivity_epochs"):
        RankBufferReward(OracleJudge(QUALITY), inactivity_epochs=2).load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="Not a RankBufferReward state"):
        a.load_state_dict({})


# ----------------------------------------------------------------- judge rounds
@pytest.mark.parametrize("manager, rounds", [(None, 2), ("llm", 3)])
def test_a_step_takes_two_judge_rounds(manager, rounds):
    # coarse calls of all groups in one round, then all fine calls (+ the manager's round)
    judge = OracleJudge(QUALITY, gated=True)
    method = RankBufferReward(judge, k0=4, buffer_manager=manager)
    groups = [_group(), _group(["c3", "c5", "c7", "c1"], qid="q2")]
    asyncio.run(judge.run_in_rounds(method.score(groups, epoch=0, step=0)))
    assert judge.rounds == rounds


# ----------------------------------------------------------------- frozen_state (evaluation)
def _state_json(method):
    return json.dumps(method.state_dict(), sort_keys=True)


def _check_frozen_scoring(method, groups, epoch, step=5):
    """Score `groups` inside frozen_state(): the state changes in the block and is restored on exit,
    and so are BufferTable's running totals (buffer/... metrics of an empty step)."""
    before, metrics_before = _state_json(method), method.step_metrics([])
    with method.frozen_state():
        results = _score(method, groups, epoch=epoch, step=step)
        assert _state_json(method) != before  # the block did change something to undo
    assert _state_json(method) == before
    assert method.step_metrics([]) == metrics_before
    return results


# the LLM look-ahead manager keeps pending groups and, in epoch 2, first applies them
@pytest.mark.parametrize("init", ["references", "bootstrap"])
@pytest.mark.parametrize("manager", [None, "llm", "llm_lookahead"])
def test_frozen_state_restores_new_and_existing_queries(init, manager):
    kw = {"k0": 4, "buffer_init": init, "buffer_manager": manager}
    judge = OracleJudge(QUALITY, select=lambda r: [0, 1, 2, 3])
    trained = RankBufferReward(judge, **kw)
    _check_frozen_scoring(trained, [_group(), _group(["c3", "c6"], qid="q2")], epoch=0)  # new queries only
    assert trained.state_dict()["buffers"] == {} and trained.state_dict()["pending"] == {}
    _two_epochs(trained)
    twin = RankBufferReward(OracleJudge(QUALITY, select=lambda r: [0, 1, 2, 3]), **kw)
    _two_epochs(twin)
    # existing q, q2 (q twice in one step) and new q3, in a later epoch
    evaluation = [_group(["c0", "c6", "c7"]), _group(["c3", "c5"]), _group(["c1", "c7"], qid="q2"), _group(qid="q3")]
    _check_frozen_scoring(trained, evaluation, epoch=2)
    # the next training step is the same as for a twin that never evaluated
    nxt = [_group(["c3", "c5", "c6"]), _group(["c0", "c7"], qid="q2"), _group(qid="q3")]
    assert [r.rewards for r in _score(trained, nxt, epoch=2, step=6)] == [
        r.rewards for r in _score(twin, nxt, epoch=2, step=6)
    ]
    assert _state_json(trained) == _state_json(twin)


def test_frozen_state_with_sqlite_store_keeps_texts_but_not_state(tmp_path):
    store = SQLiteAnchorStore(tmp_path / "anchors.sqlite")
    refs = [f"m{i}" for i in range(1, 8)]  # a new query's references, best first, quality 8 - i
    method = RankBufferReward(OracleJudge(QUALITY | {m: 8 - i for i, m in enumerate(refs, 1)}), store=store)
    _two_epochs(method)
    keys = [text_id(t) for t in ("m7", "m5", "m3", "m1")]  # Select_4 of m1..m7 (as for n1..n7)
    assert store.missing(keys) == sorted(keys)  # missing() answers sorted
    _check_frozen_scoring(method, [_group(qid="q3", references=refs)], epoch=2)
    # the eval query's Nectar anchors stay in the append-only store (content-addressed, harmless)
    assert store.missing(keys) == []


def test_frozen_state_restores_on_an_exception_in_the_block():
    method = RankBufferReward(OracleJudge(QUALITY), buffer_manager="llm_lookahead")
    _two_epochs(method)
    before = _state_json(method)
    with pytest.raises(KeyError, match="stop"):
        with method.frozen_state():
            _score(method, [_group(["c0", "c6"]), _group(qid="q3")], epoch=2)
            assert _state_json(method) != before
            raise KeyError("stop")
    assert _state_json(method) == before


def test_frozen_state_never_serializes_the_whole_state(monkeypatch):
    # O(touched queries): the override must not snapshot or reload state_dict (O(all queries))
    method = RankBufferReward(OracleJudge(QUALITY), buffer_manager="llm_lookahead")
    _two_epochs(method)
    before = _state_json(method)

    def refuse(*args):
        raise AssertionError("frozen_state serialized the whole state")

    monkeypatch.setattr(method, "state_dict", refuse)
    monkeypatch.setattr(method, "load_state_dict", refuse)
    with method.frozen_state():
        _score(method, [_group(["c0", "c6"]), _group(qid="q3")], epoch=2)
    monkeypatch.undo()
    assert _state_json(method) == before


def test_frozen_state_blocks_nest():
    method = RankBufferReward(OracleJudge(QUALITY))
    _score(method, [_group()], epoch=0)
    outer = _state_json(method)
    with method.frozen_state():
        _score(method, [_group(["c0", "c6"])], epoch=1)  # touches q
        middle = _state_json(method)
        _check_frozen_scoring(method, [_group(["c3"]), _group(qid="q2")], epoch=2)  # q again, new q2
        assert _state_json(method) == middle
    assert _state_json(method) == outer


def test_load_state_dict_inside_frozen_state_is_refused():
    method = RankBufferReward(OracleJudge(QUALITY))
    _score(method, [_group()])
    state = method.state_dict()
    with method.frozen_state():
        with pytest.raises(RuntimeError, match="inside frozen_state.*outside the block"):
            method.load_state_dict(state)


# ----------------------------------------------------------------- coarse-to-fine ranking
# The paper's coarse-to-fine ranking on its own (`CoarseToFine`), and `Ranking.blocks`, hand-computed.
#
# Anchors a1 < a2 (qualities 1, 3) give positions 0 (below 1), 1 (between) and 2 (above 3).
# Answers x (0.5), y (2), z (2.5), w (4): positions 0, 1, 1, 2, so buckets [x] [y z] [w] and
# one fine call, over bucket 1, which orders y before z.
STRATEGY_QUALITY = {"a1": 1, "a2": 3, "x": 0.5, "y": 2, "z": 2.5, "w": 4}
ANCHORS = ["a1", "a2"]
ANSWERS = ["z", "x", "w", "y"]  # answer indices: z 0, x 1, w 2, y 3


def _rank(strategy):
    return asyncio.run(strategy.rank(GROUP, ANCHORS, ANSWERS, step=0))


def test_coarse_to_fine_places_then_orders_crowded_buckets():
    judge = OracleJudge(STRATEGY_QUALITY)
    ranking = _rank(CoarseToFine(judge))
    assert ranking.positions == [1, 0, 2, 1]  # z, x, w, y
    assert ranking.buckets == [[1], [3, 0], [2]]  # bucket 1 ordered worst -> best: y (3) before z (0)
    assert (ranking.fine_calls, ranking.unranked, ranking.ties) == (1, frozenset(), False)
    assert dict(judge.counts) == {"coarse": 4, "listwise": 1}
    assert ranking.blocks() == [[1], [3], [0], [2]]  # one answer per block: the full order


def test_coarse_only_ties_each_bucket_and_order_only_hides_anchor_texts():
    judge = OracleJudge(STRATEGY_QUALITY)
    ranking = _rank(CoarseToFine(judge, fine=False, show_anchor_text=False))
    assert judge.counts == {"coarse": 4}  # no fine calls
    assert ranking.ties and sorted(ranking.buckets[1]) == [0, 3]  # a seeded shuffle of z, y
    assert [sorted(b) for b in ranking.blocks()] == [[1], [0, 3], [2]]  # bucket 1 is one tie block
    assert all(not r.show_anchor_text for r in judge.requests if isinstance(r, CoarseRequest))


def test_a_failed_fine_call_keeps_its_bucket_as_one_tie_block_and_a_failed_coarse_call_raises():
    fine_fails = OracleJudge(STRATEGY_QUALITY, fail=lambda r: isinstance(r, ListwiseRequest))
    ranking = _rank(CoarseToFine(fine_fails))
    assert ranking.unranked == frozenset({1}) and len(ranking.failures) == 1
    assert ranking.blocks() == [[1], [0, 3], [2]]  # x | z, y tied (coarse order kept) | w
    with pytest.raises(GroupJudgingFailed):
        _rank(CoarseToFine(OracleJudge(STRATEGY_QUALITY, fail=lambda r: isinstance(r, CoarseRequest))))


def test_blocks_follow_an_explicit_order_and_skip_empty_buckets():
    # An order (RankBuffer+'s fused looks) replaces the buckets' concatenation; empty buckets make no block.
    assert Ranking([0, 0], [[0, 1], [], []], 1, order=[1, 0]).blocks() == [[1], [0]]
    assert Ranking([0, 2], [[0], [], [1]], 0, ties=True).blocks() == [[0], [1]]


# ----------------------------------------------------------------- buffer managers
# Algorithm 2 as a manager (static, capped) and the LLM manager, hand-computed.
#
# Buffer n1 < n2 (references, epoch 0). After a group whose buckets are [l] [] [r] (an answer below
# all and one above all), Algorithm 2 adds l as the new lowest anchor (`left`) and r as the new
# highest (`right`): l n1 n2 r.
OLD = AnchorBuffer.initial(["n1", "n2"], "references", 0)
BUCKETS = [["l"], [], ["r"]]
GROUP = Group("q", "Q?", [], ["unused"])
TEXTS = {"n1": "n1", "n2": "n2", "l": "l", "r": "r"}


def _after(manager, epoch=0, details=None):
    details = {} if details is None else details
    return asyncio.run(
        manager.after_ranking(GROUP, OLD, OLD, BUCKETS, TEXTS.__getitem__, epoch=epoch, step=0, details=details)
    )


def _keys(buffer):
    return [a.text_key for a in buffer.anchors]


def test_rule_manager_is_algorithm_2_and_static_freezes_after_the_first_epoch():
    update = _after(RuleManager(3))
    assert _keys(update.buffer) == ["l", "n1", "n2", "r"]
    assert [a.source for a in update.added] == ["left", "right"] and update.pruned == ()
    assert _after(RuleManager(3, static=True), epoch=0).buffer.size == 4  # the creation epoch is maintained
    frozen = _after(RuleManager(3, static=True), epoch=1)
    assert frozen.buffer is OLD and frozen.added == frozen.pruned == ()


def test_rule_manager_cap_keeps_both_ends():
    # 4 anchors l n1 n2 r capped at 2: Select_K0 keeps the ends l and r; n1, n2 are pruned, l and r still added.
    update = _after(RuleManager(3, max_anchors=2))
    assert _keys(update.buffer) == ["l", "r"]
    assert _keys(AnchorBuffer(update.added, 0)) == ["l", "r"] and {a.text_key for a in update.pruned} == {"n1", "n2"}


def test_llm_manager_picks_by_the_combined_order_and_lookahead_waits():
    # Pool: anchors n1 n2 (0, 1), rollouts l r (2, 3); combined order l n1 n2 r. Oracle qualities
    # l 0 < n1 1 < n2 2 < r 3: Select_K0 of 2 keeps the ends, pool indices 2 and 3 (l and r).
    judge = OracleJudge({"l": 0, "n1": 1, "n2": 2, "r": 3})
    details = {}
    update = _after(LLMManager(judge, 2), details=details)
    (request,) = judge.requests
    assert isinstance(request, BufferSelectRequest) and request.combined_order == (2, 0, 1, 3)
    assert _keys(update.buffer) == ["l", "r"] and [a.source for a in update.added] == ["llm", "llm"]
    assert details == {"manager_calls": 1, "manager_invalid": 0}
    lookahead = LLMManager(judge, 2, lookahead=True)
    assert _after(lookahead).buffer is OLD and len(judge.requests) == 1  # the update waits for the next epoch
    pending = {"epoch": 0, "buckets": BUCKETS}
    same_epoch = asyncio.run(lookahead.before_ranking(GROUP, OLD, pending, [], TEXTS.__getitem__, epoch=0, step=1,
                                                      details={}))  # fmt: skip
    assert same_epoch is OLD and len(judge.requests) == 1
    later = asyncio.run(lookahead.before_ranking(GROUP, OLD, pending, ["new"], TEXTS.__getitem__, epoch=1, step=2,
                                                 details={}))  # fmt: skip
    assert _keys(later) == ["l", "r"] and judge.requests[-1].lookahead == ("new",)


def test_an_invalid_selection_keeps_the_buffer():
    update = _after(LLMManager(OracleJudge({}, select=lambda r: [0, 0]), 2))
    assert update.buffer is OLD and changes(OLD, update.buffer).added == ()


def test_changes_compares_anchors_by_identity():
    kept = OLD.anchors[1]
    new = AnchorBuffer((kept, Anchor("x", "llm", 1)), 0)
    update = changes(OLD, new)
    assert [a.text_key for a in update.added] == ["x"] and [a.text_key for a in update.pruned] == ["n1"]


# ----------------------------------------------------------------- the display audit
# The display-order audit: Kendall tau, copy detection, the shuffle check, and the three listwise methods.
def test_kendall_tau_by_hand():
    # [0, 1, 2] vs itself: 3 concordant pairs of 3 -> 1; reversed: 3 discordant -> -1;
    # vs [0, 2, 1]: (0,1), (0,2) agree, (1,2) does not -> (2 - 1) / 3.
    assert kendall_tau([0, 1, 2], [0, 1, 2]) == 1.0
    assert kendall_tau([0, 1, 2], [2, 1, 0]) == -1.0
    assert kendall_tau([0, 1, 2], [0, 2, 1]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="same >= 2 indices"):
        kendall_tau([0, 1], [0, 2])


def _request(n=4, step=0):
    return ListwiseRequest(query="Q?", query_id="q", step=step, candidates=tuple(f"text {i}" for i in range(n)))


def test_audit_counts_copies_both_ways_and_skips_pairs():
    request = _request(4)
    display = display_order(request, 4, seed=7)
    assert display == list(render(request, seed=7).display)  # the order rendering shows
    tally = new_tally()
    audit_answer(tally, request, display, seed=7)  # a copy: tau 1
    audit_answer(tally, request, display[::-1], seed=7)  # a reversed copy: tau -1
    audit_answer(tally, _request(2), [1, 0], seed=7)  # two candidates: always a copy either way, skipped
    # Two audited answers, both copies; taus 1 and -1 sum to 0; chance 2 / 4! = 1/12 each.
    assert tally["answers"] == 2 and tally["copies"] == 2 and tally["tau_sum"] == 0.0
    metrics = tally_metrics([tally, None])
    assert metrics == {
        "rank/listwise_display_answers": 2.0,
        "rank/listwise_display_copy_rate": 1.0,
        "rank/listwise_display_copy_chance": pytest.approx(1 / 12),
        "rank/listwise_display_tau_mean": 0.0,
    }
    assert tally_metrics([]) == {"rank/listwise_display_answers": 0.0}  # no rate without answers


def test_twin_shows_the_same_candidates_in_another_order():
    request = _request(5)
    twin, perm = twin_request(request, seed=3)
    assert sorted(perm) == list(range(5)) and twin.candidates == tuple(request.candidates[i] for i in perm)
    # the twin's display in the request's indices differs from the request's display
    assert [perm[i] for i in display_order(twin, 5, 3)] != display_order(request, 5, 3)
    assert (twin.query_id, twin.step) == (request.query_id, request.step)


def _quality(query_id, text):
    return float(text.split()[-1])  # "answer k e i" has quality i: canonical order is the true order


def _groups(epoch, queries=30, size=6):
    refs = [f"ref {j}" for j in range(7, 0, -1)]  # best first, qualities 7..1
    return [
        Group(f"q{k}", f"Q{k}?", [], [f"answer {k} {epoch} {i}" for i in range(size)], references=refs)
        for k in range(queries)
    ]


def _metrics(name, copy, epochs=2, **options):
    judge = SimulatedJudge(_quality, noise=0.3, seed=1, copy_display_order=copy)
    method = make_reward_method(name, judge, **options)
    out = []
    for epoch in range(epochs):
        results = asyncio.run(method.score(_groups(epoch), epoch=epoch, step=epoch))
        out.append(method.step_metrics(results))
    return out[-1]


@pytest.mark.parametrize("name", ["listwise_group", "rank_buffer", "rank_buffer_plus"])
def test_metric_separates_an_honest_judge_from_a_copying_one(name):
    # Honest (noise 0.3 on qualities 1 apart): answers follow quality, and displays are seeded
    # shuffles, so the tau with the display averages near 0 and copies stay near their chance
    # 2 / n!. A judge that always copies: every answer is the display, tau 1, copy rate 1.
    honest, copying = _metrics(name, 0.0), _metrics(name, 1.0)
    assert honest["rank/listwise_display_answers"] >= 8 and copying["rank/listwise_display_answers"] >= 8
    assert abs(honest["rank/listwise_display_tau_mean"]) < 0.35
    assert honest["rank/listwise_display_copy_rate"] <= honest["rank/listwise_display_copy_chance"] + 0.2
    assert copying["rank/listwise_display_tau_mean"] == 1.0
    assert copying["rank/listwise_display_copy_rate"] == 1.0
    assert "rank/listwise_reshuffle_checks" not in honest  # the shuffle check is off by default


def test_listwise_group_numbers():
    # 30 groups of 6 distinct answers: one audited call each; chance 2 / 6! = 1/360.
    honest, copying = _metrics("listwise_group", 0.0), _metrics("listwise_group", 1.0)
    assert honest["rank/listwise_display_answers"] == 30.0
    assert honest["rank/listwise_display_copy_chance"] == pytest.approx(1 / 360)
    assert honest["rank/listwise_display_copy_rate"] == 0.0
    assert copying["rank/listwise_display_copy_rate"] == 1.0


def test_half_copying_judge_lands_in_between():
    # With probability 0.5 an answer copies (tau 1), else tau ~0: the mean is near 0.5.
    half = _metrics("listwise_group", 0.5)
    assert 0.25 < half["rank/listwise_display_tau_mean"] < 0.75


@pytest.mark.parametrize("name", ["listwise_group", "rank_buffer_plus"])
def test_shuffle_check_agrees_for_an_honest_judge_and_not_for_a_copier(name):
    # Every listwise call of >= 3 candidates is asked twice. Honest: both answers follow quality
    # (noise 0.3), so they agree, tau near 1. Copier: each answer is its own display, two
    # independent shuffles, so agreement is near 0.
    honest = _metrics(name, 0.0, reshuffle_check=1.0)
    copying = _metrics(name, 1.0, reshuffle_check=1.0)
    assert honest["rank/listwise_reshuffle_checks"] == honest["rank/listwise_display_answers"] > 0
    assert honest["rank/listwise_reshuffle_agreement"] > 0.8
    assert abs(copying["rank/listwise_reshuffle_agreement"]) < 0.3


def test_shuffle_check_changes_no_reward_and_is_seeded():
    def run(**options):
        judge = OracleJudge(_quality)
        method = make_reward_method("listwise_group", judge, **options)
        results = asyncio.run(method.score(_groups(0), epoch=0, step=0))
        return [r.rewards for r in results], judge.counts["listwise"], method.step_metrics(results)

    plain, calls, metrics = run()
    checked, checked_calls, checked_metrics = run(reshuffle_check=0.5)
    assert checked == plain and calls == 30  # rewards come from the first answer only
    twins = checked_metrics["rank/listwise_reshuffle_checks"]
    assert checked_calls == 30 + twins and 5 <= twins <= 25  # ~half of 30, drawn per request
    assert run(reshuffle_check=0.5)[2] == checked_metrics  # the same draws on every run
    assert checked_metrics["rank/listwise_reshuffle_agreement"] == 1.0  # the oracle is exact
    assert "rank/listwise_reshuffle_checks" not in metrics


def test_audit_is_kept_in_details_and_validated():
    judge = OracleJudge(_quality)
    (result,) = asyncio.run(make_reward_method("listwise_group", judge).score(_groups(0, 1), epoch=0, step=0))
    assert result.details[DETAILS_KEY]["answers"] == 1
    for name in ("listwise_group", "rank_buffer", "rank_buffer_plus"):
        with pytest.raises(ValueError, match="reshuffle_check"):
            make_reward_method(name, judge, reshuffle_check=1.5)


# ----------------------------------------------------------------- ListwiseGroupReward
# ListwiseGroupReward: one listwise call per group, rank rewards, failures neutral.
LISTWISE_QUALITY = {"a": 1.0, "b": 2.0, "c": 3.0}


def _score_group(method, completions, qid="q"):
    (result,) = asyncio.run(method.score([Group(qid, "Q?", [], completions)], epoch=0, step=0))
    return result


def test_one_call_ranks_unique_answers_with_duplicates_and_invalid():
    judge = OracleJudge(LISTWISE_QUALITY)
    result = _score_group(ListwiseGroupReward(judge), ["b", "a", "c", "a", "<think>cut off"])
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
    judge = OracleJudge(LISTWISE_QUALITY)
    result = _score_group(ListwiseGroupReward(judge), ["a", "a"])
    # one tie block over places 0 and 1: mean 0.5, r = -1 + 2 * 0.5 / 1 = 0
    assert result.rewards == [0.0, 0.0] and judge.requests == [] and result.details["requests"] == 0


def test_failed_call_makes_the_group_neutral_and_counted():
    judge = OracleJudge(LISTWISE_QUALITY, fail=lambda request: request.query_id == "bad")
    method = ListwiseGroupReward(judge)
    result = _score_group(method, ["a", "b"], qid="bad")
    assert result.neutral and len(result.rewards) == 2
    assert method.step_metrics([result])["reward/neutral_groups"] == 1.0


class _NotAPermutation:
    """Answers every listwise request with a repeated index."""

    async def judge(self, request):
        return [0, 0, 1]


def test_invalid_order_is_an_invalid_failure_not_a_made_up_order():
    result = _score_group(ListwiseGroupReward(_NotAPermutation()), ["a", "b", "c"])
    assert result.neutral and result.details["failure_kind"] == "invalid"
    assert "expected a permutation of [0, 1, 2]" in result.details["failure"]


def test_failure_value_from_judge_is_neutral_too():
    class Failing:
        async def judge(self, request):
            return JudgeFailure("timeout", "judge timed out")

    result = _score_group(ListwiseGroupReward(Failing()), ["a", "b"])
    assert result.neutral and result.details["failure_kind"] == "timeout"
