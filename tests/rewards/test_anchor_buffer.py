"""The anchor buffers, hand-computed: Select_K0 and Algorithm 2 (RankBuffer paper, Appendix A and H);
`QueryBuffers` (RankBuffer's state over an anchor store) and `RankBufferOptions`' store; `SQLiteAnchorStore`
files (the schema marker, errors that name the file for foreign, cut-short and corrupt stores, atomic
exports: a real kill -9 never leaves a partial one, and merges); the store in checkpoints (new texts
exported once, linked into every checkpoint; a checkpoint folder resumes alone; resuming in place
reads no text).

Anchors are named by their text key; `buckets[p]` is sigma_p (p = 0..K), worst -> best.
"""

import asyncio
import json
import os
import random
import shutil
import sqlite3

import pytest

from tests.rewards.test_state_files import kill_repeatedly
from trl_rankreward.judging.quality_judge import select_endpoints
from trl_rankreward.judging.requests import text_id
from trl_rankreward.rewards import anchor_buffer
from trl_rankreward.rewards.anchor_buffer import (
    APPLICATION_ID,
    CHECKPOINT_FOLDER,
    SCHEMA_VERSION,
    Anchor,
    AnchorBuffer,
    AnchorStoreError,
    BufferTable,
    InMemoryAnchorStore,
    QueryBuffers,
    SQLiteAnchorStore,
    StoredBufferTable,
    update_buffer,
)
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.options import DataNeeds
from trl_rankreward.rewards.rank_buffer import RankBufferOptions, RankBufferReward
from trl_rankreward.rewards.state_files import CheckpointStateError
from trl_rankreward.testing import OracleJudge


def _buffer(*keys, h=None, epoch=0, **markers):
    """Buffer of reference anchors `keys`; `h` maps key -> inactivity counter."""
    h = h or {}
    return AnchorBuffer(
        tuple(Anchor(k, "references", epoch, h.get(k, 0)) for k in keys), created_epoch=epoch, **markers
    )


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


# ----------------------------------------------------------------- QueryBuffers and the options
def _filled(store):
    buffers = QueryBuffers(store)
    keys = [store.put(t) for t in ("worst", "best")]
    buffers.set("q", AnchorBuffer.initial(keys, "references", 0))
    buffers.set_pending("q", 0, [[store.put("rollout")]])
    return buffers, keys


def test_memory_state_holds_buffers_and_referenced_texts_and_loads_back():
    buffers, keys = _filled(InMemoryAnchorStore())
    state = buffers.state()
    assert sorted(state) == ["buffers", "pending", "texts"]
    assert sorted(state["texts"].values()) == ["best", "rollout", "worst"]  # anchors and the look-ahead group
    again = QueryBuffers(InMemoryAnchorStore())  # an empty store: the texts come with the state
    again.load(state)
    assert again.get("q").keys == keys and again.pending("q") == state["pending"]["q"]


def test_sqlite_state_holds_totals_only_and_needs_the_same_store(tmp_path):
    store = SQLiteAnchorStore(tmp_path / "a.sqlite")
    buffers, _ = _filled(store)
    state = buffers.state()
    assert sorted(state) == ["buffers_stored", "pending"] and state["buffers_stored"]["count"] == 1
    again = QueryBuffers(SQLiteAnchorStore(tmp_path / "a.sqlite"))  # a new table clears the file's buffers...
    with pytest.raises(ValueError, match="holds 0 buffers, but the RankBuffer state counts 1"):
        again.load(state)  # ...so they no longer match the state's totals
    with pytest.raises(ValueError, match="keeps its buffers in an SQLite anchor store"):
        QueryBuffers(InMemoryAnchorStore()).load(state)


def test_frozen_undoes_buffers_and_pending_of_touched_queries_only():
    buffers, keys = _filled(InMemoryAnchorStore())
    before = buffers.state()
    with buffers.frozen():
        buffers.set("q", AnchorBuffer.initial(keys[:1], "references", 1))
        buffers.set("new", AnchorBuffer.initial(keys, "bootstrap", 1))
        buffers.set_pending("q", 1, [])
        with pytest.raises(RuntimeError, match="inside frozen_state"):
            buffers.load(before)
    assert buffers.state() == before and buffers.get("new") is None


def test_each_store_gives_its_own_table(tmp_path):
    assert isinstance(QueryBuffers(SQLiteAnchorStore(tmp_path / "s.sqlite")).table, StoredBufferTable)
    assert not isinstance(QueryBuffers(InMemoryAnchorStore()).table, StoredBufferTable)


def test_options_are_one_dataclass_given_whole_or_as_keywords():
    options = RankBufferOptions(k0=2, buffer_init="bootstrap")
    assert RankBufferReward(OracleJudge({}), options).options is options
    assert RankBufferReward(OracleJudge({}), k0=2, buffer_init="bootstrap").options == options
    assert options.data_needs() == DataNeeds(references=0) and RankBufferOptions().data_needs().references == 0
    assert RankBufferOptions(buffer_init="references").data_needs().references == 1
    with pytest.raises(TypeError, match="not both"):
        RankBufferReward(OracleJudge({}), options, k0=2)
    with pytest.raises(ValueError, match=r"sets \['init'\].*options are: .*buffer_init"):
        RankBufferReward(OracleJudge({}), init="bootstrap")
    with pytest.raises(ValueError, match="anchor_store_path.*anchor_store='memory'"):
        RankBufferOptions(anchor_store="memory", anchor_store_path="a.sqlite")


def test_the_options_name_the_store(tmp_path):
    # sqlite with a path opens that file; without one (no trainer to supply {output_dir}) texts stay in memory.
    on_disk = RankBufferReward(OracleJudge({}), anchor_store_path=str(tmp_path / "s.sqlite")).store
    assert isinstance(on_disk, SQLiteAnchorStore) and (tmp_path / "s.sqlite").exists()
    assert isinstance(RankBufferReward(OracleJudge({})).store, InMemoryAnchorStore)
    store = InMemoryAnchorStore()
    assert RankBufferReward(OracleJudge({}), store=store).store is store


# ----------------------------------------------------------------- SQLite store files
def _texts(n: int, length: int = 500) -> list[str]:
    rng = random.Random(n)
    return [f"{i} " + "".join(rng.choices("abcdefgh ", k=length)) for i in range(n)]


def _store(path, texts) -> SQLiteAnchorStore:
    store = SQLiteAnchorStore(path)
    store.put_many(texts)
    return store


def _marker(path) -> tuple[int, int]:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA application_id").fetchone()[0], db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def _sqlite_file(path, *statements: str) -> None:
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def test_new_stores_are_marked_and_unmarked_ones_stay_readable(tmp_path):
    SQLiteAnchorStore(tmp_path / "new.sqlite").close()
    assert _marker(tmp_path / "new.sqlite") == (APPLICATION_ID, SCHEMA_VERSION)
    old = tmp_path / "old.sqlite"  # as written before the marker existed
    _sqlite_file(
        old,
        "CREATE TABLE anchors (key TEXT PRIMARY KEY, text TEXT NOT NULL)",
        f"INSERT INTO anchors VALUES ('{text_id('hello')}', 'hello')",
    )
    reader = SQLiteAnchorStore(old, read_only=True)
    assert reader.get(text_id("hello")) == "hello" and _marker(old) == (0, 0)  # read-only: not marked
    reader.close()
    SQLiteAnchorStore(old).close()
    assert _marker(old) == (APPLICATION_ID, SCHEMA_VERSION)


def test_files_that_are_not_stores_raise_naming_the_path(tmp_path):
    noise = tmp_path / "noise.sqlite"
    noise.write_bytes(random.Random(0).randbytes(5000))
    with pytest.raises(AnchorStoreError, match="noise.sqlite is not a usable anchor store: it is not an SQLite"):
        SQLiteAnchorStore(noise)
    with pytest.raises(AnchorStoreError, match="point anchor_store_path at the run's anchors.sqlite"):
        SQLiteAnchorStore(noise)
    with pytest.raises(AnchorStoreError, match="absent.sqlite does not exist"):
        SQLiteAnchorStore(tmp_path / "absent.sqlite", read_only=True)
    other = tmp_path / "other.sqlite"
    _sqlite_file(other, "CREATE TABLE results (x INTEGER)")
    with pytest.raises(AnchorStoreError, match=r"other.sqlite .*no table anchors\(key.*tables: \['results'\]"):
        SQLiteAnchorStore(other)
    _sqlite_file(other, "CREATE TABLE anchors (key TEXT, text TEXT)")  # the name without the columns
    with pytest.raises(AnchorStoreError, match="no table anchors"):
        SQLiteAnchorStore(other)
    _sqlite_file(tmp_path / "app.sqlite", "PRAGMA application_id = 7")
    with pytest.raises(AnchorStoreError, match=r"another application \(application_id 0x7"):
        SQLiteAnchorStore(tmp_path / "app.sqlite")


def test_newer_store_schema_raises(tmp_path):
    path = tmp_path / "anchors.sqlite"
    SQLiteAnchorStore(path).close()
    _sqlite_file(path, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(AnchorStoreError, match=f"newer version.*store schema {SCHEMA_VERSION + 1}"):
        SQLiteAnchorStore(path)


def test_store_cut_short_raises_at_open(tmp_path):
    path = tmp_path / "anchors.sqlite"
    _store(path, _texts(300)).close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(AnchorStoreError, match=r"anchors.sqlite is not a usable anchor store: the file is truncated"):
        SQLiteAnchorStore(path)
    path.write_bytes(data[:60])  # inside the 100-byte header
    with pytest.raises(AnchorStoreError, match="truncated or corrupt"):
        SQLiteAnchorStore(path)


def test_damage_found_after_opening_raises_naming_the_path(tmp_path):
    path = tmp_path / "anchors.sqlite"
    texts = _texts(300)
    _store(path, texts).close()
    data = bytearray(path.read_bytes())
    data[8192:-4096] = random.Random(0).randbytes(len(data) - 8192 - 4096)  # pages 3.. but the last: noise
    path.write_bytes(bytes(data))
    store = SQLiteAnchorStore(path, read_only=True)  # the header, length and schema page are intact
    with pytest.raises(AnchorStoreError, match=r"anchors.sqlite: counting anchors failed \(DatabaseError.*corrupt"):
        len(store)
    with pytest.raises(AnchorStoreError, match="anchors.sqlite: .* failed"):
        store.missing([text_id(t) for t in texts])


def test_read_only_store_refuses_writes(tmp_path):
    path = tmp_path / "anchors.sqlite"
    _store(path, ["a"]).close()
    store = SQLiteAnchorStore(path, read_only=True)
    with pytest.raises(AnchorStoreError, match="storing a text failed.*readonly"):
        store.put("b")
    assert len(store) == 1


def test_export_and_merge_round_trip(tmp_path):
    texts = _texts(200)
    source = _store(tmp_path / "run" / "anchors.sqlite", texts[:150])  # open: recent puts are still in its WAL
    snap = tmp_path / "checkpoint-1" / "anchors.sqlite"
    snap.parent.mkdir()
    source.export(snap, texts=(0, source.text_watermark()))
    source.put_many(texts[150:])
    source.export(snap, texts=(0, source.text_watermark()))  # replaces the older export
    assert sorted(p.name for p in snap.parent.iterdir()) == ["anchors.sqlite"]  # no WAL, journal or .tmp beside it
    fresh = SQLiteAnchorStore(tmp_path / "fresh.sqlite")
    assert fresh.merge_from(snap) == 200 and len(fresh) == 200
    assert all(fresh.get(text_id(t)) == t for t in texts)
    assert fresh.merge_from(snap) == 0
    half = _store(tmp_path / "half.sqlite", texts[::2] + ["only here"])
    assert half.merge_from(snap) == 100 and len(half) == 201
    assert half.merge_from(tmp_path / "half.sqlite") == 0  # itself
    reader = SQLiteAnchorStore(snap, read_only=True)
    assert reader.missing([text_id(t) for t in texts]) == []


def test_merge_with_a_key_collision_adds_nothing(tmp_path):
    mine = _store(tmp_path / "mine.sqlite", ["a", "b"])
    theirs = tmp_path / "theirs.sqlite"
    _store(theirs, ["c"]).close()
    _sqlite_file(theirs, f"INSERT INTO anchors VALUES ('{text_id('a')}', 'not a')")
    with pytest.raises(AnchorStoreError, match=f"key {text_id('a')} holds one text in .*theirs.sqlite.*collision"):
        mine.merge_from(theirs)
    assert len(mine) == 2  # "c" was not added either
    mine.put("d")  # the store is usable after the failed merge
    assert len(mine) == 3


def test_merge_checks_the_source(tmp_path):
    mine = SQLiteAnchorStore(tmp_path / "mine.sqlite")
    (tmp_path / "noise").write_bytes(b"not a database at all" * 10)
    with pytest.raises(AnchorStoreError, match="noise is not a usable anchor store"):
        mine.merge_from(tmp_path / "noise")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(AnchorStoreError, match="empty is not a usable anchor store: the file is empty"):
        mine.merge_from(tmp_path / "empty")
    with pytest.raises(AnchorStoreError, match="absent.sqlite does not exist"):
        mine.merge_from(tmp_path / "absent.sqlite")
    _sqlite_file(tmp_path / "other.sqlite", "CREATE TABLE results (x INTEGER)")
    with pytest.raises(AnchorStoreError, match="no table anchors"):
        mine.merge_from(tmp_path / "other.sqlite")
    assert mine.put("x") and len(mine) == 1  # the failed merges left it attached to nothing


# A child process exports a store to one path in a loop; after its first export it prints how long it took.
_SNAPSHOTTER = """
import sys, time
from trl_rankreward.rewards.anchor_buffer import SQLiteAnchorStore
store, path = SQLiteAnchorStore(sys.argv[1]), sys.argv[2]
i, start = 0, time.perf_counter()
while True:
    store.export(path, texts=(0, store.text_watermark()), buffers=True)
    if i == 0:
        print(time.perf_counter() - start, flush=True)
    i += 1
"""


def test_export_survives_kill_9(tmp_path):
    n = 30_000  # ~18 MB of texts
    _store(tmp_path / "anchors.sqlite", _texts(n)).close()
    snap = tmp_path / "checkpoint" / "anchors.sqlite"
    snap.parent.mkdir()

    def check():
        copy = SQLiteAnchorStore(snap, read_only=True)  # raises on a partial file
        assert len(copy) == n and copy._db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        copy.close()

    kill_repeatedly(_SNAPSHOTTER, [str(tmp_path / "anchors.sqlite"), str(snap)], check)


# ----------------------------------------------------------------- checkpoints
REFS = [f"ref {i}" for i in range(1, 8)]  # best first
QUALITY = {f"ref {i}": 8.0 - i for i in range(1, 8)}


def method(path):
    return RankBufferReward(OracleJudge(QUALITY), k0=4, store=SQLiteAnchorStore(path))


def train(m, epoch, queries=("q0", "q1", "q2")):
    groups = []
    for q in queries:
        answers = [f"{q} answer {epoch}.{j}" for j in range(4)]
        QUALITY.update({a: 0.5 + 2.0 * j for j, a in enumerate(answers)})  # spread over the buffer
        groups.append(Group(q, f"Question {q}?", [], answers, references=REFS))
    asyncio.run(m.score(groups, epoch=epoch, step=epoch))


def segments(checkpoint):
    return sorted(n for n in os.listdir(checkpoint / CHECKPOINT_FOLDER) if n.startswith("texts-"))


def test_each_save_exports_only_new_texts_and_links_them(tmp_path):
    m = method(tmp_path / "anchors.sqlite")
    train(m, 0)
    first = tmp_path / "checkpoint-1"
    first.mkdir()
    m.save_state(str(first))
    train(m, 1)
    second = tmp_path / "checkpoint-2"
    second.mkdir()
    m.save_state(str(second))
    # texts 1..n1 went into the first segment, texts n1+1..n2 into the second: nothing twice
    assert len(segments(first)) == 1 and segments(second)[0] == segments(first)[0] and len(segments(second)) == 2
    rows = [len(SQLiteAnchorStore(second / CHECKPOINT_FOLDER / s, read_only=True)) for s in segments(second)]
    assert sum(rows) == len(m.store)
    # the checkpoints hold links to the same immutable segment, not copies
    name = segments(first)[0]
    assert (
        os.stat(first / CHECKPOINT_FOLDER / name).st_ino == os.stat(tmp_path / "anchors.sqlite.segments" / name).st_ino
    )


def test_a_checkpoint_folder_resumes_alone(tmp_path):
    m = method(tmp_path / "run" / "anchors.sqlite")
    train(m, 0)
    train(m, 1)
    checkpoint = tmp_path / "run" / "checkpoint-2"
    checkpoint.mkdir()
    m.save_state(str(checkpoint))
    moved = tmp_path / "elsewhere" / "checkpoint-2"
    shutil.copytree(checkpoint, moved)
    shutil.rmtree(tmp_path / "run")  # the live store and its segments are gone
    resumed = method(tmp_path / "new" / "anchors.sqlite")
    resumed.load_state(str(moved))
    assert resumed.export_buffers() == m.export_buffers() and resumed.state_dict() == m.state_dict()
    assert [a.text for a in resumed.anchors("q0")] == [a.text for a in m.anchors("q0")]


def test_resuming_in_place_reads_no_text_and_restores_the_checkpoints_buffers(tmp_path, monkeypatch):
    m = method(tmp_path / "anchors.sqlite")
    train(m, 0)
    checkpoint = tmp_path / "checkpoint-1"
    checkpoint.mkdir()
    m.save_state(str(checkpoint))
    saved = m.export_buffers()
    train(m, 1)  # the run went on after the checkpoint (then crashed, say)
    assert m.export_buffers() != saved
    resumed = method(tmp_path / "anchors.sqlite")  # the same store, as a restarted trainer opens it
    merged = []
    monkeypatch.setattr(SQLiteAnchorStore, "merge_from", lambda self, path, **kw: merged.append(path))
    resumed.load_state(str(checkpoint))
    assert merged == [] and resumed.export_buffers() == saved


# ---- resume checks what it restores: a bad buffer row or entry is refused, naming file and query ---------


def _saved_checkpoint(tmp_path, store=None):
    m = RankBufferReward(OracleJudge(QUALITY), k0=4, store=store if store is not None else SQLiteAnchorStore(tmp_path / "anchors.sqlite"))
    train(m, 0)
    checkpoint = tmp_path / "checkpoint-1"
    checkpoint.mkdir()
    m.save_state(str(checkpoint))
    return m, checkpoint


def _set_row(snapshot, query_id, edit):
    with sqlite3.connect(snapshot) as db:
        (state,) = db.execute("SELECT state FROM buffers WHERE query_id = ?", (query_id,)).fetchone()
        db.execute("UPDATE buffers SET state = ? WHERE query_id = ?", (edit(state), query_id))
    db.close()


def _with(**fields):
    return lambda state: json.dumps({**json.loads(state), **fields})


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda state: state[: len(state) // 2], "not valid JSON"),  # a row cut short
        (_with(extra=1), r"unknown field\(s\) \['extra'\]"),
        (_with(created_epoch="0"), "'created_epoch' should be an integer, got '0'"),
        (_with(anchors=[["0123456789abcdef", "left", 0, 0]]), "anchor key 0123456789abcdef, whose text is in neither"),
    ],
    ids=["cut_json", "unknown_field", "wrong_type", "unknown_anchor_key"],
)
def test_a_bad_buffer_row_is_refused_at_resume_and_nothing_copied(tmp_path, edit, problem):
    _, checkpoint = _saved_checkpoint(tmp_path)
    snapshot = checkpoint / CHECKPOINT_FOLDER / "buffers.sqlite"
    _set_row(snapshot, "q1", edit)
    resumed = method(tmp_path / "anchors.sqlite")  # the live store, as a restarted trainer opens it
    with pytest.raises(CheckpointStateError, match=f"{snapshot}, the entry of query 'q1' is corrupt: .*{problem}") as e:
        resumed.load_state(str(checkpoint))
    assert e.value.path == str(snapshot) and e.value.query == "q1"
    assert resumed.store.buffer_count() == 0  # no row of the snapshot reached the live store


def test_a_bad_entry_of_an_in_memory_state_file_names_the_file_and_query(tmp_path):
    m, checkpoint = _saved_checkpoint(tmp_path, InMemoryAnchorStore())
    path = checkpoint / "reward_method_state.json"
    saved = json.loads(path.read_text())
    for entry, query, problem in (
        ({"buffers": {**saved["state"]["buffers"], "q2": {"anchors": "x"}}}, "q2", "Malformed RankBuffer"),
        ({"pending": {"q0": {"epoch": 1}}}, "q0", "its look-ahead group is malformed"),
    ):
        path.write_text(json.dumps({**saved, "state": {**saved["state"], **entry}}))
        fresh = RankBufferReward(OracleJudge(QUALITY), k0=4)
        with pytest.raises(CheckpointStateError, match=f"{path}, the entry of query '{query}' is corrupt: {problem}"):
            fresh.load_state(str(checkpoint))
        assert fresh.export_buffers() == {}  # nothing restored
    path.write_text(json.dumps(saved))
    fresh.load_state(str(checkpoint))
    assert fresh.export_buffers() == m.export_buffers()


def test_buffer_state_refuses_unknown_fields_and_wrong_types():
    state = _buffer("a", "b").to_state()
    assert AnchorBuffer.from_state(state) == _buffer("a", "b")
    for bad in ({**state, "extra": 1}, {**state, "left_epoch": 1.5}, {**state, "anchors": [[1, "left", 0, 0]]}, []):
        with pytest.raises(ValueError, match="Malformed RankBuffer buffer state"):
            AnchorBuffer.from_state(bad)


def test_a_checkpoint_saved_again_in_place_carries_no_write_debris(tmp_path):
    m, checkpoint = _saved_checkpoint(tmp_path)
    # a save of checkpoint-1 killed mid-way left its temporary files; the run resumed and saves it again
    debris = ["texts-000000000001-000000000099.sqlite.tmp", "buffers.sqlite.tmp", "buffers.sqlite.tmp-journal"]
    for name in debris:
        (checkpoint / CHECKPOINT_FOLDER / name).write_bytes(b"partial")
    m.save_state(str(checkpoint))
    assert not [n for n in os.listdir(checkpoint / CHECKPOINT_FOLDER) if ".tmp" in n]
