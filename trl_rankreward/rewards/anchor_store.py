"""Content-addressed storage of anchor texts for RankBuffer.

Buffers refer to anchor texts by key only (`judging.seeding.text_id`: the first 16 hex
digits of the text's SHA-256), so a checkpoint of 10^5 query buffers holds short keys and
each text is stored once, however many buffers or epochs refer to it. Stores are
append-only: a text is never changed or removed, so a key in any old checkpoint stays valid.

- `InMemoryAnchorStore`: a dict; its texts travel inside `RankBufferReward.state_dict()`.
- `SQLiteAnchorStore(path)`: a stdlib `sqlite3` file (e.g. in the trainer's output
  directory); `state_dict()` then holds keys only and the file holds the texts.

Two different texts with the same key (a 64-bit prefix collision) raise instead of
silently sharing an anchor.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable

from ..judging.seeding import text_id

# SQLite's default limit on host parameters in one statement is 999 in old builds.
_SQL_CHUNK = 500


def _collision(key: str) -> ValueError:
    return ValueError(
        f"Anchor key {key} already stores a different text (a SHA-256 prefix collision); "
        "this should never happen by chance: check that the store file belongs to this run"
    )


class InMemoryAnchorStore:
    """Anchor texts in a dict keyed by `text_id(text)`."""

    persistent = False

    def __init__(self, texts: dict[str, str] | None = None):
        self._texts: dict[str, str] = {}
        for text in (texts or {}).values():
            self.put(text)

    def put(self, text: str) -> str:
        """Store `text` (if new) and return its key."""
        key = text_id(text)
        stored = self._texts.setdefault(key, text)
        if stored != text:
            raise _collision(key)
        return key

    def get(self, key: str) -> str:
        try:
            return self._texts[key]
        except KeyError:
            raise KeyError(f"Anchor key {key!r} is not in the in-memory anchor store") from None

    def missing(self, keys: Iterable[str]) -> list[str]:
        """The keys of `keys` that the store does not hold (sorted, unique)."""
        return sorted({k for k in keys if k not in self._texts})

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        """`{key: text}` for `keys` (used to embed texts in a state dict)."""
        return {k: self.get(k) for k in keys}

    def __len__(self) -> int:
        return len(self._texts)


class SQLiteAnchorStore:
    """Append-only anchor texts in an SQLite file at `path` (created if absent).

    Every `put` is committed at once, so a crash of the process loses nothing a checkpoint can
    refer to. Commits do not wait for fsync (WAL with synchronous=NORMAL): fsync per put cost
    ~9 ms each, seconds per step at 512 queries (docs/performance.md); after a power loss the
    last commits may be gone, as may the checkpoint files written with them.
    """

    persistent = True

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS anchors (key TEXT PRIMARY KEY, text TEXT NOT NULL)")
        self._db.commit()

    def put(self, text: str) -> str:
        key = text_id(text)
        with self._db:
            self._db.execute("INSERT OR IGNORE INTO anchors (key, text) VALUES (?, ?)", (key, text))
        if self.get(key) != text:
            raise _collision(key)
        return key

    def put_many(self, texts: Iterable[str]) -> list[str]:
        """`put` for many texts in one transaction (bulk loads: ~30x the rate of single puts);
        returns their keys in order. Texts whose key was already stored are read back and
        compared, so a collision raises as in `put`."""
        texts = list(texts)
        keys = [text_id(t) for t in texts]
        new: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if new.setdefault(key, text) != text:
                raise _collision(key)
        with self._db:
            inserted = self._db.executemany("INSERT OR IGNORE INTO anchors (key, text) VALUES (?, ?)", new.items())
        if inserted.rowcount != len(new):  # some keys were stored before: their texts must match
            for key, text in new.items():
                if self.get(key) != text:
                    raise _collision(key)
        return keys

    def get(self, key: str) -> str:
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
        return self._db.execute("SELECT COUNT(*) FROM anchors").fetchone()[0]

    def close(self) -> None:
        self._db.close()
