"""How a query's buffer changes after a ranked group: RankBuffer's buffer managers.

- `RuleManager`: Algorithm 2 (`anchor_buffer.update_buffer`: boundary expansion, interval
  refinement, inactivity pruning); `static` freezes the buffer after the epoch it was created
  in (RankBuffer*, Sec. 4.3); `max_anchors` caps it (RankBuffer+, keeping both ends).
- `LLMManager`: the judge picks the new buffer (Appendix G, `BufferSelectRequest`), right after
  ranking, or with `lookahead` when the query comes back in a later epoch, before ranking
  that epoch's group (which it sees as context).

`RankBufferReward` calls `before_ranking` and `after_ranking`, and skips the latter when a fine call
failed (its failure policy, `rank_buffer`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..judging.protocol import Judge, ask, is_failure
from ..judging.requests import BufferSelectRequest
from ..judging.subsample import select_endpoints
from .anchor_buffer import Anchor, AnchorBuffer, BufferUpdate, update_buffer
from .base import Group


class BufferManager:
    """The rule interface (module docstring); this base keeps every buffer as it is."""

    #: whether the manager needs each query's last ranked group (`QueryBuffers.pending`)
    lookahead: bool = False

    async def before_ranking(self, group: Group, buffer: AnchorBuffer, pending: dict[str, Any] | None,
                             answers: Sequence[str], get: Callable[[str], str], *, epoch: int, step: int,
                             details: dict[str, Any]) -> AnchorBuffer:  # fmt: skip
        """The buffer this epoch's group is ranked against."""
        return buffer

    async def after_ranking(self, group: Group, old: AnchorBuffer, ranked: AnchorBuffer,
                            key_buckets: list[list[str]], get: Callable[[str], str], *, epoch: int, step: int,
                            details: dict[str, Any]) -> BufferUpdate:  # fmt: skip
        """The buffer to keep after `ranked` (the buffer the group was ranked against; `old` before
        `before_ranking`) placed the group's answers into `key_buckets` (text keys, worst -> best)."""
        return changes(old, ranked)


def changes(old: AnchorBuffer, new: AnchorBuffer) -> BufferUpdate:
    """`new` with the anchors it added and pruned relative to `old` (by identity: anchors are kept as objects)."""
    added = tuple(a for a in new.anchors if all(a is not b for b in old.anchors))
    pruned = tuple(a for a in old.anchors if all(a is not b for b in new.anchors))
    return BufferUpdate(new, added, pruned)


class RuleManager(BufferManager):
    """Algorithm 2, optionally frozen after the first epoch (`static`) or capped (`max_anchors`)."""

    def __init__(self, inactivity_epochs: int, *, static: bool = False, max_anchors: int | None = None):
        self.inactivity_epochs = inactivity_epochs
        self.static = static
        self.max_anchors = max_anchors

    async def after_ranking(self, group, old, ranked, key_buckets, get, *, epoch, step, details) -> BufferUpdate:
        if self.static and epoch != old.created_epoch:
            return BufferUpdate(old, (), ())
        return self.cap(update_buffer(old, key_buckets, epoch, self.inactivity_epochs))

    def cap(self, update: BufferUpdate) -> BufferUpdate:
        """Past `max_anchors`, keep an evenly spaced subset (both ends kept: Select_K0's rule)."""
        anchors = update.buffer.anchors
        if self.max_anchors is None or len(anchors) <= self.max_anchors:
            return update
        kept_idx = set(select_endpoints(list(range(len(anchors))), self.max_anchors))
        kept = tuple(a for i, a in enumerate(anchors) if i in kept_idx)
        dropped = tuple(a for i, a in enumerate(anchors) if i not in kept_idx)
        capped = replace(update.buffer, anchors=kept)
        added = tuple(a for a in update.added if a in kept)  # an anchor added and dropped at once was never there
        pruned = update.pruned + tuple(a for a in dropped if a not in update.added)
        return BufferUpdate(capped, added, pruned)


class LLMManager(BufferManager):
    """Appendix G: the judge keeps `size` of the old anchors + ranked rollouts (module docstring); a failed
    or invalid selection leaves the buffer unchanged (`details["manager_invalid"]`) and the group its rewards."""

    def __init__(self, judge: Judge, size: int, *, lookahead: bool = False):
        self.judge = judge
        self.size = size
        self.lookahead = lookahead

    async def before_ranking(self, group, buffer, pending, answers, get, *, epoch, step, details) -> AnchorBuffer:
        if not self.lookahead or pending is None or pending["epoch"] == epoch:
            return buffer
        return await self.select(group, buffer, pending["buckets"], answers, get, epoch=epoch, step=step,
                                 details=details)  # fmt: skip

    async def after_ranking(self, group, old, ranked, key_buckets, get, *, epoch, step, details) -> BufferUpdate:
        if self.lookahead:  # this group's update waits until the query comes back
            return changes(old, ranked)
        return changes(old, await self.select(group, old, key_buckets, (), get, epoch=epoch, step=step,
                                              details=details))  # fmt: skip

    async def select(self, group: Group, buffer: AnchorBuffer, key_buckets: list[list[str]],
                     lookahead: Sequence[str], get: Callable[[str], str], *, epoch: int, step: int,
                     details: dict[str, Any]) -> AnchorBuffer:  # fmt: skip
        """The manager picks `size` of old anchors + ranked rollouts, shown with their combined
        worst -> best order C_0, a_1, C_1, ..., a_K, C_K (for look-ahead, the previous epoch's
        ranking); the picks are sorted by that order. Invalid: buffer unchanged."""
        rollouts = [k for bucket in key_buckets for k in bucket]
        pool = buffer.keys + rollouts
        size = min(self.size, len(pool))
        combined = combined_order(buffer, key_buckets, epoch)
        request = group.request(
            BufferSelectRequest,
            step=step,
            anchors=tuple(get(k) for k in buffer.keys),
            rollouts=tuple(get(k) for k in rollouts),
            size=size,
            lookahead=tuple(lookahead),
            combined_order=tuple(i for i, _ in combined),
        )
        verdict = await ask(self.judge, request)
        details["manager_calls"] = 1
        chosen = check_selection(verdict, len(pool), size)
        details["manager_invalid"] = int(chosen is None)
        if chosen is None:
            return buffer
        kept = tuple(a for i, a in combined if i in chosen)
        return replace(buffer, anchors=kept)


def combined_order(buffer: AnchorBuffer, key_buckets: list[list[str]], epoch: int) -> list[tuple[int, Anchor]]:
    """(pool index, anchor) worst -> best over `buffer.keys + rollouts`: bucket C_p (rollouts
    ranked between a_p-1 and a_p, pool indices K, K+1, ... in bucket order) before anchor p."""
    K = buffer.size
    combined: list[tuple[int, Anchor]] = []
    r = K
    for p, bucket in enumerate(key_buckets):
        for key in bucket:
            combined.append((r, Anchor(key, "llm", epoch)))
            r += 1
        if p < K:
            combined.append((p, buffer.anchors[p]))
    return combined


def check_selection(verdict: Any, pool: int, size: int) -> set[int] | None:
    """The manager's pick: `size` distinct indices into anchors + rollouts; else None (invalid)."""
    if is_failure(verdict) or not isinstance(verdict, (list, tuple)):
        return None
    if any(isinstance(i, bool) or not isinstance(i, int) for i in verdict):
        return None
    chosen = set(verdict)
    if len(chosen) != size or len(verdict) != size or not all(0 <= i < pool for i in chosen):
        return None
    return chosen
