"""SQLiteAnchorStore files: the schema marker, errors that name the file for foreign, cut-short
and corrupt stores, atomic exports (a real kill -9 never leaves a partial one) and merges."""

import random
import sqlite3

import pytest

from tests.rewards.test_state_files import kill_repeatedly
from trl_rankreward.judging.seeding import text_id
from trl_rankreward.rewards.anchor_buffer import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    AnchorStoreError,
    SQLiteAnchorStore,
)


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
