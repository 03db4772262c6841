"""`SQLiteAnchorStore`: RankBuffer's anchor texts and buffer structures in one SQLite file.

A stdlib `sqlite3` file (e.g. in the trainer's output directory) holds the texts (`anchors` table,
content-addressed as in `rewards.anchor_store`) and RankBuffer's buffer structures (`buffers`
table), so a run's buffers need not fit in memory or in the state file; checkpoints export and merge
them (`rewards.anchor_checkpoint`). Files are marked
(SQLite's application_id and user_version) and checked when opened: a file that is not a store, is
cut short, or is corrupt raises `AnchorStoreError` naming it, not a bare `sqlite3` error.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..judging.seeding import text_id
from .anchor_buffer import StoredBufferTable
from .anchor_checkpoint import BUFFERS_FILE, CHECKPOINT_FOLDER, load_anchor_checkpoint, save_anchor_checkpoint
from .anchor_store import key_collision
from .state_files import durable_replace

# SQLite's default limit on host parameters in one statement is 999 in old builds.
_SQL_CHUNK = 500


class AnchorStoreError(ValueError):
    """An anchor store file is missing, not an SQLite database, corrupt, or holds another schema,
    or SQLite failed on it; the message names the file and what to do."""


# `PRAGMA application_id` ("rkas": RankBuffer anchor store) and `PRAGMA user_version` mark
# the files this module creates; files from before the marker (application_id 0) are accepted
# when their `anchors` table has the right columns, and are marked when opened for writing.
APPLICATION_ID = 0x726B6173
SCHEMA_VERSION = 1
_COLUMNS = [("key", "TEXT", 0, 1), ("text", "TEXT", 1, 0)]  # PRAGMA table_info: name, type, notnull, pk
_CREATE = "CREATE TABLE IF NOT EXISTS anchors (key TEXT PRIMARY KEY, text TEXT NOT NULL)"
# RankBuffer's buffer structures (one JSON row per query), kept beside the texts they refer to so a
# checkpoint of both is one consistent export (`rewards.anchor_buffer.StoredBufferTable`).
_CREATE_BUFFERS = "CREATE TABLE IF NOT EXISTS buffers (query_id TEXT PRIMARY KEY, state TEXT NOT NULL)"
# The store's identity and export watermark (`rewards.anchor_checkpoint`).
_CREATE_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_MARK = (
    f"BEGIN IMMEDIATE; {_CREATE}; PRAGMA application_id = {APPLICATION_ID}; "
    f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
)
_HEADER = b"SQLite format 3\x00"
_FIX = (
    "point anchor_store_path at the run's anchors.sqlite, or resume from a checkpoint that holds its own anchors.sqlite"
)


def _not_a_store(path: str, problem: str) -> AnchorStoreError:
    return AnchorStoreError(f"{path} is not a usable anchor store: {problem}; {_FIX}")


def _database_error(path: str, action: str, error: sqlite3.DatabaseError) -> AnchorStoreError:
    if isinstance(error, sqlite3.OperationalError):  # locked, read-only, disk full, I/O: the file may be intact
        hint = "check that the file is readable and writable, the disk has space, and no other process locks it"
    else:
        hint = f"the file is corrupt or not an anchor store; {_FIX}"
    return AnchorStoreError(f"Anchor store {path}: {action} failed ({type(error).__name__}: {error}); {hint}")


def _check_file(path: str, *, must_exist: bool) -> None:
    """Cheap checks before SQLite opens `path`: the SQLite magic, and (when no journal is pending)
    a length matching the page count in the header, which catches a store cut short by a copy."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        if must_exist:
            raise AnchorStoreError(f"Anchor store {path} does not exist; {_FIX}") from None
        return
    except OSError as e:
        raise AnchorStoreError(
            f"Anchor store {path} cannot be read ({e}); check the path and its permissions"
        ) from None
    if size == 0:
        if must_exist:
            raise _not_a_store(path, "the file is empty")
        return  # SQLite treats an empty file as a new database
    if not head.startswith(_HEADER):
        raise _not_a_store(path, f"it is not an SQLite database (it starts with {head[:16]!r})")
    if len(head) < 100:
        raise _not_a_store(path, f"the file is truncated or corrupt ({size} bytes, shorter than the SQLite header)")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    counted = head[24:28] == head[92:96]  # the header's page count is valid (SQLite >= 3.7.0 wrote it)
    # A WAL or rollback journal left by a crash completes (or undoes) the file when SQLite opens it.
    journal = any(os.path.exists(j) and os.path.getsize(j) > 0 for j in (f"{path}-wal", f"{path}-journal"))
    if counted and size < pages * page_size and not journal:
        raise _not_a_store(
            path, f"the file is truncated ({size} bytes; its header counts {pages} pages of {page_size} bytes)"
        )


def _schema_state(db: sqlite3.Connection, path: str, schema: str, *, allow_new: bool) -> str:
    """Check the store `schema` of `db` (the file `path`): returns "new" (an empty database),
    "unmarked" (a store from before the marker) or "current"; raises `AnchorStoreError` otherwise."""
    app_id = db.execute(f"PRAGMA {schema}.application_id").fetchone()[0]
    version = db.execute(f"PRAGMA {schema}.user_version").fetchone()[0]
    tables = [n for (n,) in db.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'")]
    if app_id not in (0, APPLICATION_ID):
        raise _not_a_store(path, f"it belongs to another application (application_id {app_id:#x}, tables {tables[:8]})")
    if allow_new and app_id == 0 and not tables:
        return "new"
    columns = [(name, kind.upper(), notnull, pk) for _, name, kind, notnull, _, pk in
               db.execute(f"PRAGMA {schema}.table_info(anchors)")]  # fmt: skip
    if columns != _COLUMNS:
        raise _not_a_store(
            path, f"it has no table anchors(key TEXT PRIMARY KEY, text TEXT NOT NULL) (tables: {tables[:8]})"
        )
    if app_id == APPLICATION_ID and version > SCHEMA_VERSION:
        raise AnchorStoreError(
            f"Anchor store {path} was written by a newer version of trl-rankreward (store schema {version}, this "
            f"version reads {SCHEMA_VERSION}); upgrade trl-rankreward to use it"
        )
    return "current" if app_id == APPLICATION_ID else "unmarked"


def _uri(path: str, mode: str) -> str:
    return f"{pathlib.Path(os.path.abspath(path)).as_uri()}?mode={mode}"


class SQLiteAnchorStore:
    """Append-only anchor texts in an SQLite file at `path` (created if absent).

    Every `put` is committed at once, so a crash of the process loses nothing a checkpoint can
    refer to. Commits do not wait for fsync (WAL with synchronous=NORMAL): fsync per put cost
    ~9 ms each, seconds per step at 512 queries (docs/performance.md); after a power loss the
    last commits may be gone, as may the checkpoint files written with them.

    With `read_only=True` the file must exist and is neither changed nor marked.
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False):
        self.path = os.fspath(path)
        if not read_only:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        _check_file(self.path, must_exist=read_only)
        with self._sql("opening the store"):
            self._db = sqlite3.connect(_uri(self.path, "ro" if read_only else "rwc"), uri=True, check_same_thread=False)
            try:
                state = _schema_state(self._db, self.path, "main", allow_new=not read_only)
                if not read_only:
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute("PRAGMA synchronous=NORMAL")
                    if state != "current":
                        self._db.executescript(_MARK)
                    self._db.execute(_CREATE_BUFFERS)
                    with self._db:
                        self._db.execute(_CREATE_META)
                        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('store_id', ?)", (uuid.uuid4().hex,))
            except BaseException:
                self._db.close()
                raise

    @contextlib.contextmanager
    def _attached(self, path: str, alias: str, mode: str) -> Iterator[None]:
        """The store file `path` attached to this connection as `alias` for the block (`mode`: ro/rwc)."""
        self._db.execute(f"ATTACH DATABASE ? AS {alias}", (_uri(path, mode),))
        try:
            yield
        finally:
            self._db.execute(f"DETACH DATABASE {alias}")

    @contextlib.contextmanager
    def _sql(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as e:
            raise _database_error(self.path, action, e) from e

    def put(self, text: str) -> str:
        return self.put_many([text])[0]

    def put_many(self, texts: Iterable[str]) -> list[str]:
        """`put` for many texts in one transaction (bulk loads: ~30x the rate of single puts);
        returns their keys in order. Texts whose key was already stored are read back and
        compared, so a collision raises as in `put`."""
        texts = list(texts)
        keys = [text_id(t) for t in texts]
        new: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if new.setdefault(key, text) != text:
                raise key_collision(key)
        with self._sql("storing a text" if len(texts) == 1 else "storing texts"), self._db:
            inserted = self._db.executemany("INSERT OR IGNORE INTO anchors (key, text) VALUES (?, ?)", new.items())
        if inserted.rowcount != len(new):  # some keys were stored before: their texts must match
            for key, text in new.items():
                if self.get(key) != text:
                    raise key_collision(key)
        return keys

    def get(self, key: str) -> str:
        with self._sql(f"reading anchor {key}"):
            row = self._db.execute("SELECT text FROM anchors WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(f"Anchor key {key!r} is not in the anchor store {self.path}")
        return row[0]

    def missing(self, keys: Iterable[str]) -> list[str]:
        """The keys of `keys` that the store does not hold (sorted, unique).

        When `keys` are a large part of the store (a resumed checkpoint's check: 8 x 10^5 keys),
        one pass over the key index (~1 us a key) beats as many B-tree look-ups (~3 us each,
        sorting included); for a few keys the look-ups run in key order, counting per chunk.
        """
        wanted = set(keys)
        with self._sql("looking up anchor keys"):
            if 2 * len(wanted) >= len(self):
                return sorted(wanted.difference(k for (k,) in self._db.execute("SELECT key FROM anchors")))
            ordered, absent = sorted(wanted), []
            for start in range(0, len(ordered), _SQL_CHUNK):
                chunk = ordered[start : start + _SQL_CHUNK]
                where = f"FROM anchors WHERE key IN ({','.join('?' * len(chunk))})"
                if self._db.execute(f"SELECT COUNT(*) {where}", chunk).fetchone()[0] < len(chunk):
                    found = {k for (k,) in self._db.execute(f"SELECT key {where}", chunk)}
                    absent.extend(k for k in chunk if k not in found)
        return absent

    def __len__(self) -> int:
        with self._sql("counting anchors"):
            return self._db.execute("SELECT COUNT(*) FROM anchors").fetchone()[0]

    # ---- buffer structures (RankBuffer) ---------------------------------------------------------

    def write_buffers(self, rows: Mapping[str, str | None]) -> None:
        """Write buffer structures, `{query_id: JSON text}` (None deletes a row), in one transaction."""
        upserts = [(q, state) for q, state in rows.items() if state is not None]
        deletes = [(q,) for q, state in rows.items() if state is None]
        with self._sql("writing buffers"), self._db:
            self._db.executemany("INSERT OR REPLACE INTO buffers (query_id, state) VALUES (?, ?)", upserts)
            self._db.executemany("DELETE FROM buffers WHERE query_id = ?", deletes)

    def read_buffer(self, query_id: str) -> str | None:
        """The stored structure (JSON text) of `query_id`'s buffer, or None."""
        with self._sql(f"reading the buffer of {query_id!r}"):
            row = self._db.execute("SELECT state FROM buffers WHERE query_id = ?", (query_id,)).fetchone()
        return None if row is None else row[0]

    def buffer_rows(self) -> Iterator[tuple[str, str]]:
        """Every stored `(query_id, JSON text)`, in query_id order."""
        with self._sql("reading buffers"):
            yield from self._db.execute("SELECT query_id, state FROM buffers ORDER BY query_id")

    def buffer_count(self) -> int:
        with self._sql("counting buffers"):
            return self._db.execute("SELECT COUNT(*) FROM buffers").fetchone()[0]

    def clear_buffers(self) -> None:
        """Delete every stored buffer structure (a new run starts without buffers; texts stay)."""
        with self._sql("clearing buffers"), self._db:
            self._db.execute("DELETE FROM buffers")

    # ---- identity and exports (checkpoints: `rewards.anchor_checkpoint`) --------------------------

    def meta(self, key: str, default: str | None = None) -> str | None:
        """A value of the store's `meta` table (`store_id`, export watermarks), or `default`."""
        with self._sql(f"reading {key}"):
            if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                return default
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self._sql(f"writing {key}"), self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def text_watermark(self) -> int:
        """The rowid of the newest text: texts are append-only, so rows up to it never change."""
        with self._sql("reading the text watermark"):
            return self._db.execute("SELECT COALESCE(MAX(rowid), 0) FROM anchors").fetchone()[0]

    def export(self, path: str | os.PathLike, *, texts: tuple[int, int] | None = None, buffers: bool = False,
               meta: Mapping[str, str] | None = None) -> None:  # fmt: skip
        """Write a new store file at `path` (atomically: a temporary file, fsynced and renamed) holding
        the texts with rowid in `(after, upto]` of `texts`, all buffer structures if `buffers`, and `meta`."""
        path = os.fspath(path)
        tmp = f"{path}.tmp"
        for leftover in (tmp, f"{tmp}-journal"):
            if os.path.exists(leftover):
                os.remove(leftover)
        with self._sql(f"exporting to {path}"), self._attached(tmp, "export", "rwc"):
            with self._db:
                for statement in (_CREATE, _CREATE_BUFFERS, _CREATE_META):
                    self._db.execute(statement.replace("IF NOT EXISTS ", "IF NOT EXISTS export."))
                if texts is not None:
                    self._db.execute("INSERT INTO export.anchors SELECT key, text FROM main.anchors "
                                     "WHERE rowid > ? AND rowid <= ?", texts)  # fmt: skip
                if buffers:
                    self._db.execute("INSERT INTO export.buffers SELECT query_id, state FROM main.buffers")
                self._db.executemany("INSERT INTO export.meta VALUES (?, ?)", (meta or {}).items())
            self._db.execute(f"PRAGMA export.application_id = {APPLICATION_ID}")
            self._db.execute(f"PRAGMA export.user_version = {SCHEMA_VERSION}")
        durable_replace(tmp, path)

    def import_buffers(self, path: str | os.PathLike) -> None:
        """Replace this store's buffer structures by those of the store file `path`, in one transaction."""
        path = os.fspath(path)
        _check_file(path, must_exist=True)
        with self._sql(f"importing buffers from {path}"), self._attached(path, "source", "ro"):
            _schema_state(self._db, path, "source", allow_new=False)
            if not self._db.execute("SELECT 1 FROM source.sqlite_master WHERE name = 'buffers'").fetchone():
                raise _not_a_store(path, "it holds no buffers table (a snapshot written before buffers were stored)")
            with self._db:
                self._db.execute("DELETE FROM main.buffers")
                self._db.execute("INSERT INTO main.buffers SELECT query_id, state FROM source.buffers")

    def merge_from(self, path: str | os.PathLike) -> int:
        """Add the texts of the anchor store file `path` (e.g. a checkpoint's text segment) that this
        store lacks, in one transaction; returns how many were added.

        `path` is checked as at opening, plus SQLite's `quick_check` (the file is read whole
        anyway). A key for which `path` holds another text than this store raises
        `AnchorStoreError` and adds nothing (the stores come from different runs, or one of them
        is corrupt).
        """
        path = os.fspath(path)
        _check_file(path, must_exist=True)
        if os.path.exists(self.path) and os.path.samefile(path, self.path):
            return 0
        with self._sql(f"merging {path}"), self._attached(path, "merged", "ro"):
            _schema_state(self._db, path, "merged", allow_new=False)
            damage = [row[0] for row in self._db.execute("PRAGMA merged.quick_check(3)")]
            if damage != ["ok"]:  # ~40 ms at 10^5 texts: cheap next to the merge itself
                raise _not_a_store(path, f"SQLite's quick_check found damage: {damage}")
            with self._db:
                insert = "INSERT OR IGNORE INTO main.anchors SELECT key, text FROM merged.anchors"
                added = self._db.execute(insert).rowcount
                if added < self._db.execute("SELECT COUNT(*) FROM merged.anchors").fetchone()[0]:
                    self._check_merged_texts(path)  # some keys were here before: their texts must match
        return added

    def _check_merged_texts(self, path: str) -> None:
        """Raise if some key of the attached store `merged` holds another text here."""
        clash = self._db.execute(
            "SELECT m.key FROM merged.anchors AS m JOIN main.anchors AS a ON a.key = m.key WHERE a.text != m.text LIMIT 1"
        ).fetchone()
        if clash is not None:
            raise AnchorStoreError(
                f"Anchor key {clash[0]} holds one text in {path} and another in {self.path} (a key collision): the "
                "stores belong to different runs or one is corrupt; nothing was merged. Merge only snapshots of "
                "this run's store"
            )

    def close(self) -> None:
        self._db.close()

    def buffer_table(self, totals: dict[str, Any] | None = None) -> StoredBufferTable:
        """The buffer structures live in this file: a new table clears what an earlier run left; a
        state's table is checked against its totals (another checkpoint's store raises)."""
        if totals is None:
            return StoredBufferTable(self, clear=True)
        found = self.buffer_count()
        if found != totals["count"]:
            raise ValueError(
                f"The anchor store {self.path} holds {found} buffers, but the RankBuffer state counts "
                f"{totals['count']}: they are not from the same checkpoint. Resume from the checkpoint folder "
                "(its anchors/ folder and reward_method_state.json belong together)"
            )
        return StoredBufferTable(self, totals)

    def save_checkpoint(self, directory: str) -> None:
        """`directory/anchors/`: text segments and a snapshot of the buffer structures (`anchor_checkpoint`)."""
        save_anchor_checkpoint(self, directory)

    def load_checkpoint(self, directory: str, *, buffers: bool) -> None:
        """The checkpoint's texts and, with `buffers`, its buffer structures, when it has an `anchors/` folder."""
        if os.path.isdir(os.path.join(directory, CHECKPOINT_FOLDER)):
            load_anchor_checkpoint(self, directory, buffers=buffers)


def checkpoint_buffer_rows(checkpoint: str) -> Iterator[tuple[str, str]]:
    """`(query_id, JSON text)` of every buffer saved in `checkpoint`'s `anchors/` folder (for reports)."""
    snapshot = SQLiteAnchorStore(os.path.join(checkpoint, CHECKPOINT_FOLDER, BUFFERS_FILE), read_only=True)
    try:
        yield from snapshot.buffer_rows()
    finally:
        snapshot.close()
