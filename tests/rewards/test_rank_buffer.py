"""RankBufferReward end to end with a noiseless OracleJudge (RankBuffer paper, Sec. 3).

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

from trl_rankreward.judging.requests import BufferSelectRequest, CoarseRequest, ListwiseRequest
from trl_rankreward.judging.seeding import text_id
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.rewards.sqlite_anchor_store import SQLiteAnchorStore
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
    assert res.neutral and res.rewards == [0.0] * 8
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


def test_state_saved_before_the_rename_of_nectar_loads():
    # a 0.1 checkpoint: config init "nectar", the references' anchors with the source "nectar"
    a = RankBufferReward(OracleJudge(QUALITY), buffer_init="references")
    _score(a, [_group()])
    state = json.loads(json.dumps(a.state_dict()))
    state["config"]["init"] = "nectar"
    for row in state["buffers"]["q"]["anchors"]:
        row[1] = "nectar" if row[1] == "references" else row[1]
    b = RankBufferReward(OracleJudge(QUALITY), buffer_init="references")
    b.load_state_dict(state)
    assert [(x.text, x.source) for x in b.anchors("q")] == [(x.text, x.source) for x in a.anchors("q")]
    assert {x.source for x in b.anchors("q")} >= {"references"}


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
