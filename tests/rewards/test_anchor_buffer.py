"""Select_K0 and Algorithm 2 (RankBuffer paper, Appendix A and H), hand-computed.

Anchors are named by their text key; `buckets[p]` is sigma_p (p = 0..K), worst -> best.
"""

import json

import pytest

from trl_rankreward.judging.subsample import select_endpoints
from trl_rankreward.rewards import anchor_buffer
from trl_rankreward.rewards.anchor_buffer import (
    Anchor,
    AnchorBuffer,
    BufferTable,
    InMemoryAnchorStore,
    SQLiteAnchorStore,
    update_buffer,
)


def _buffer(*keys, h=None, epoch=0, **markers):
    """Buffer of reference anchors `keys`; `h` maps key -> inactivity counter."""
    h = h or {}
    return AnchorBuffer(tuple(Anchor(k, "references", epoch, h.get(k, 0)) for k in keys), created_epoch=epoch, **markers)


def _keys(buffer):
    return [a.text_key for a in buffer.anchors]


def _h(buffer):
    return {a.text_key: a.inactive_epochs for a in buffer.anchors}


# ----------------------------------------------------------------- Select_K0 (Appendix H)
@pytest.mark.parametrize(
    "k0, expected",
    [
        (2, [7, 1]),  # indices round(i*6/1) = 0, 6
        (4, [7, 5, 3, 1]),  # round(i*6/3) = 0, 2, 4, 6
        (7, [7, 6, 5, 4, 3, 2, 1]),  # all seven
    ],
)
def test_select_endpoints_nectar_ranks(k0, expected):
    nectar_worst_to_best = [7, 6, 5, 4, 3, 2, 1]  # Nectar ranks (1 = best) reversed
    assert select_endpoints(nectar_worst_to_best, k0) == expected


@pytest.mark.parametrize(
    "k0, expected",
    [
        (2, [1, 8]),  # indices 0, 7
        (4, [1, 3, 6, 8]),  # i*7/3 = 0, 2.33, 4.67, 7 -> 0, 2, 5, 7
        (7, [1, 2, 3, 5, 6, 7, 8]),  # i*7/6 = 0, 1.17, 2.33, 3.5, 4.67, 5.83, 7 -> 3.5 rounds UP to 4
    ],
)
def test_select_endpoints_bootstrap_positions(k0, expected):
    assert select_endpoints([1, 2, 3, 4, 5, 6, 7, 8], k0) == expected


def test_select_endpoints_short_sequences_and_bad_k0():
    assert select_endpoints(["a", "b"], 4) == ["a", "b"]  # fewer items than K0: all of them
    assert select_endpoints(["a", "b", "c"], 1) == ["c"]
    # 5 items, K0=4: i*4/3 = 0, 1.33, 2.67, 4 -> indices 0, 1, 3, 4
    assert select_endpoints("abcde", 4) == ["a", "b", "d", "e"]
    with pytest.raises(ValueError, match="at least 1"):
        select_endpoints([1, 2], 0)


# ----------------------------------------------------------------- boundary expansion
def test_left_expansion_adds_worst_of_bucket_zero():
    buf = _buffer("a1", "a2", "a3", "a4")
    up = update_buffer(buf, [["x", "y"], [], [], [], []], epoch=0, H=3)
    # sigma_0[1] = "x" (worst) goes first with source left, created in epoch 0, h = 0
    assert _keys(up.buffer) == ["x", "a1", "a2", "a3", "a4"]
    assert up.added == (Anchor("x", "left", 0, 0),)
    assert up.buffer.left_epoch == 0 and up.buffer.right_epoch is None


def test_right_expansion_adds_best_of_bucket_k():
    buf = _buffer("a1", "a2", "a3", "a4")
    up = update_buffer(buf, [[], [], [], [], ["u", "v"]], epoch=2, H=3)
    # sigma_K[|sigma_K|] = "v" (best) goes last
    assert _keys(up.buffer) == ["a1", "a2", "a3", "a4", "v"]
    assert up.added == (Anchor("v", "right", 2, 0),)
    assert up.buffer.right_epoch == 2 and up.buffer.left_epoch is None


def test_boundary_expansion_at_most_once_per_epoch():
    buf = _buffer("a1", "a2")
    first = update_buffer(buf, [["x"], [], ["v"]], epoch=0, H=3).buffer
    assert _keys(first) == ["x", "a1", "a2", "v"]
    # Same epoch, K is now 4: rollouts below and above again -> nothing added at either end
    again = update_buffer(first, [["y"], [], [], [], ["w"]], epoch=0, H=3)
    assert _keys(again.buffer) == ["x", "a1", "a2", "v"] and again.added == ()
    # Next epoch: both boundaries may expand once more
    later = update_buffer(again.buffer, [["y"], [], [], [], ["w"]], epoch=1, H=3)
    assert _keys(later.buffer) == ["y", "x", "a1", "a2", "v", "w"]


# ----------------------------------------------------------------- local refinement
@pytest.mark.parametrize(
    "bucket, median",
    [
        (["r1", "r2", "r3"], "r2"),  # ceil(3/2) = 2
        (["r1", "r2", "r3", "r4"], "r2"),  # ceil(4/2) = 2: the LOWER median
        (["r1", "r2", "r3", "r4", "r5"], "r3"),  # ceil(5/2) = 3
    ],
)
def test_refinement_adds_one_based_lower_median(bucket, median):
    buf = _buffer("a1", "a2", "a3")
    up = update_buffer(buf, [[], bucket, [], []], epoch=0, H=3)
    # internal bucket p=1 lies between a1 and a2: the new anchor goes there (coordinate 1.5)
    assert _keys(up.buffer) == ["a1", median, "a2", "a3"]
    assert up.added == (Anchor(median, "refine", 0, 0),)


def test_refinement_needs_three_and_skips_boundary_buckets():
    buf = _buffer("a1", "a2", "a3")
    # bucket 1 has 2 (< 3): no refinement; buckets 0 and 3 are boundaries: expansion only
    up = update_buffer(buf, [["l1", "l2", "l3"], ["m1", "m2"], [], ["u1", "u2", "u3"]], epoch=0, H=3)
    assert _keys(up.buffer) == ["l1", "a1", "a2", "a3", "u3"]
    assert [a.source for a in up.added] == ["left", "right"]


def test_refinement_every_epoch_and_every_group():
    # refinement has no once-per-epoch limit (Algorithm 2, lines 25-30)
    buf = _buffer("a1", "a2")
    b1 = update_buffer(buf, [[], ["r1", "r2", "r3"], []], epoch=0, H=3).buffer
    b2 = update_buffer(b1, [[], ["s1", "s2", "s3"], [], []], epoch=0, H=3).buffer
    assert _keys(b2) == ["a1", "s2", "r2", "a2"]


# ----------------------------------------------------------------- inactivity and pruning
def test_inactivity_counted_once_per_epoch_and_pruned_at_H():
    buf = _buffer("a1", "a2", "a3", "a4")
    empty = [[], [], [], [], []]
    # epoch 0: internal a2 (buckets 1, 2) and a3 (buckets 2, 3) inactive -> h = 1
    b = update_buffer(buf, empty, epoch=0, H=3).buffer
    assert _h(b) == {"a1": 0, "a2": 1, "a3": 1, "a4": 0}
    assert b.observed_epoch == 0
    # same epoch again: not observed twice
    b = update_buffer(b, empty, epoch=0, H=3).buffer
    assert _h(b) == {"a1": 0, "a2": 1, "a3": 1, "a4": 0}
    b = update_buffer(b, empty, epoch=1, H=3).buffer
    assert _h(b) == {"a1": 0, "a2": 2, "a3": 2, "a4": 0}
    # epoch 2: h = 3 >= H -> both internal anchors pruned; endpoints a1, a4 are never pruned
    up = update_buffer(b, empty, epoch=2, H=3)
    assert _keys(up.buffer) == ["a1", "a4"]
    assert [a.text_key for a in up.pruned] == ["a2", "a3"]
    assert [a.inactive_epochs for a in up.pruned] == [3, 3]


def test_activity_resets_only_adjacent_anchors():
    buf = _buffer("a1", "a2", "a3", "a4", h={"a2": 2, "a3": 2})
    # bucket 1 (between a1 and a2) has one rollout: a2 is adjacent (buckets 1, 2) -> h = 0;
    # a3 (buckets 2, 3) stays inactive: 2 + 1 = 3 >= H = 3 -> pruned
    up = update_buffer(buf, [[], ["m"], [], [], []], epoch=5, H=3)
    assert _keys(up.buffer) == ["a1", "a2", "a4"]
    assert _h(up.buffer) == {"a1": 0, "a2": 0, "a4": 0}
    assert up.added == ()  # one rollout in an internal bucket: no refinement


def test_endpoints_never_pruned_even_with_stale_counters():
    # a1 carries h=9 from when it was internal; as an endpoint it is neither counted nor pruned
    buf = _buffer("a1", "a2", "a3", h={"a1": 9, "a3": 9})
    up = update_buffer(buf, [[], ["m"], [], []], epoch=0, H=3)
    assert _keys(up.buffer) == ["a1", "a2", "a3"]
    assert _h(up.buffer) == {"a1": 9, "a2": 0, "a3": 9}


def test_prune_and_add_merge_in_pre_update_coordinates():
    # K=4; a2 has h=2, so with buckets 1 and 2 empty it reaches 3 = H and is pruned.
    # a3 (buckets 2, 3) is active. Additions: left "l" at 1/2, refinement of bucket 3
    # (r1 r2 r3 -> r2) at 3 + 1/2, right "r" at 4 + 1/2. Kept: a1@1, a3@3, a4@4.
    # Sorted: l(.5) a1(1) a3(3) r2(3.5) a4(4) r(4.5). Applying the refinement after
    # removing a2 (bucket 3 would then be above a4) would misplace r2.
    buf = _buffer("a1", "a2", "a3", "a4", h={"a2": 2})
    up = update_buffer(buf, [["l"], [], [], ["r1", "r2", "r3"], ["r"]], epoch=1, H=3)
    assert _keys(up.buffer) == ["l", "a1", "a3", "r2", "a4", "r"]
    assert [(a.text_key, a.source, a.created_epoch, a.inactive_epochs) for a in up.added] == [
        ("l", "left", 1, 0),
        ("r", "right", 1, 0),
        ("r2", "refine", 1, 0),
    ]
    assert [a.text_key for a in up.pruned] == ["a2"]


def test_pruning_only_when_inactivity_is_observed():
    # h already >= H but inactivity was observed this epoch: lines 10-12 are inside the
    # observation block, so nothing is pruned until the next epoch's observation
    buf = _buffer("a1", "a2", "a3", h={"a2": 3}, observed_epoch=4)
    assert _keys(update_buffer(buf, [[], [], [], []], epoch=4, H=3).buffer) == ["a1", "a2", "a3"]
    assert _keys(update_buffer(buf, [[], [], [], []], epoch=5, H=3).buffer) == ["a1", "a3"]


def test_wrong_bucket_count_is_an_error():
    with pytest.raises(ValueError, match="K\\+1 = 3 buckets for 2 anchors, got 2"):
        update_buffer(_buffer("a1", "a2"), [[], []], epoch=0, H=3)


# ----------------------------------------------------------------- state and stores
def test_buffer_state_round_trip_through_json():
    buf = AnchorBuffer(
        (Anchor("x", "left", 1, 0), Anchor("a", "references", 0, 2), Anchor("b", "refine", 3, 1)),
        created_epoch=0,
        observed_epoch=3,
        left_epoch=1,
        right_epoch=None,
    )
    assert AnchorBuffer.from_state(json.loads(json.dumps(buf.to_state()))) == buf
    with pytest.raises(ValueError, match="Malformed"):
        AnchorBuffer.from_state({"anchors": [["x", "left"]]})
    with pytest.raises(ValueError, match="source must be one of"):
        Anchor("x", "elsewhere", 0)


def test_buffer_table_running_stats():
    table = BufferTable()
    table.set("q1", _buffer("a", "b"))
    table.set("q2", _buffer("a", "b", "c", "d"))
    table.set("q1", update_buffer(_buffer("a", "b"), [["l"], [], []], epoch=0, H=3).buffer)  # replaced: 3 anchors
    stats = table.stats()
    # sizes 3 and 4: mean 3.5, max 4; sources: references 2 + 4 = 6, left 1
    assert stats["buffer/count"] == 2 and stats["buffer/size_mean"] == 3.5 and stats["buffer/size_max"] == 4
    assert stats["buffer/anchors_references"] == 6 and stats["buffer/anchors_left"] == 1
    assert stats["buffer/anchors_right"] == 0


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_anchor_stores_are_content_addressed(kind, tmp_path):
    store = InMemoryAnchorStore() if kind == "memory" else SQLiteAnchorStore(tmp_path / "anchors.sqlite")
    k1 = store.put("hello")
    assert store.put("hello") == k1 and len(store) == 1
    k2 = store.put("world")
    assert store.get(k2) == "world" and len(k1) == 16
    assert store.missing([k1, "0" * 16, k2]) == ["0" * 16]
    with pytest.raises(KeyError, match="not in"):
        store.get("f" * 16)


def test_sqlite_missing_by_lookups_when_few_keys_are_asked(tmp_path, monkeypatch):
    # 5 stored texts, 2 distinct keys asked: 2 * 2 < 5, so the chunked look-up path runs (not the
    # index scan); with chunks of 1 key each chunk is counted on its own: present -> skipped, absent -> listed
    monkeypatch.setattr(anchor_buffer, "_SQL_CHUNK", 1)
    store = SQLiteAnchorStore(tmp_path / "anchors.sqlite")
    keys = [store.put(f"text {i}") for i in range(5)]
    assert store.missing([keys[3], "0" * 16, keys[3]]) == ["0" * 16]
    assert store.missing(["f" * 16, "0" * 16]) == ["0" * 16, "f" * 16]  # sorted, both chunks short
    assert store.missing(keys[:2]) == []


def test_sqlite_put_many_matches_put_and_catches_collisions(tmp_path, monkeypatch):
    store = SQLiteAnchorStore(tmp_path / "anchors.sqlite")
    old = store.put("old")
    keys = store.put_many(iter(["a", "b", "a", "old"]))  # a repeat in the batch, a text stored before
    assert keys == [store.put("a"), store.put("b"), keys[0], old] and len(store) == 3
    assert store.get(keys[1]) == "b"
    # a forced prefix collision (every text gets key c...c): within one batch, then against a stored text
    monkeypatch.setattr(anchor_buffer, "text_id", lambda text: "c" * 16)
    with pytest.raises(ValueError, match="collision"):
        store.put_many(["x", "y"])
    assert store.put_many(["x"]) == ["c" * 16]  # nothing was inserted by the failed batch
    with pytest.raises(ValueError, match="collision"):
        store.put_many(["y"])
    assert store.get("c" * 16) == "x"


def test_sqlite_store_persists_across_connections(tmp_path):
    path = tmp_path / "sub" / "anchors.sqlite"
    store = SQLiteAnchorStore(path)
    key = store.put("an anchor text")
    store.close()
    assert SQLiteAnchorStore(path).get(key) == "an anchor text"
