"""RankBuffer's per-query anchor buffer (`AnchorBuffer`) and Algorithm 2, its rule-based maintenance
(`update_buffer`; RankBuffer paper, Appendix A), as pure data and pure functions over anchor *keys* (texts
live in an anchor store, `anchor_store.py`); the tables of all buffers (`BufferTable`, `StoredBufferTable`).
Select_K0 (the paper's endpoint-preserving uniform subsampling) is `judging.subsample.select_endpoints`,
shared with the offline judges (Sec. 3.2, Appendix H).

Indexing: `buckets[p]` is sigma_p of the paper for p = 0..K (0 = below the worst anchor,
K = above the best), each worst -> best. Anchors are 1-based in the paper (a_1..a_K) and
0-based in `AnchorBuffer.anchors`; comments say which one they mean.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

#: where an anchor came from: the query's ranked references, bootstrap ranking, left / right boundary
#: expansion, interval refinement (Sec. 3.5), or the LLM buffer manager (Appendix G)
SOURCES: tuple[str, ...] = ("references", "bootstrap", "left", "right", "refine", "llm")
#: "nectar" is the 0.1 name of the references (the paper's Nectar references), both as a `buffer_init`
#: value (the 0.1 example configs, a state file's `config["init"]`) and as an anchor source (checkpoints)
FORMER_NAMES = {"nectar": "references"}


def current_name(name: str) -> str:
    """`name` as it is spelled now: a former name (`FORMER_NAMES`) read as today's, any other unchanged."""
    return FORMER_NAMES.get(name, name)


@dataclass(frozen=True, slots=True)
class Anchor:
    """One anchor: `text_key` into the anchor store, `source` (one of `SOURCES`), the epoch
    it was created in, and its inactivity counter h (Eq. 14; 0 when created)."""

    text_key: str
    source: str
    created_epoch: int
    inactive_epochs: int = 0

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"Anchor source must be one of {SOURCES}, got {self.source!r}")


@dataclass(frozen=True)
class AnchorBuffer:
    """One query's anchors worst -> best, with Algorithm 2's per-query epoch markers.

    `observed_epoch`, `left_epoch`, `right_epoch` are the last epoch in which inactivity was
    observed / the left / the right boundary was expanded (None: never). `created_epoch` is
    the epoch of initialization (the static variant maintains the buffer only then).
    """

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
        return {
            "anchors": [[a.text_key, a.source, a.created_epoch, a.inactive_epochs] for a in self.anchors],
            "created_epoch": self.created_epoch,
            "observed_epoch": self.observed_epoch,
            "left_epoch": self.left_epoch,
            "right_epoch": self.right_epoch,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> AnchorBuffer:
        try:
            anchors = tuple(Anchor(str(k), current_name(str(s)), int(c), int(h)) for k, s, c, h in state["anchors"])
            return cls(
                anchors,
                created_epoch=int(state["created_epoch"]),
                observed_epoch=state.get("observed_epoch"),
                left_epoch=state.get("left_epoch"),
                right_epoch=state.get("right_epoch"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"Malformed RankBuffer buffer state ({exc}); expected the output of AnchorBuffer.to_state()"
            ) from exc


@dataclass(frozen=True)
class BufferUpdate:
    """What one `update_buffer` call did: the new buffer, added anchors, pruned anchors."""

    buffer: AnchorBuffer
    added: tuple[Anchor, ...] = ()
    pruned: tuple[Anchor, ...] = ()


def update_buffer(buffer: AnchorBuffer, buckets: Sequence[Sequence[str]], epoch: int, H: int) -> BufferUpdate:
    """Algorithm 2 (Appendix A): inactivity pruning, boundary expansion, interval refinement.

    `buckets[p]` (p = 0..K) holds the text keys of bucket sigma_p worst -> best. Additions
    and pruning are merged in pre-update coordinates: kept anchor a_k sits at k, a new
    left anchor at 1/2, a right one at K + 1/2, a refinement of bucket p at p + 1/2, so
    removing an anchor never shifts where a new one goes. New anchors start with h = 0.
    """
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

    merged.extend(added)
    merged.sort(key=lambda item: item[0])
    new = replace(
        buffer, anchors=tuple(a for _, a in merged), observed_epoch=observed, left_epoch=left, right_epoch=right
    )
    return BufferUpdate(new, tuple(a for _, a in added), tuple(anchors[k - 1] for k in sorted(pruned_idx)))


class BufferTable:
    """All query buffers, with running totals so step metrics never scan 10^5 buffers."""

    def __init__(self):
        self._buffers: dict[str, AnchorBuffer] = {}
        self._sizes: Counter[int] = Counter()
        self._sources: Counter[str] = Counter()

    def get(self, query_id: str) -> AnchorBuffer | None:
        return self._buffers.get(query_id)

    def set(self, query_id: str, buffer: AnchorBuffer) -> None:
        self._replace(query_id, buffer)

    def remove(self, query_id: str) -> None:
        """Forget `query_id`'s buffer (no-op when it has none); used to undo a `set`."""
        self._replace(query_id, None)

    def _replace(self, query_id: str, buffer: AnchorBuffer | None) -> None:
        """The one write path: the running totals lose the old buffer and gain the new one."""
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
        out = {
            "buffer/count": float(n),
            "buffer/size_mean": sum(s * c for s, c in self._sizes.items()) / n if n else 0.0,
            "buffer/size_max": float(max(sizes, default=0)),
        }
        for source in SOURCES:
            out[f"buffer/anchors_{source}"] = float(self._sources[source])
        return out


class StoredBufferTable(BufferTable):
    """A `BufferTable` whose buffers live in the anchor store's `buffers` table (`SQLiteAnchorStore`).

    Memory holds only the buffers changed since the last `flush` (a step's groups), not 10^6 of
    them; `get` reads a buffer from the store when it is not among those. The running totals of
    `stats` stay in memory and travel in the method's state file (`totals`), so a checkpoint is
    the store's snapshot plus a small JSON file, and neither save nor restore touches every buffer
    in Python. A new table starts empty: `clear=True` deletes what an earlier run left in the store.
    """

    def __init__(self, store, totals: dict | None = None, *, clear: bool = False):
        super().__init__()
        self._store = store
        self._changed: dict[str, AnchorBuffer | None] = {}  # None: removed
        if clear:
            store.clear_buffers()
        if totals:
            self._sizes.update({int(k): v for k, v in totals["sizes"].items()})
            self._sources.update({current_name(k): v for k, v in totals["sources"].items()})

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
        """Every buffer, read from the store (after a flush): for reports, not for the training path."""
        self.flush()
        for query_id, state in self._store.buffer_rows():
            yield query_id, AnchorBuffer.from_state(json.loads(state))

    def state(self) -> dict[str, Any]:
        """The state file's part: the running totals only (`buffers_stored`); the structures are in the store."""
        self.flush()
        return {"buffers_stored": self.totals()}

    def totals(self) -> dict:
        """The running totals, JSON-able (restored with `StoredBufferTable(store, totals)`)."""
        sizes = {str(k): v for k, v in self._sizes.items() if v}
        return {"count": len(self), "sizes": sizes, "sources": {k: v for k, v in self._sources.items() if v}}
