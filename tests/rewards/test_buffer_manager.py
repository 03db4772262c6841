"""`buffer_manager`: Algorithm 2 as a manager (static, capped) and the LLM manager, hand-computed.

Buffer n1 < n2 (references, epoch 0). After a group whose buckets are [l] [] [r] (an answer below
all and one above all), Algorithm 2 adds l as the new lowest anchor (`left`) and r as the new
highest (`right`): l n1 n2 r.
"""

import asyncio

from trl_rankreward.judging.requests import BufferSelectRequest
from trl_rankreward.rewards.anchor_buffer import Anchor, AnchorBuffer
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.buffer_manager import LLMManager, RuleManager, changes
from trl_rankreward.testing import OracleJudge

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
