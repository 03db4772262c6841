"""RankBuffer: ranking rewards from a per-query buffer of ordered anchors (RankBuffer paper).

Per group (Algorithm 1, Appendix A):

1. The query's buffer is initialized on first sight: Nectar (Select_K0 of the group's
   references, worst -> best) or bootstrap (listwise ranking of this first group, whose
   rewards come from that ranking and which gets no maintenance; Sec. 3.2).
2. Coarse ranking (Eq. 6): one independent `CoarseRequest` per unique valid answer, all at
   once, gives its insertion position 0..K and so its bucket C_p (Eq. 7).
3. Fine ranking (Eq. 8): one `ListwiseRequest` per bucket of >= 2 answers, all at once.
   The complete order is the buckets' concatenation; rewards by Eq. 9-10 (base class).
4. Maintenance: Algorithm 2 (`anchor_buffer.update_buffer`), or the LLM manager (Appendix G).

So a group costs two judge rounds (coarse, fine), plus one for the LLM manager. Groups of
one step are judged concurrently; groups of the same query in one step run one after the
other, since each sees the buffer the previous one left.

Buckets hold unique answers: identical rollouts are judged once (one coarse call) and
share a place, and a bucket's size (for fine ranking, refinement and activity) counts
distinct answers. Invalid rollouts are never judged and lie in no bucket, so a group
without valid answers still counts as an inactive observation (Eq. 14: no interval got a rollout).

Failure policy: if a coarse call (or the bootstrap ranking) fails after the judge's
retries, the group is neutral and nothing about the query changes: no initialization, no
maintenance. If a fine (listwise) call fails, what was judged is kept: the answers of that
bucket share its place (one tie block, the same rank reward), the other buckets keep their
fine order, the failure is reported (`partial_failures` in the details, `rank/fine_fallbacks`),
and the buffer is not maintained from this group (an unordered bucket would pick anchors
by chance); a buffer first built from this group's references is kept. An LLM manager
failure or invalid selection leaves the buffer unchanged but keeps the group's rewards
(the ranking itself succeeded).

Soft placement (`soft_placement`, ours, not the paper's; off by default): the coarse requests
ask for a probability per position (`CoarseRequest.probabilities`; an LLM judge reads them from
the log-probabilities of the position token, at no extra call). Answers that share a bucket
and get no fine order (variant coarse_only, or a bucket whose fine call failed) are then
ordered by their expected position E[p] instead of a seeded shuffle or one tie block; answers
with equal E[p] (or no probabilities: counted in `details["soft_fallbacks"]`) still tie.
Buffer maintenance is unchanged (a failed fine call still skips it).

Per-group `details`: `bucket_sizes`, `coarse_position_mean` (position / K averaged over
valid rollouts), `coarse_calls`, `fine_calls`, `buffer_size`, `anchors_added` and
`anchors_pruned` ({source: count}), `bootstrap`, `maintained`, and for the manager
`manager_calls`, `manager_invalid`, and `listwise_display` (the audit of the fine and
bootstrap answers against their display order, `display_audit`). `step_metrics` turns them
into `buffer/...` and `rank/...` metrics (documented there).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._gc import paused_gc
from ..judging.protocol import Judge, ask, is_failure
from ..judging.requests import BufferSelectRequest, CoarseRequest, ListwiseRequest, SoftPosition
from ..judging.seeding import seeded_rng, text_id
from ..judging.subsample import select_endpoints
from .anchor_buffer import SOURCES, Anchor, AnchorBuffer, BufferTable, BufferUpdate, StoredBufferTable, update_buffer
from .anchor_checkpoint import CHECKPOINT_FOLDER, load_anchor_checkpoint, save_anchor_checkpoint
from .anchor_store import InMemoryAnchorStore, SQLiteAnchorStore
from .answers import AnswerFormat
from .base import Candidates, Group, GroupJudgingFailed, GroupResult, GroupRewardMethod, RankOutcome, require
from .display_audit import DETAILS_KEY, ask_listwise, check_reshuffle, new_tally, tally_metrics
from .state_files import METHOD_STATE_NAME, read_method_state
from .verdicts import check_order, check_position

INITS = ("nectar", "bootstrap")
#: dynamic = the paper's RankBuffer; static = RankBuffer* (maintained only in the epoch the
#: buffer was created, then frozen: Sec. 4.3); coarse_only and order_only are the Sec. 4.5
#: ablations of dynamic RankBuffer (no fine ranking / coarse prompt without anchor texts).
VARIANTS = ("dynamic", "static", "coarse_only", "order_only")
MANAGERS = (None, "llm", "llm_lookahead")
_STATE_FORMAT = "trl_rankreward.rank_buffer/1"


#: what `frozen_state` records per touched query: (buffer or None, look-ahead group or None)
_Saved = tuple[AnchorBuffer | None, dict[str, Any] | None]


@dataclass(frozen=True)
class AnchorView:
    """An anchor as `RankBufferReward.anchors()` shows it: with its text."""

    text: str
    source: str
    created_epoch: int
    inactive_epochs: int
    text_key: str


@dataclass
class _Ranking:
    """One group's coarse-to-fine result over unique-answer indices."""

    positions: list[int]
    buckets: list[list[int]]  # sigma_p, p = 0..K, worst -> best
    fine_calls: int
    unranked: frozenset[int] = frozenset()  # buckets whose fine call failed: one tie block each
    failures: tuple[str, ...] = ()  # the messages of those failed fine calls
    # Hooks for variants that rank with other calls (`rank_buffer_plus`); the paper's method leaves them unset.
    coarse_calls: int | None = None  # placement calls, when not one coarse call per answer
    order: list[int] | None = None  # the final order worst -> best, when not the buckets' concatenation
    extra: dict[str, Any] = field(default_factory=dict)  # more per-group details
    soft: list[SoftPosition | None] | None = None  # soft_placement: each answer's position probabilities

    def expected(self, u: int) -> float:
        """E[position] of answer `u` (its hard position without probabilities)."""
        soft = self.soft[u] if self.soft is not None else None
        return soft.expected if soft is not None else float(self.positions[u])


class RankBufferReward(GroupRewardMethod):
    """RankBuffer rank rewards (RankBuffer paper, Sec. 3, Algorithms 1-2, Appendices G-H).

    Args:
        judge: answers `CoarseRequest` and `ListwiseRequest`.
        k0: initial buffer size K0 (Select_K0, Appendix H); also the fixed size the LLM manager keeps.
        init: "nectar" (anchors from `Group.references`, best first) or "bootstrap".
        inactivity_epochs: H, epochs without a rollout next to an internal anchor before it is pruned.
        variant: one of `VARIANTS` (see there).
        manager: None (Algorithm 2), "llm" or "llm_lookahead" (Appendix G, `BufferSelectRequest`).
        manager_judge: judge for the manager's requests (default: `judge`).
        lambda_fmt, answer_format, format_reward: as in `GroupRewardMethod`.
        anchor_store: where anchor texts live (default: `InMemoryAnchorStore()`); with a
            persistent store (`SQLiteAnchorStore`) `state_dict()` holds keys only.
        seed: seeds the within-bucket order used for maintenance by coarse_only, which has no fine ranking.
        reshuffle_check: fraction of listwise calls also asked under another shuffle, to test whether
            the judge copies the display order (`display_audit`); 0 (default) sends no extra call.
        soft_placement: ask coarse calls for position probabilities and order answers of a bucket
            without a fine order by their expected position (module docstring; ours, off by default).
    """

    name = "rank_buffer"

    def __init__(
        self,
        judge: Judge,
        *,
        k0: int = 4,
        init: str = "nectar",
        inactivity_epochs: int = 3,
        variant: str = "dynamic",
        manager: str | None = None,
        manager_judge: Judge | None = None,
        lambda_fmt: float = 0.0,
        answer_format: AnswerFormat | None = None,
        format_reward: Callable[[str], float] | None = None,
        anchor_store=None,
        seed: int = 0,
        reshuffle_check: float = 0.0,
        soft_placement: bool = False,
    ):
        super().__init__(judge, lambda_fmt=lambda_fmt, answer_format=answer_format, format_reward=format_reward)
        if not (isinstance(k0, int) and k0 >= 2):
            raise ValueError(f"k0 must be an integer >= 2 (the paper uses 2, 4, 7), got {k0!r}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        if not (isinstance(inactivity_epochs, int) and inactivity_epochs >= 1):
            raise ValueError(f"inactivity_epochs (H) must be an integer >= 1, got {inactivity_epochs!r}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if manager not in MANAGERS:
            raise ValueError(f"manager must be one of {MANAGERS}, got {manager!r}")
        if manager is not None and variant == "static":
            raise ValueError(f"manager={manager!r} maintains the buffer, variant='static' freezes it; pick one")
        if manager is None and manager_judge is not None:
            raise ValueError("manager_judge is given but manager is None; set manager='llm' or 'llm_lookahead'")
        self.k0 = k0
        self.init = init
        self.inactivity_epochs = inactivity_epochs
        self.variant = variant
        self.manager = manager
        self.manager_judge = manager_judge or judge
        self.store = anchor_store if anchor_store is not None else InMemoryAnchorStore()
        self.seed = seed
        self.reshuffle_check = check_reshuffle(reshuffle_check)
        if not isinstance(soft_placement, bool):
            raise ValueError(f"soft_placement must be True or False, got {soft_placement!r}")
        self.soft_placement = soft_placement
        self._buffers = self._empty_table()
        self._pending: dict[str, dict[str, Any]] = {}  # llm_lookahead: last ranked group per query
        self._journals: list[dict[str, _Saved]] = []  # one per open frozen_state() block, innermost last

    # ------------------------------------------------------------------ public views
    def anchors(self, query_id: str) -> list[AnchorView]:
        """The buffer of `query_id` worst -> best (empty before it is initialized)."""
        buffer = self._buffers.get(query_id)
        if buffer is None:
            return []
        return [
            AnchorView(self.store.get(a.text_key), a.source, a.created_epoch, a.inactive_epochs, a.text_key)
            for a in buffer.anchors
        ]

    def buffer(self, query_id: str) -> AnchorBuffer | None:
        """The raw buffer structure of `query_id` (keys, epoch markers), or None."""
        return self._buffers.get(query_id)

    @property
    def judges(self) -> list[Judge]:
        return [self.judge] if self.manager_judge is self.judge else [self.judge, self.manager_judge]

    # ------------------------------------------------------------------ scoring
    async def score(self, groups: Sequence[Group], *, epoch: int, step: int) -> list[GroupResult]:
        """All queries concurrently; groups of one query in turn (each sees the updated buffer)."""
        chains: dict[str, list[int]] = {}
        for i, g in enumerate(groups):
            chains.setdefault(g.query_id, []).append(i)
        results: list[GroupResult | None] = [None] * len(groups)

        async def run_chain(indices: list[int]) -> None:
            for i in indices:
                results[i] = await self._score_one(groups[i], epoch=epoch, step=step)

        await asyncio.gather(*(run_chain(ix) for ix in chains.values()))
        self._flush()
        return results  # type: ignore[return-value]

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        qid, answers = group.query_id, candidates.answers
        old = self._buffers.get(qid)
        if old is None and self.init == "bootstrap":
            return await self._bootstrap(group, candidates, epoch=epoch, step=step)
        initial: tuple[Anchor, ...] = ()
        if old is None:
            old = self._nectar_buffer(group, epoch)
            initial = old.anchors
        details: dict[str, Any] = {"bootstrap": False}
        keys = [text_id(a) for a in answers]
        texts = dict(zip(keys, answers, strict=True))

        ranking_buffer = old  # look-ahead: the manager's delayed update comes before ranking
        pending = self._pending.get(qid)
        if self.manager == "llm_lookahead" and pending is not None and pending["epoch"] != epoch:
            ranking_buffer = await self._manage(group, old, pending["buckets"], answers, epoch, step, details)
        ranking = await self._rank(group, ranking_buffer, answers, step=step)
        key_buckets = [[keys[u] for u in bucket] for bucket in ranking.buckets]

        new, added, pruned = ranking_buffer, (), ()
        if ranking.unranked:  # a fine call failed: rank rewards from what was judged, no maintenance
            details["partial_failures"] = list(ranking.failures)
        elif self.manager == "llm":
            new = await self._manage(group, old, key_buckets, (), epoch, step, details, texts)
        elif self.manager is None and (self.variant != "static" or epoch == old.created_epoch):
            update = self._maintain(old, key_buckets, epoch)
            new, added, pruned = update.buffer, update.added, update.pruned
        if self.manager is not None:  # the manager keeps Anchor objects as they are
            added = tuple(a for a in new.anchors if all(a is not b for b in old.anchors))
            pruned = tuple(a for a in old.anchors if all(a is not b for b in new.anchors))

        # Commit (no await from here on): texts of new anchors first, then the structure.
        for anchor in added:
            if anchor.text_key in texts:  # look-ahead picks come from stored pending groups
                self.store.put(texts[anchor.text_key])
        if self.manager == "llm_lookahead":
            for key in keys:
                self.store.put(texts[key])
            self._touch(qid)
            self._pending[qid] = {"epoch": epoch, "buckets": key_buckets}
        self._touch(qid)
        self._buffers.set(qid, new)

        K, valid = ranking_buffer.size, [len(m) for m in candidates.members]
        if valid:  # position / K averaged over valid rollouts (duplicates count once each)
            positions = zip(valid, ranking.positions, strict=True)
            details["coarse_position_mean"] = sum(n * p / K for n, p in positions) / sum(valid)
        details.update(
            maintained=new is not old,
            bucket_sizes=[len(b) for b in ranking.buckets],
            coarse_calls=len(answers) if ranking.coarse_calls is None else ranking.coarse_calls,
            fine_calls=ranking.fine_calls,
            fine_fallbacks=len(ranking.unranked),
            buffer_size=new.size,
            anchors_added=dict(Counter(a.source for a in initial + tuple(added))),
            anchors_pruned=dict(Counter(a.source for a in pruned)),
        )
        details.update(ranking.extra)
        if ranking.soft is not None:
            details["soft_fallbacks"] = sum(s is None for s in ranking.soft)
        if self.variant == "coarse_only":
            return RankOutcome([blk for b in ranking.buckets if b for blk in self._tie_blocks(b, ranking)], details)
        if ranking.order is not None:
            return RankOutcome([[u] for u in ranking.order], details)
        blocks: list[list[int]] = []
        for p, bucket in enumerate(ranking.buckets):
            if p in ranking.unranked:
                blocks.extend(self._tie_blocks(bucket, ranking))
            else:
                blocks.extend([u] for u in bucket)
        return RankOutcome(blocks, details)

    def _tie_blocks(self, bucket: list[int], ranking: _Ranking) -> list[list[int]]:
        """A bucket without a fine order: one tie block, or with soft placement, blocks of equal
        expected position, worst -> best."""
        if not self.soft_placement:
            return [list(bucket)]
        blocks: list[list[int]] = []
        for u in sorted(bucket, key=ranking.expected):
            if blocks and ranking.expected(blocks[-1][-1]) == ranking.expected(u):
                blocks[-1].append(u)
            else:
                blocks.append([u])
        return blocks

    def _maintain(self, buffer: AnchorBuffer, key_buckets: list[list[str]], epoch: int) -> BufferUpdate:
        """Algorithm 2 (`anchor_buffer.update_buffer`); a variant may add to it."""
        return update_buffer(buffer, key_buckets, epoch, self.inactivity_epochs)

    def _nectar_buffer(self, group: Group, epoch: int) -> AnchorBuffer:
        """Algorithm 1, lines 5-7: Select_K0 of the references, worst -> best."""
        if not group.references:
            raise ValueError(
                f"RankBuffer init='nectar' needs ranked references for query {group.query_id!r} "
                "(dataset column `references`, best first), but the group has none; "
                "add references or use init='bootstrap'"
            )
        texts = select_endpoints(list(reversed(group.references)), self.k0)
        keys = [self.store.put(t) for t in texts]
        return AnchorBuffer.initial(keys, "nectar", epoch)

    async def _bootstrap(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        """Algorithm 1, lines 9-12: rank the first group listwise; its rewards come from that
        ranking and Select_K0 of it becomes the buffer; no maintenance on this group."""
        answers = candidates.answers
        order, tally = list(range(len(answers))), new_tally()
        if len(answers) >= 2:
            request = self._listwise(group, answers, step)
            (verdict,) = require([await ask_listwise(self.judge, request, tally, self.reshuffle_check)])
            order = check_order(verdict, len(answers))
        details: dict[str, Any] = {"bootstrap": True, "maintained": False, "bootstrap_calls": int(len(answers) >= 2)}
        details[DETAILS_KEY] = tally
        if answers:  # a group of only invalid rollouts cannot seed a buffer; the next one will
            keys = [self.store.put(answers[u]) for u in select_endpoints(order, self.k0)]
            buffer = AnchorBuffer.initial(keys, "bootstrap", epoch)
            self._touch(group.query_id)
            self._buffers.set(group.query_id, buffer)
            details.update(buffer_size=buffer.size, anchors_added={"bootstrap": buffer.size})
        return RankOutcome([[u] for u in order], details)

    # ------------------------------------------------------------------ judge rounds
    def _listwise(self, group: Group, texts: Sequence[str], step: int) -> ListwiseRequest:
        return group.request(ListwiseRequest, step=step, candidates=tuple(texts))

    async def _rank(self, group: Group, buffer: AnchorBuffer, answers: list[str], *, step: int) -> _Ranking:
        """Coarse round (one call per answer), then fine round (one per bucket of >= 2)."""
        anchors = tuple(self.store.get(k) for k in buffer.keys)
        K = len(anchors)
        coarse = [
            group.request(
                CoarseRequest,
                step=step,
                anchors=anchors,
                candidate=answer,
                show_anchor_text=self.variant != "order_only",
                probabilities=self.soft_placement,
            )
            for answer in answers
        ]
        verdicts = require(await _gather(self.judge, coarse))
        positions = [check_position(v, K) for v in verdicts]
        soft = [_soft(v, K) for v in verdicts] if self.soft_placement else None
        buckets: list[list[int]] = [[] for _ in range(K + 1)]
        for u, p in enumerate(positions):
            buckets[p].append(u)
        to_rank = [p for p, b in enumerate(buckets) if len(b) >= 2]
        if self.variant == "coarse_only":
            ranking = _Ranking(positions, buckets, 0, soft=soft)
            for p in to_rank:  # no fine information: a seeded order (or E[position]) picks maintenance anchors
                seeded_rng(self.seed, group.query_id, step, p).shuffle(buckets[p])
                if soft is not None:
                    buckets[p].sort(key=ranking.expected)
            return ranking
        requests = [self._listwise(group, [answers[u] for u in buckets[p]], step) for p in to_rank]
        unranked, failures, tally = set(), [], new_tally()
        verdicts = await asyncio.gather(*(ask_listwise(self.judge, r, tally, self.reshuffle_check) for r in requests))
        for p, verdict in zip(to_rank, verdicts, strict=True):
            try:
                buckets[p] = [buckets[p][j] for j in check_order(require([verdict])[0], len(buckets[p]))]
            except GroupJudgingFailed as exc:  # keep the coarse bucket as one tie block
                unranked.add(p)
                failures.append(str(exc))
        return _Ranking(
            positions,
            buckets,
            len(to_rank),
            frozenset(unranked),
            tuple(failures),
            extra={DETAILS_KEY: tally},
            soft=soft,
        )

    async def _manage(
        self,
        group: Group,
        buffer: AnchorBuffer,
        key_buckets: list[list[str]],
        lookahead: Sequence[str],
        epoch: int,
        step: int,
        details: dict[str, Any],
        texts: dict[str, str] | None = None,
    ) -> AnchorBuffer:
        """Appendix G: the manager picks `k0` of old anchors + ranked rollouts, shown with their
        combined worst -> best order C_0, a_1, C_1, ..., a_K, C_K (for look-ahead, the previous
        epoch's ranking); the picks are sorted by that order. Invalid: buffer unchanged."""
        texts = texts or {}  # this group's answers; anchors and look-ahead groups are in the store
        get = lambda k: texts[k] if k in texts else self.store.get(k)  # noqa: E731
        rollouts = [k for bucket in key_buckets for k in bucket]
        pool = buffer.keys + rollouts
        size = min(self.k0, len(pool))
        combined = _combined_order(buffer, key_buckets, epoch)
        request = group.request(
            BufferSelectRequest,
            step=step,
            anchors=tuple(get(k) for k in buffer.keys),
            rollouts=tuple(get(k) for k in rollouts),
            size=size,
            lookahead=tuple(lookahead),
            combined_order=tuple(i for i, _ in combined),
        )
        verdict = await ask(self.manager_judge, request)
        details["manager_calls"] = 1
        chosen = _check_selection(verdict, len(pool), size)
        details["manager_invalid"] = int(chosen is None)
        if chosen is None:
            return buffer
        kept = tuple(a for i, a in combined if i in chosen)
        return AnchorBuffer(kept, buffer.created_epoch, buffer.observed_epoch, buffer.left_epoch, buffer.right_epoch)

    # ------------------------------------------------------------------ metrics
    def step_metrics(self, results: Sequence[GroupResult]) -> dict[str, float]:
        """Base metrics plus (docs/metrics.md):

        - `buffer/count`, `buffer/size_mean`, `buffer/size_max`, `buffer/anchors_<source>`:
          over all buffers after this step;
        - `buffer/added_<source>`, `buffer/pruned_<source>`: anchors added / pruned this step;
        - `rank/coarse_position_mean`: mean normalized coarse position (position / K) over
          this step's ranked groups, the policy's progress against its own buffers;
        - `rank/coarse_calls_mean`, `rank/fine_calls_mean`: per judged group;
        - `rank/bucket_size_hist_<n>`: number of buckets holding n >= 1 answers;
        - `rank/bootstrap_groups`, `buffer/manager_invalid`;
        - `rank/fine_fallbacks`: buckets whose fine call failed and that kept one shared rank;
        - `rank/soft_fallbacks` (with `soft_placement`): placements that came without position
          probabilities (the server returned no log-probabilities) and were placed hard;
        - `rank/listwise_display_...` (and, with `reshuffle_check`, `rank/listwise_reshuffle_...`):
          the listwise answers audited against their display order (`display_audit.tally_metrics`).
        """
        out = super().step_metrics(results)
        out.update(self._buffers.stats())
        judged = [r.details for r in results if not r.neutral]
        added, pruned, hist = Counter(), Counter(), Counter()
        for d in judged:
            added.update(d.get("anchors_added", {}))
            pruned.update(d.get("anchors_pruned", {}))
            hist.update(n for n in d.get("bucket_sizes", ()) if n > 0)
        for source in SOURCES:
            out[f"buffer/added_{source}"] = float(added[source])
            out[f"buffer/pruned_{source}"] = float(pruned[source])
        for n, count in sorted(hist.items()):
            out[f"rank/bucket_size_hist_{n}"] = float(count)
        placed = [d["coarse_position_mean"] for d in judged if "coarse_position_mean" in d]
        if placed:
            out["rank/coarse_position_mean"] = sum(placed) / len(placed)
        ranked = [d for d in judged if "coarse_calls" in d]
        if ranked:
            out["rank/coarse_calls_mean"] = sum(d["coarse_calls"] for d in ranked) / len(ranked)
            out["rank/fine_calls_mean"] = sum(d["fine_calls"] for d in ranked) / len(ranked)
        out["rank/bootstrap_groups"] = float(sum(d.get("bootstrap", False) for d in judged))
        out["buffer/manager_invalid"] = float(sum(d.get("manager_invalid", 0) for d in judged))
        out["rank/fine_fallbacks"] = float(sum(d.get("fine_fallbacks", 0) for d in judged))
        if self.soft_placement:
            out["rank/soft_fallbacks"] = float(sum(d.get("soft_fallbacks", 0) for d in judged))
        out.update(tally_metrics((d.get(DETAILS_KEY) for d in judged), self.reshuffle_check))
        return out

    # ------------------------------------------------------------------ state
    @contextlib.contextmanager
    def frozen_state(self) -> Iterator[None]:
        """Score without keeping state changes, in O(queries touched) instead of O(all queries).

        A copy-on-write journal: before the first write to a query's buffer or look-ahead group
        inside the block, its old values (or their absence) are recorded; on exit, also on an
        exception, those are put back (through `BufferTable`, so its running totals follow).
        Buffers are immutable, so the old objects are the old state; `state_dict()` is never
        called. Anchor texts put into the store during the block stay there: the store is
        append-only and content-addressed, and `state_dict()` lists only texts a buffer or
        look-ahead group refers to, so they change nothing. Blocks nest.
        """
        journal: dict[str, _Saved] = {}
        self._journals.append(journal)
        try:
            yield
        finally:
            self._journals.pop()
            for qid, (buffer, pending) in journal.items():
                if buffer is None:
                    self._buffers.remove(qid)
                else:
                    self._buffers.set(qid, buffer)
                if pending is None:
                    self._pending.pop(qid, None)
                else:
                    self._pending[qid] = pending

    def _touch(self, qid: str) -> None:
        """Record `qid`'s buffer and look-ahead group in every open journal that lacks them; call before writing."""
        for journal in self._journals:
            if qid not in journal:
                journal[qid] = (self._buffers.get(qid), self._pending.get(qid))

    def _config(self) -> dict[str, Any]:
        return {"k0": self.k0, "init": self.init, "inactivity_epochs": self.inactivity_epochs,
                "variant": self.variant, "manager": self.manager}  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """Plain JSON-able state: config, look-ahead groups, and the buffers: their structures (keys,
        counters, epoch markers) and, for a non-persistent store, the referenced texts; with an SQLite
        store the structures are in the store (flushed now) and the state holds their totals only.
        Built with the garbage collector paused (`_gc.paused_gc`): linear time at 10^5 queries."""
        with paused_gc():
            state: dict[str, Any] = {
                "format": _STATE_FORMAT,
                "config": self._config(),
                "pending": {qid: dict(p) for qid, p in self._pending.items()},
            }
            if isinstance(self._buffers, StoredBufferTable):
                self._buffers.flush()
                state["buffers_stored"] = self._buffers.totals()
                return state
            state["buffers"] = {qid: b.to_state() for qid, b in self._buffers.items()}
            if not getattr(self.store, "persistent", False):
                state["texts"] = self.store.texts(sorted(self._referenced_keys(state["buffers"], state["pending"])))
        return state

    def export_buffers(self) -> dict[str, dict[str, Any]]:
        """Every query's buffer structure (`AnchorBuffer.to_state()`), e.g. to compare two runs."""
        return {qid: b.to_state() for qid, b in self._buffers.items()}

    def _flush(self) -> None:
        """Write this step's buffer changes to an SQLite store (no-op for in-memory buffers)."""
        if isinstance(self._buffers, StoredBufferTable):
            self._buffers.flush()

    def summary(self) -> dict[str, float]:
        """The buffers at the end: how many, their size, and their anchors by source."""
        return dict(self._buffers.stats())

    def save_state(self, directory: str) -> None:
        """The state file, plus, with an SQLite store, the store's part of the checkpoint (`anchors/`:
        text segments and a snapshot of the buffer structures; `anchor_checkpoint`), so the folder
        resumes on its own, e.g. on another machine or after a push to the Hub. The state file is
        written last: a folder without it is an interrupted save."""
        if isinstance(self.store, SQLiteAnchorStore):
            self._flush()
            save_anchor_checkpoint(self.store, directory)
        super().save_state(directory)

    def load_state(self, directory: str) -> None:
        """Restore the checkpoint's anchor texts and buffer structures into the store (if it is
        SQLite and the folder has them), then load the state file."""
        state = read_method_state(os.path.join(directory, METHOD_STATE_NAME), self.name)
        saved = os.path.isdir(os.path.join(directory, CHECKPOINT_FOLDER))
        if isinstance(self.store, SQLiteAnchorStore) and saved:
            load_anchor_checkpoint(self.store, directory, buffers="buffers_stored" in state)
        self.load_state_dict(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output exactly; checks the config and that every key's text exists."""
        if self._journals:
            raise RuntimeError(
                "RankBufferReward.load_state_dict was called inside frozen_state(), whose exit would undo "
                "only the block's own writes on top of the loaded state; load the state outside the block"
            )
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            got = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"Not a RankBufferReward state: expected format {_STATE_FORMAT!r}, got {got!r}")
        differ = {k: (v, state["config"].get(k)) for k, v in self._config().items() if state["config"].get(k) != v}
        if differ:
            raise ValueError(
                f"RankBuffer state was saved with other settings {{field: (now, saved)}} = {differ}; "
                "construct RankBufferReward with the saved settings to resume"
            )
        with paused_gc():
            self._load_buffers(state)

    def _load_buffers(self, state: dict[str, Any]) -> None:
        """`load_state_dict` after its checks: texts, key check, buffers (collector paused there)."""
        self._pending = {qid: {"epoch": p["epoch"], "buckets": [list(b) for b in p["buckets"]]}
                         for qid, p in state["pending"].items()}  # fmt: skip
        if "buffers_stored" in state:
            self._buffers = self._stored_table(state["buffers_stored"])
            return
        for text in state.get("texts", {}).values():
            self.store.put(text)
        missing = self.store.missing(self._referenced_keys(state["buffers"], state["pending"]))
        if missing:
            raise ValueError(
                f"{len(missing)} anchor text(s) referenced by the RankBuffer state are not in the anchor store "
                f"(first: {missing[0]}); pass the anchor_store the run used (e.g. its SQLite file)"
            )
        table = self._empty_table()
        for qid, b in state["buffers"].items():
            table.set(qid, AnchorBuffer.from_state(b))
        self._buffers = table
        self._flush()

    def _empty_table(self) -> BufferTable:
        """No buffers. With an SQLite store the buffer structures live in it too (memory holds a
        step's changes only), and a new table clears what an earlier run left there."""
        if isinstance(self.store, SQLiteAnchorStore):
            return StoredBufferTable(self.store, clear=True)
        return BufferTable()

    def _stored_table(self, totals: dict[str, Any]) -> StoredBufferTable:
        """The buffers of a state that keeps them in the SQLite store, checked against its totals."""
        if not isinstance(self.store, SQLiteAnchorStore):
            raise ValueError(
                "This RankBuffer state keeps its buffers in an SQLite anchor store, but this RankBufferReward has "
                f"{type(self.store).__name__}; construct it with SQLiteAnchorStore (anchor_store='sqlite')"
            )
        found = self.store.buffer_count()
        if found != totals["count"]:
            raise ValueError(
                f"The anchor store {getattr(self.store, 'path', '')} holds {found} buffers, but the RankBuffer state "
                f"counts {totals['count']}: they are not from the same checkpoint. Resume from the checkpoint folder "
                "(its anchors/ folder and reward_method_state.json belong together)"
            )
        return StoredBufferTable(self.store, totals)

    @staticmethod
    def _referenced_keys(buffers: dict[str, Any], pending: dict[str, Any]) -> set[str]:
        keys = {row[0] for b in buffers.values() for row in b["anchors"]}
        keys.update(k for p in pending.values() for bucket in p["buckets"] for k in bucket)
        return keys


def _soft(verdict: Any, K: int) -> SoftPosition | None:
    """The verdict's position probabilities, if the judge gave them for K + 1 positions."""
    if isinstance(verdict, SoftPosition) and len(verdict.probabilities) == K + 1:
        return verdict
    return None


async def _gather(judge: Judge, requests: Sequence[Any]) -> list[Any]:
    return list(await asyncio.gather(*(ask(judge, r) for r in requests)))


def _combined_order(buffer: AnchorBuffer, key_buckets: list[list[str]], epoch: int) -> list[tuple[int, Anchor]]:
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


def _check_selection(verdict: Any, pool: int, size: int) -> set[int] | None:
    """The manager's pick: `size` distinct indices into anchors + rollouts; else None (invalid)."""
    if is_failure(verdict) or not isinstance(verdict, (list, tuple)):
        return None
    if any(isinstance(i, bool) or not isinstance(i, int) for i in verdict):
        return None
    chosen = set(verdict)
    if len(chosen) != size or len(verdict) != size or not all(0 <= i < pool for i in chosen):
        return None
    return chosen
