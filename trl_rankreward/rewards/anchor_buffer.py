"""RankBuffer's per-query anchor buffers, their maintenance (Algorithm 2), and where they are kept.

- `AnchorBuffer`: one query's anchors worst -> best, as keys into an anchor store, with Algorithm 2's
  epoch markers; `update_buffer`: Algorithm 2 (RankBuffer paper, Appendix A), a pure function.
- `BufferTable` (in memory) and `StoredBufferTable` (in the SQLite store): every query's buffer, with
  running totals so step metrics never scan 10^5 buffers; `QueryBuffers`: a table plus the look-ahead
  groups, the undo of `frozen()`, and the JSON part of the method's state file.
- Anchor stores: append-only texts by key (`text_id`, 16 hex digits of SHA-256), so a key in any old
  checkpoint stays valid; two texts under one key raise. `InMemoryAnchorStore` keeps texts and buffers in
  the state file; `SQLiteAnchorStore` keeps both in one SQLite file, for runs that outgrow memory.

A checkpoint of the SQLite store gets an `anchors/` folder: the texts as immutable segments
`texts-<first>-<last>.sqlite` (each save exports only the rows added since the last one into
`<store>.segments/`; checkpoints hold hard links to them, copies where the filesystem cannot link) and
`buffers.sqlite`, every buffer structure with the store's identity and text watermark. A resume replaces
the buffer structures, after checking every saved row (`check_buffer_state`, its keys in the store), and
merges the segments only when the live store does not already hold them.

Indexing: `buckets[p]` is sigma_p of the paper for p = 0..K (0 = below the worst anchor), each worst ->
best. Anchors are 1-based in the paper (a_1..a_K) and 0-based in `AnchorBuffer.anchors`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .._gc import paused_gc
from ..judging.requests import text_id
from .state_files import corrupt_entry, durable_replace, remove_write_debris

#: where an anchor came from: the query's ranked references, bootstrap ranking, left / right boundary
#: expansion, interval refinement (Sec. 3.5), or the LLM buffer manager (Appendix G)
SOURCES: tuple[str, ...] = ("references", "bootstrap", "left", "right", "refine", "llm")


@dataclass(frozen=True, slots=True)
class Anchor:
    """One anchor: its text's key, `source` (one of `SOURCES`), creation epoch, inactivity counter h (Eq. 14)."""

    text_key: str
    source: str
    created_epoch: int
    inactive_epochs: int = 0

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"Anchor source must be one of {SOURCES}, got {self.source!r}")


@dataclass(frozen=True)
class AnchorBuffer:
    """One query's anchors worst -> best, with Algorithm 2's epoch markers: the last epoch inactivity was
    observed / the left / the right boundary was expanded (None: never)."""

    anchors: tuple[Anchor, ...]
    created_epoch: int
    observed_epoch: int | None = None
    left_epoch: int | None = None
    right_epoch: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "anchors", tuple(self.anchors))
        if not self.anchors:
            raise ValueError("An AnchorBuffer needs at least one anchor")

    @property
    def size(self) -> int:
        return len(self.anchors)

    @property
    def keys(self) -> list[str]:
        return [a.text_key for a in self.anchors]

    @classmethod
    def initial(cls, keys: Sequence[str], source: str, epoch: int) -> AnchorBuffer:
        """A fresh buffer (Algorithm 1, lines 6-7 / 11-12): counters 0, no epoch marked."""
        return cls(tuple(Anchor(k, source, epoch) for k in keys), created_epoch=epoch)

    def to_state(self) -> dict[str, Any]:
        """Plain JSON-able form; anchors as compact `[key, source, created_epoch, h]` rows."""
        rows = [[a.text_key, a.source, a.created_epoch, a.inactive_epochs] for a in self.anchors]
        return {"anchors": rows, **{name: getattr(self, name) for name in ("created_epoch", *_MARKERS)}}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> AnchorBuffer:
        """The buffer `to_state()` gave; `ValueError` for anything else (`check_buffer_state`)."""
        try:
            check_buffer_state(state)
        except (KeyError, TypeError) as exc:
            raise ValueError(
                f"Malformed RankBuffer buffer state ({_reason(exc)}); expected the output of AnchorBuffer.to_state()"
            ) from None
        markers = {name: state.get(name) for name in _MARKERS}
        return cls(tuple(Anchor(*row) for row in state["anchors"]), state["created_epoch"], **markers)


_MARKERS = ("observed_epoch", "left_epoch", "right_epoch")
_BUFFER_FIELDS = frozenset({"anchors", "created_epoch", *_MARKERS})


def check_buffer_state(state: Any) -> list[str]:
    """The anchor keys of `state` when it is what `AnchorBuffer.to_state()` gives: an object with the fields
    `anchors` (a non-empty list of `[key, source, created_epoch, h]`) and `created_epoch`, and the optional
    epoch markers; integers where integers go (a bool is none). Else `KeyError` (a field missing or unknown)
    or `TypeError` (a value of the wrong kind). The one definition of a saved buffer, checked without
    building it, so checking a checkpoint's rows costs little more than parsing them."""
    if type(state) is not dict:
        raise TypeError(f"a JSON object was expected, got {state!r:.60}")
    if not state.keys() <= _BUFFER_FIELDS:
        raise KeyError(f"unknown field(s) {sorted(set(state) - _BUFFER_FIELDS)}")
    anchors = state["anchors"]
    if type(anchors) is not list or not anchors:
        raise TypeError(f"'anchors' should be a non-empty list, got {anchors!r:.60}")
    keys = []
    for row in anchors:
        if not (type(row) is list and len(row) == 4 and type(row[0]) is str and row[1] in SOURCES
                and type(row[2]) is int and type(row[3]) is int):  # fmt: skip
            raise TypeError(f"anchor {row!r:.80} is not [key, source in {SOURCES}, created_epoch, h]")
        keys.append(row[0])
    for name in ("created_epoch", *_MARKERS):
        value = state[name] if name == "created_epoch" else state.get(name)
        if type(value) is not int and not (value is None and name != "created_epoch"):
            raise TypeError(f"{name!r} should be an integer{'' if name == 'created_epoch' else ' or null'}, "
                            f"got {value!r:.60}")  # fmt: skip
    return keys


@contextlib.contextmanager
def checked_entry(path: str, query_id: str) -> Iterator[None]:
    """Within the block, a bad buffer entry of `query_id` in the checkpoint file `path` (JSON that does not
    parse, `check_buffer_state`'s errors, `AnchorBuffer.from_state`'s) raises `CheckpointStateError` naming both."""
    try:
        yield
    except json.JSONDecodeError as e:
        raise corrupt_entry(path, f"not valid JSON ({e})", query=query_id) from None
    except (KeyError, TypeError, ValueError) as e:
        raise corrupt_entry(path, _reason(e), query=query_id) from None


def _reason(exc: Exception) -> str:
    """The message of `exc` (a `KeyError`'s without the quotes its `str` adds)."""
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


@dataclass(frozen=True)
class BufferUpdate:
    """What one `update_buffer` call did: the new buffer, added anchors, pruned anchors."""

    buffer: AnchorBuffer
    added: tuple[Anchor, ...] = ()
    pruned: tuple[Anchor, ...] = ()


def update_buffer(buffer: AnchorBuffer, buckets: Sequence[Sequence[str]], epoch: int, H: int) -> BufferUpdate:
    """Algorithm 2 (Appendix A): inactivity pruning, boundary expansion, interval refinement over the text
    keys of `buckets[p]` (p = 0..K). Merged in pre-update coordinates (a_k at k, a new left anchor at 1/2,
    right at K + 1/2, a refinement of bucket p at p + 1/2), so a removal never shifts where a new one goes."""
    K = buffer.size
    if len(buckets) != K + 1:
        raise ValueError(f"update_buffer needs K+1 = {K + 1} buckets for {K} anchors, got {len(buckets)}")
    anchors = list(buffer.anchors)
    pruned_idx: set[int] = set()
    observed = buffer.observed_epoch
    if observed != epoch:  # lines 3-15: inactivity is observed once per query per epoch
        for k in range(2, K):  # internal anchors a_2..a_{K-1} (1-based); a_k is anchors[k-1]
            active = len(buckets[k - 1]) + len(buckets[k]) > 0
            a = anchors[k - 1]
            anchors[k - 1] = replace(a, inactive_epochs=0 if active else a.inactive_epochs + 1)
            if anchors[k - 1].inactive_epochs >= H:
                pruned_idx.add(k)
        observed = epoch

    # Temporary coordinates doubled to stay integral: a_k at 2k, a new anchor at 2p + 1.
    merged = [(2 * k, a) for k, a in enumerate(anchors, start=1) if k not in pruned_idx]
    added: list[tuple[int, Anchor]] = []
    left, right = buffer.left_epoch, buffer.right_epoch
    if buckets[0] and left != epoch:  # lines 17-20: worst rollout below the buffer
        added.append((1, Anchor(buckets[0][0], "left", epoch)))
        left = epoch
    if buckets[K] and right != epoch:  # lines 21-24: best rollout above the buffer
        added.append((2 * K + 1, Anchor(buckets[K][-1], "right", epoch)))
        right = epoch
    for p in range(1, K):  # lines 25-30: one-based lower median sigma_p[ceil(n/2)]
        n = len(buckets[p])
        if n >= 3:
            added.append((2 * p + 1, Anchor(buckets[p][(n + 1) // 2 - 1], "refine", epoch)))

    kept = tuple(a for _, a in sorted(merged + added, key=lambda item: item[0]))
    new = replace(buffer, anchors=kept, observed_epoch=observed, left_epoch=left, right_epoch=right)
    return BufferUpdate(new, tuple(a for _, a in added), tuple(anchors[k - 1] for k in sorted(pruned_idx)))


class BufferTable:
    """All query buffers, with running totals so step metrics never scan 10^5 buffers."""

    def __init__(self):
        self._buffers: dict[str, AnchorBuffer] = {}
        self._sizes: Counter[int] = Counter()
        self._sources: Counter[str] = Counter()

    def get(self, query_id: str) -> AnchorBuffer | None:
        return self._buffers.get(query_id)

    def set(self, query_id: str, buffer: AnchorBuffer | None) -> None:
        """The one write path (None forgets the buffer): the totals lose the old buffer and gain the new one."""
        for b, sign in ((self.get(query_id), -1), (buffer, +1)):
            if b is not None:
                self._sizes[b.size] += sign
                for a in b.anchors:
                    self._sources[a.source] += sign
        self._write(query_id, buffer)

    def _write(self, query_id: str, buffer: AnchorBuffer | None) -> None:
        if buffer is None:
            self._buffers.pop(query_id, None)
        else:
            self._buffers[query_id] = buffer

    def items(self):
        return self._buffers.items()

    def flush(self) -> None:
        """Nothing to write: the buffers live in memory."""

    def state(self) -> dict[str, Any]:
        """The state file's part: every buffer structure (`buffers`), so the file resumes on its own."""
        return {"buffers": {qid: b.to_state() for qid, b in self._buffers.items()}}

    def __len__(self) -> int:
        return sum(self._sizes.values())  # every buffer counts once, under its size

    def stats(self) -> dict[str, float]:
        """`buffer/count`, `buffer/size_mean`, `buffer/size_max`, `buffer/anchors_<source>`."""
        n = len(self)
        sizes = [s for s, c in self._sizes.items() if c > 0]
        return {
            "buffer/count": float(n),
            "buffer/size_mean": sum(s * c for s, c in self._sizes.items()) / n if n else 0.0,
            "buffer/size_max": float(max(sizes, default=0)),
            **{f"buffer/anchors_{source}": float(self._sources[source]) for source in SOURCES},
        }


class StoredBufferTable(BufferTable):
    """A `BufferTable` in the `buffers` table of a `SQLiteAnchorStore`: memory holds only the buffers changed
    since the last `flush`; the running totals travel in the state file (`totals`)."""

    def __init__(self, store, totals: dict | None = None):
        super().__init__()
        self._store = store
        self._changed: dict[str, AnchorBuffer | None] = {}  # None: removed
        if totals:
            self._sizes.update({int(k): v for k, v in totals["sizes"].items()})
            self._sources.update(totals["sources"])

    def get(self, query_id: str) -> AnchorBuffer | None:
        if query_id in self._changed:
            return self._changed[query_id]
        state = self._store.read_buffer(query_id)
        return None if state is None else AnchorBuffer.from_state(json.loads(state))

    def _write(self, query_id: str, buffer: AnchorBuffer | None) -> None:
        self._changed[query_id] = buffer

    def flush(self) -> None:
        """Write the changed buffers to the store in one transaction and drop them from memory."""
        if self._changed:
            rows = {q: None if b is None else json.dumps(b.to_state()) for q, b in self._changed.items()}
            self._store.write_buffers(rows)
            self._changed.clear()

    def items(self):
        """Every buffer, read from the store (for reports)."""
        self.flush()
        for query_id, state in self._store.buffer_rows():
            yield query_id, AnchorBuffer.from_state(json.loads(state))

    def state(self) -> dict[str, Any]:
        """The state file's part: the running totals only (`buffers_stored`, restored with
        `StoredBufferTable(store, totals)`); the structures are in the store."""
        self.flush()
        sizes = {str(k): v for k, v in self._sizes.items() if v}
        sources = {k: v for k, v in self._sources.items() if v}
        return {"buffers_stored": {"count": len(self), "sizes": sizes, "sources": sources}}


#: what `frozen` records per touched query: (buffer or None, look-ahead group or None)
_Saved = tuple[AnchorBuffer | None, dict[str, Any] | None]


class QueryBuffers:
    """RankBuffer's state over `store`: every query's buffer and look-ahead group (`llm_lookahead`'s last
    ranked group, as text keys); `frozen()` undoes both, `state()` / `load()` give and take them."""

    def __init__(self, store: AnchorStore):
        self.store = store
        self.table = store.buffer_table()
        self._pending: dict[str, dict[str, Any]] = {}
        self._journals: list[dict[str, _Saved]] = []  # one per open frozen() block, innermost last

    def get(self, query_id: str) -> AnchorBuffer | None:
        return self.table.get(query_id)

    def set(self, query_id: str, buffer: AnchorBuffer) -> None:
        self._touch(query_id)
        self.table.set(query_id, buffer)

    def pending(self, query_id: str) -> dict[str, Any] | None:
        """The look-ahead group of `query_id`: `{"epoch": ..., "buckets": [[text key, ...], ...]}`, or None."""
        return self._pending.get(query_id)

    def set_pending(self, query_id: str, epoch: int, key_buckets: list[list[str]]) -> None:
        self._touch(query_id)
        self._pending[query_id] = {"epoch": epoch, "buckets": key_buckets}

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Undo the block's writes on exit, also on an exception, in O(queries touched): a journal records a
        query's old (immutable) buffer and look-ahead group before its first write. Texts stay (the store is
        append-only). Blocks nest."""
        journal: dict[str, _Saved] = {}
        self._journals.append(journal)
        try:
            yield
        finally:
            self._journals.pop()
            for qid, (buffer, pending) in journal.items():
                self.table.set(qid, buffer)
                if pending is None:
                    self._pending.pop(qid, None)
                else:
                    self._pending[qid] = pending

    def _touch(self, qid: str) -> None:
        """Record `qid`'s buffer and look-ahead group in every open journal lacking them (before a write)."""
        for journal in self._journals:
            if qid not in journal:
                journal[qid] = (self.table.get(qid), self._pending.get(qid))

    def state(self) -> dict[str, Any]:
        """`pending`, and the table's part (`buffers`, or `buffers_stored` totals when the store keeps
        them); with `buffers`, the referenced texts too (`texts`), so the state resumes on its own."""
        state: dict[str, Any] = {"pending": {qid: dict(p) for qid, p in self._pending.items()}}
        state.update(self.table.state())
        if "buffers" in state:
            state["texts"] = self.store.texts(sorted(_referenced_keys(state["buffers"], state["pending"])))
        return state

    def load(self, state: dict[str, Any], source: str = "the RankBuffer state") -> None:
        """Restore `state()` output exactly. Every entry is checked before anything changes: a bad buffer or
        look-ahead group raises `CheckpointStateError` naming `source` (the state file) and its query, and
        every referenced key's text must be in the store."""
        if self._journals:
            raise RuntimeError(
                "RankBufferReward.load_state_dict was called inside frozen_state(), whose exit would undo "
                "only the block's own writes on top of the loaded state; load the state outside the block"
            )
        with paused_gc():
            pending = checked_pending(source, state)
            stored = "buffers_stored" in state  # the store holds the buffers; its table checks their count
            table = self.store.buffer_table(state["buffers_stored"]) if stored else None
            buffers = {}
            for qid, b in {} if stored else _entries(source, state, "buffers").items():
                with checked_entry(source, qid):
                    buffers[qid] = AnchorBuffer.from_state(b)
            self.store.put_many(state.get("texts", {}).values())
            missing = self.store.missing(_referenced_keys({} if stored else state["buffers"], pending))
            if missing:
                raise ValueError(
                    f"{len(missing)} anchor text(s) referenced by the RankBuffer state are not in the anchor store "
                    f"(first: {missing[0]}); pass the anchor_store the run used (e.g. its SQLite file)"
                )
            if table is None:
                table = self.store.buffer_table()
            for qid, buffer in buffers.items():
                table.set(qid, buffer)
            self.table = table
            self._pending = pending
            self.table.flush()

    def export(self, query_ids: Iterable[str]) -> dict[str, Any]:
        """The state of `query_ids` alone, in `state()`'s in-memory layout (`buffers`, `pending`, `texts`):
        what a judging worker needs to score their groups and what it hands back (`merge`)."""
        query_ids = list(query_ids)
        buffers = {qid: b.to_state() for qid in query_ids if (b := self.table.get(qid)) is not None}
        pending = {qid: self._pending[qid] for qid in query_ids if qid in self._pending}
        return {"buffers": buffers, "pending": pending,
                "texts": self.store.texts(sorted(_referenced_keys(buffers, pending)))}  # fmt: skip

    def merge(self, state: dict[str, Any]) -> None:
        """Take `export()` output of some queries: their texts, buffers and look-ahead groups replace this
        table's (through `set`, so running totals and open `frozen` blocks follow); other queries keep theirs."""
        self.store.put_many(state["texts"][k] for k in self.store.missing(state["texts"]))
        for qid, group in state["pending"].items():
            self.set_pending(qid, group["epoch"], [list(b) for b in group["buckets"]])
        for qid, buffer in state["buffers"].items():
            self.set(qid, AnchorBuffer.from_state(buffer))
        self.table.flush()


def _entries(source: str, state: dict[str, Any], name: str) -> dict[str, Any]:
    """`state[name]`, a JSON object of entries by query id, or `CheckpointStateError` naming `source`."""
    entries = state.get(name)
    if not isinstance(entries, dict):
        raise corrupt_entry(source, f"its {name!r} should be a JSON object of entries by query id, got {entries!r:.60}")
    return entries


def checked_pending(source: str, state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The look-ahead groups of `state` (`QueryBuffers.state`), each `{"epoch": int, "buckets": [[key, ...], ...]}`;
    `CheckpointStateError` naming `source` and the query for any other entry."""
    pending = {}
    for qid, p in _entries(source, state, "pending").items():
        if not (type(p) is dict and p.keys() == {"epoch", "buckets"} and type(p["epoch"]) is int
                and type(p["buckets"]) is list and all(type(b) is list for b in p["buckets"])
                and all(type(k) is str for b in p["buckets"] for k in b)):  # fmt: skip
            expected = "{'epoch': integer, 'buckets': [[key, ...], ...]}"
            raise corrupt_entry(
                source, f"its look-ahead group is malformed (expected {expected}, got {p!r:.80})", query=qid
            )
        pending[qid] = {"epoch": p["epoch"], "buckets": [list(b) for b in p["buckets"]]}
    return pending


def _referenced_keys(buffers: dict[str, Any], pending: dict[str, Any]) -> set[str]:
    keys = {row[0] for b in buffers.values() for row in b["anchors"]}
    keys.update(k for p in pending.values() for bucket in p["buckets"] for k in bucket)
    return keys


def key_collision(key: str) -> ValueError:
    """The error for two different texts under one key."""
    return ValueError(
        f"Anchor key {key} already stores a different text (a SHA-256 prefix collision); "
        "this should never happen by chance: check that the store file belongs to this run"
    )


class AnchorStore(Protocol):
    """What RankBuffer asks of an anchor store: texts by key (`put` stores a new one and returns its key; `put_many`
    in one write where the store can; `get` raises `KeyError` for an absent key; `missing`: the absent keys, sorted
    and unique), where its buffers live (`buffer_table`: a new, empty table, or the one a state file's
    `buffers_stored` totals describe) and what a checkpoint folder gets beyond the state file (`save_checkpoint`;
    `load_checkpoint` takes it back, with the buffer structures if `buffers`)."""

    def put(self, text: str) -> str: ...

    def put_many(self, texts: Iterable[str]) -> list[str]: ...

    def get(self, key: str) -> str: ...

    def missing(self, keys: Iterable[str]) -> list[str]: ...

    def texts(self, keys: Iterable[str]) -> dict[str, str]: ...

    def buffer_table(self, totals: dict[str, Any] | None = None) -> BufferTable: ...

    def save_checkpoint(self, directory: str) -> None: ...

    def load_checkpoint(self, directory: str, *, buffers: bool) -> None: ...


class InMemoryAnchorStore:
    """Anchor texts in a dict; texts and buffers travel in the method's state file."""

    def __init__(self):
        self._texts: dict[str, str] = {}

    def put(self, text: str) -> str:
        key = text_id(text)
        stored = self._texts.setdefault(key, text)
        if stored != text:
            raise key_collision(key)
        return key

    def put_many(self, texts: Iterable[str]) -> list[str]:
        return [self.put(text) for text in texts]

    def get(self, key: str) -> str:
        try:
            return self._texts[key]
        except KeyError:
            raise KeyError(f"Anchor key {key!r} is not in the in-memory anchor store") from None

    def missing(self, keys: Iterable[str]) -> list[str]:
        return sorted({k for k in keys if k not in self._texts})

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        return {k: self.get(k) for k in keys}

    def __len__(self) -> int:
        return len(self._texts)

    def buffer_table(self, totals: dict[str, Any] | None = None) -> BufferTable:
        if totals is not None:
            raise ValueError(
                "This RankBuffer state keeps its buffers in an SQLite anchor store, but this RankBufferReward has "
                f"{type(self).__name__}; construct it with SQLiteAnchorStore (anchor_store='sqlite')"
            )
        return BufferTable()

    def save_checkpoint(self, directory: str) -> None:
        """Nothing: the texts travel in the state file."""

    def load_checkpoint(self, directory: str, *, buffers: bool) -> None:
        """Nothing: the texts come with the state file (an SQLite checkpoint's `anchors/` is not read)."""


CHECKPOINT_FOLDER = "anchors"
BUFFERS_FILE = "buffers.sqlite"
_EXPORTED = "exported_upto"  # meta key: the text watermark of the newest segment

# SQLite's default limit on host parameters in one statement is 999 in old builds.
_SQL_CHUNK = 500


class AnchorStoreError(ValueError):
    """An anchor store file is missing, not an SQLite database, corrupt, or holds another schema,
    or SQLite failed on it; the message names the file and what to do."""


# `PRAGMA application_id` ("rkas") and `user_version` mark this module's files; unmarked ones (application_id
# 0) with the right `anchors` columns are accepted, and marked when opened for writing.
APPLICATION_ID = 0x726B6173
SCHEMA_VERSION = 1
_COLUMNS = [("key", "TEXT", 0, 1), ("text", "TEXT", 1, 0)]  # PRAGMA table_info: name, type, notnull, pk
_CREATE = "CREATE TABLE IF NOT EXISTS anchors (key TEXT PRIMARY KEY, text TEXT NOT NULL)"
# the buffer structures (one JSON row per query) beside their texts: a checkpoint of both is one export
_CREATE_BUFFERS = "CREATE TABLE IF NOT EXISTS buffers (query_id TEXT PRIMARY KEY, state TEXT NOT NULL)"
# The store's identity and export watermark (`save_checkpoint`).
_CREATE_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_MARK = (
    f"BEGIN IMMEDIATE; {_CREATE}; PRAGMA application_id = {APPLICATION_ID}; "
    f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
)
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
    """Cheap checks before SQLite opens `path`: the magic, and (no journal pending) a length matching the
    header's page count, which catches a store cut short by a copy."""
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
    if not head.startswith(b"SQLite format 3\x00"):
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
    """Append-only anchor texts in an SQLite file at `path` (created if absent; `read_only`: must exist). Every
    `put` is committed at once, so a process crash loses nothing a checkpoint can refer to; commits do not wait
    for fsync (WAL, synchronous=NORMAL: fsync per put cost ~9 ms, docs/performance.md)."""

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

    def _one(self, action: str, sql: str, *params: str) -> Any:
        """The first value of the first row `sql` gives, or None when it gives none."""
        with self._sql(action):
            row = self._db.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def put(self, text: str) -> str:
        return self.put_many([text])[0]

    def put_many(self, texts: Iterable[str]) -> list[str]:
        """`put` for many texts in one transaction (~30x the rate of single puts); their keys in order."""
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
        text = self._one(f"reading anchor {key}", "SELECT text FROM anchors WHERE key = ?", key)
        if text is None:
            raise KeyError(f"Anchor key {key!r} is not in the anchor store {self.path}")
        return text

    def missing(self, keys: Iterable[str]) -> list[str]:
        """The keys of `keys` that the store does not hold (sorted, unique): one pass over the key index when
        they are a large part of the store (~1 us a key), else look-ups in key order, counted per chunk."""
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

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        """`{key: text}` for `keys`, read in chunks (`KeyError` for an absent key)."""
        ordered, found = sorted(set(keys)), {}
        with self._sql("reading anchors"):
            for start in range(0, len(ordered), _SQL_CHUNK):
                chunk = ordered[start : start + _SQL_CHUNK]
                found.update(self._db.execute(f"SELECT key, text FROM anchors WHERE key IN ({','.join('?' * len(chunk))})",
                                              chunk))  # fmt: skip
        if len(found) < len(ordered):
            absent = next(k for k in ordered if k not in found)
            raise KeyError(f"Anchor key {absent!r} is not in the anchor store {self.path}")
        return found

    def __len__(self) -> int:
        return self._one("counting anchors", "SELECT COUNT(*) FROM anchors")

    def write_buffers(self, rows: Mapping[str, str | None]) -> None:
        """Write buffer structures, `{query_id: JSON text}` (None deletes a row), in one transaction."""
        upserts = [(q, state) for q, state in rows.items() if state is not None]
        deletes = [(q,) for q, state in rows.items() if state is None]
        with self._sql("writing buffers"), self._db:
            self._db.executemany("INSERT OR REPLACE INTO buffers (query_id, state) VALUES (?, ?)", upserts)
            self._db.executemany("DELETE FROM buffers WHERE query_id = ?", deletes)

    def read_buffer(self, query_id: str) -> str | None:
        """The stored structure (JSON text) of `query_id`'s buffer, or None."""
        return self._one(
            f"reading the buffer of {query_id!r}", "SELECT state FROM buffers WHERE query_id = ?", query_id
        )

    def buffer_rows(self) -> Iterator[tuple[str, str]]:
        """Every stored `(query_id, JSON text)`, in query_id order."""
        with self._sql("reading buffers"):
            yield from self._db.execute("SELECT query_id, state FROM buffers ORDER BY query_id")

    def buffer_count(self) -> int:
        return self._one("counting buffers", "SELECT COUNT(*) FROM buffers")

    def meta(self, key: str, default: str | None = None) -> str | None:
        """A value of the store's `meta` table (`store_id`, export watermarks), or `default`."""
        if not self._one(f"reading {key}", "SELECT 1 FROM sqlite_master WHERE name = 'meta'"):
            return default
        value = self._one(f"reading {key}", "SELECT value FROM meta WHERE key = ?", key)
        return default if value is None else value

    def text_watermark(self) -> int:
        """The rowid of the newest text: texts are append-only, so rows up to it never change."""
        return self._one("reading the text watermark", "SELECT COALESCE(MAX(rowid), 0) FROM anchors")

    def export(self, path: str | os.PathLike, *, texts: tuple[int, int] | None = None, buffers: bool = False,
               meta: Mapping[str, str] | None = None) -> None:  # fmt: skip
        """Write a new store file at `path`, atomically: the texts with rowid in `(after, upto]` of `texts`, all
        buffer structures if `buffers`, and `meta`."""
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
        """Replace this store's buffer structures by those of the store file `path`, in one transaction. Every
        row is checked first (`check_buffer_state`, its keys in this store): a bad row raises
        `CheckpointStateError` naming `path` and its query, and nothing is copied."""
        path = os.fspath(path)
        _check_file(path, must_exist=True)
        with self._sql(f"importing buffers from {path}"), self._attached(path, "source", "ro"):
            _schema_state(self._db, path, "source", allow_new=False)
            if not self._db.execute("SELECT 1 FROM source.sqlite_master WHERE name = 'buffers'").fetchone():
                raise _not_a_store(path, "it holds no buffers table (a snapshot written before buffers were stored)")
            rows, keys = "SELECT query_id, state FROM source.buffers", set()
            with paused_gc():  # 10^6 anchor keys at 10^5 queries (see _gc.py)
                for query_id, state in self._db.execute(rows):
                    with checked_entry(path, query_id):
                        keys.update(check_buffer_state(json.loads(state)))
            missing = set(self.missing(keys))
            if missing:
                query_id, key = next((q, k) for q, state in self._db.execute(rows)
                                     for k in check_buffer_state(json.loads(state)) if k in missing)  # fmt: skip
                raise corrupt_entry(
                    path, f"its buffer refers to anchor key {key}, whose text is in neither the anchor store "
                    f"{self.path} nor the checkpoint's text segments ({len(missing)} such key(s))", query=query_id,
                )  # fmt: skip
            with self._db:
                self._db.execute("DELETE FROM main.buffers")
                self._db.execute("INSERT INTO main.buffers SELECT query_id, state FROM source.buffers")

    def merge_from(self, path: str | os.PathLike) -> int:
        """Add the texts of the store file `path` (e.g. a checkpoint's text segment) that this store lacks, in one
        transaction; returns how many. `path` is checked as at opening plus SQLite's `quick_check`; a key with
        another text here raises `AnchorStoreError` and adds nothing (stores of different runs, or corrupt)."""
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
                    clash = self._db.execute(  # some keys were here before: their texts must match
                        "SELECT m.key FROM merged.anchors AS m JOIN main.anchors AS a ON a.key = m.key "
                        "WHERE a.text != m.text LIMIT 1"
                    ).fetchone()
                    if clash is not None:
                        raise AnchorStoreError(
                            f"Anchor key {clash[0]} holds one text in {path} and another in {self.path} (a key "
                            "collision): the stores belong to different runs or one is corrupt; nothing was merged. "
                            "Merge only snapshots of this run's store"
                        )
        return added

    def close(self) -> None:
        self._db.close()

    def buffer_table(self, totals: dict[str, Any] | None = None) -> StoredBufferTable:
        """The buffer structures live in this file: a new table clears what an earlier run left; a
        state's table is checked against its totals (another checkpoint's store raises)."""
        if totals is None:  # a new run starts without buffers; texts stay
            with self._sql("clearing buffers"), self._db:
                self._db.execute("DELETE FROM buffers")
            return StoredBufferTable(self)
        found = self.buffer_count()
        if found != totals["count"]:
            raise ValueError(
                f"The anchor store {self.path} holds {found} buffers, but the RankBuffer state counts "
                f"{totals['count']}: they are not from the same checkpoint. Resume from the checkpoint folder "
                "(its anchors/ folder and reward_method_state.json belong together)"
            )
        return StoredBufferTable(self, totals)

    def save_checkpoint(self, directory: str) -> None:
        """Write `directory/anchors/`: links to every text segment and a snapshot of the buffers (module docstring)."""
        segments = f"{self.path}.segments"
        os.makedirs(segments, exist_ok=True)
        done, upto = int(self.meta(_EXPORTED, "0")), self.text_watermark()
        if upto > done:
            self.export(os.path.join(segments, f"texts-{done + 1:012d}-{upto:012d}.sqlite"), texts=(done, upto))
            with self._sql(f"writing {_EXPORTED}"), self._db:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (_EXPORTED, str(upto)))
        folder = os.path.join(directory, CHECKPOINT_FOLDER)
        os.makedirs(folder, exist_ok=True)
        remove_write_debris(folder)  # of a save of this checkpoint that was killed (before a resume)
        for name in _segments(segments):
            source, target = os.path.join(segments, name), os.path.join(folder, name)
            if os.path.exists(target):  # segments never change: an existing link or copy is this segment
                continue
            try:  # through NAME.tmp: the debris of a save killed here went above
                os.link(source, f"{target}.tmp")
            except OSError:  # another filesystem, or links not supported
                shutil.copyfile(source, f"{target}.tmp")
            os.replace(f"{target}.tmp", target)
        meta = {"store_id": self.meta("store_id") or "", "texts_upto": str(upto)}
        self.export(os.path.join(folder, BUFFERS_FILE), buffers=True, meta=meta)

    def load_checkpoint(self, directory: str, *, buffers: bool) -> None:
        """Hold the checkpoint's texts (merging its segments unless this store already does) and, with
        `buffers`, exactly its buffer structures; nothing when `directory` has no `anchors/` folder."""
        folder = os.path.join(directory, CHECKPOINT_FOLDER)
        if not os.path.isdir(folder):
            return
        snapshot = os.path.join(folder, BUFFERS_FILE)
        with contextlib.closing(SQLiteAnchorStore(snapshot, read_only=True)) as saved:
            store_id, upto = saved.meta("store_id"), saved.meta("texts_upto")
        if not (store_id == self.meta("store_id") and self.text_watermark() >= int(upto)):
            for name in _segments(folder):
                self.merge_from(os.path.join(folder, name))
        if buffers:
            self.import_buffers(snapshot)


def checkpoint_buffer_rows(checkpoint: str) -> Iterator[tuple[str, str]]:
    """`(query_id, JSON text)` of every buffer saved in `checkpoint`'s `anchors/` folder (for reports)."""
    path = os.path.join(checkpoint, CHECKPOINT_FOLDER, BUFFERS_FILE)
    with contextlib.closing(SQLiteAnchorStore(path, read_only=True)) as snapshot:
        yield from snapshot.buffer_rows()


def _segments(folder: str) -> list[str]:
    """The text segment files of `folder`, oldest first (their names sort by rowid)."""
    return sorted(n for n in os.listdir(folder) if n.startswith("texts-") and n.endswith(".sqlite"))
