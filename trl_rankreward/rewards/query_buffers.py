"""`QueryBuffers`: RankBuffer's state, every query's buffer and look-ahead group, and its persistence.

The buffers sit in a table the anchor store provides (`AnchorStore.buffer_table`: in memory,
or in the SQLite file); the look-ahead groups (`buffer_manager="llm_lookahead"`: the last
ranked group of each query, as text keys) in a dict. Both are undone on leaving
`frozen()`, and `state()` / `load()` give and take the plain JSON part of the state file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._gc import paused_gc
from .anchor_buffer import AnchorBuffer
from .anchor_store import AnchorStore

#: what `frozen` records per touched query: (buffer or None, look-ahead group or None)
_Saved = tuple[AnchorBuffer | None, dict[str, Any] | None]


class QueryBuffers:
    """Every query's buffer (`get` / `set`) and look-ahead group (`pending` / `set_pending`) over `store`."""

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

    # ------------------------------------------------------------------ undo
    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Undo the block's writes on exit, in O(queries touched) (`RankBufferReward.frozen_state`).

        A copy-on-write journal: before the first write to a query inside the block, its old
        buffer and look-ahead group (or their absence) are recorded; on exit, also on an
        exception, they are put back through the table, so its running totals follow. Buffers
        are immutable, so the old objects are the old state. Texts put into the store stay: it
        is append-only and content-addressed, and `state()` lists only referenced texts. Blocks nest.
        """
        journal: dict[str, _Saved] = {}
        self._journals.append(journal)
        try:
            yield
        finally:
            self._journals.pop()
            for qid, (buffer, pending) in journal.items():
                if buffer is None:
                    self.table.remove(qid)
                else:
                    self.table.set(qid, buffer)
                if pending is None:
                    self._pending.pop(qid, None)
                else:
                    self._pending[qid] = pending

    def _touch(self, qid: str) -> None:
        """Record `qid`'s buffer and look-ahead group in every open journal that lacks them; call before writing."""
        for journal in self._journals:
            if qid not in journal:
                journal[qid] = (self.table.get(qid), self._pending.get(qid))

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """`pending`, and the table's part (`buffers`, or `buffers_stored` totals when the store keeps
        them); with `buffers`, the referenced texts too (`texts`), so the state resumes on its own."""
        state: dict[str, Any] = {"pending": {qid: dict(p) for qid, p in self._pending.items()}}
        state.update(self.table.state())
        if "buffers" in state:
            state["texts"] = self.store.texts(sorted(_referenced_keys(state["buffers"], state["pending"])))
        return state

    def load(self, state: dict[str, Any]) -> None:
        """Restore `state()` output exactly; checks that every referenced key's text is in the store."""
        if self._journals:
            raise RuntimeError(
                "RankBufferReward.load_state_dict was called inside frozen_state(), whose exit would undo "
                "only the block's own writes on top of the loaded state; load the state outside the block"
            )
        with paused_gc():
            self._pending = {qid: {"epoch": p["epoch"], "buckets": [list(b) for b in p["buckets"]]}
                             for qid, p in state["pending"].items()}  # fmt: skip
            if "buffers_stored" in state:
                self.table = self.store.buffer_table(state["buffers_stored"])
                return
            for text in state.get("texts", {}).values():
                self.store.put(text)
            missing = self.store.missing(_referenced_keys(state["buffers"], state["pending"]))
            if missing:
                raise ValueError(
                    f"{len(missing)} anchor text(s) referenced by the RankBuffer state are not in the anchor store "
                    f"(first: {missing[0]}); pass the anchor_store the run used (e.g. its SQLite file)"
                )
            table = self.store.buffer_table()
            for qid, b in state["buffers"].items():
                table.set(qid, AnchorBuffer.from_state(b))
            self.table = table
            self.table.flush()


def _referenced_keys(buffers: dict[str, Any], pending: dict[str, Any]) -> set[str]:
    keys = {row[0] for b in buffers.values() for row in b["anchors"]}
    keys.update(k for p in pending.values() for bucket in p["buckets"] for k in bucket)
    return keys
