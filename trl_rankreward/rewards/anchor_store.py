"""Content-addressed storage of anchor texts for RankBuffer.

Buffers refer to anchor texts by key only (`judging.seeding.text_id`: the first 16 hex
digits of the text's SHA-256), so a checkpoint of 10^5 query buffers holds short keys and
each text is stored once, however many buffers or epochs refer to it. Stores are
append-only: a text is never changed or removed, so a key in any old checkpoint stays valid.

`AnchorStore` is the protocol RankBuffer calls; `InMemoryAnchorStore` (here) and `SQLiteAnchorStore`
(`rewards.sqlite_anchor_store`, for runs whose buffers outgrow memory) keep it.

Two different texts with the same key (a 64-bit prefix collision) raise instead of
silently sharing an anchor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..judging.seeding import text_id
from .anchor_buffer import BufferTable


def key_collision(key: str) -> ValueError:
    """The error for two different texts under one key (a store raises it instead of sharing an anchor)."""
    return ValueError(
        f"Anchor key {key} already stores a different text (a SHA-256 prefix collision); "
        "this should never happen by chance: check that the store file belongs to this run"
    )


class AnchorStore(Protocol):
    """What RankBuffer asks of an anchor store: texts by key, and where its buffers and checkpoints go."""

    def put(self, text: str) -> str:
        """Store `text` (if new) and return its key."""

    def get(self, key: str) -> str:
        """The text of `key` (`KeyError` when absent)."""

    def missing(self, keys: Iterable[str]) -> list[str]:
        """The keys of `keys` that the store does not hold (sorted, unique)."""

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        """`{key: text}` for `keys`."""

    def buffer_table(self, totals: dict[str, Any] | None = None) -> BufferTable:
        """A table for the query buffers: new and empty (`totals` None), or the one a state file's
        `buffers_stored` totals describe (a store that keeps no buffers raises `ValueError`)."""

    def save_checkpoint(self, directory: str) -> None:
        """Write what a checkpoint folder needs beyond the state file (nothing for texts that travel in it)."""

    def load_checkpoint(self, directory: str, *, buffers: bool) -> None:
        """Take back what `save_checkpoint` wrote into `directory`, with the buffer structures if `buffers`."""


class InMemoryAnchorStore:
    """Anchor texts in a dict keyed by `text_id(text)`; the buffers live in memory too and both
    travel in the method's state file."""

    def __init__(self):
        self._texts: dict[str, str] = {}

    def put(self, text: str) -> str:
        key = text_id(text)
        stored = self._texts.setdefault(key, text)
        if stored != text:
            raise key_collision(key)
        return key

    def get(self, key: str) -> str:
        try:
            return self._texts[key]
        except KeyError:
            raise KeyError(f"Anchor key {key!r} is not in the in-memory anchor store") from None

    def missing(self, keys: Iterable[str]) -> list[str]:
        return sorted({k for k in keys if k not in self._texts})

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        """`{key: text}` for `keys` (used to embed texts in a state dict)."""
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
