"""RankBuffer: ranking rewards from a per-query buffer of ordered anchors (RankBuffer paper).

Per group (Algorithm 1, Appendix A):

1. The query's buffer is initialized on first sight (`buffer_init`, whose help says which rows take
   which): Select_K0 of the group's ranked references, worst -> best (the paper's Nectar references;
   source "references"), or bootstrap: a listwise ranking of this first group, whose rewards come from
   that ranking and which gets no maintenance (Sec. 3.2).
2. Coarse ranking (Eq. 6): one independent `CoarseRequest` per unique valid answer, all at
   once, gives its insertion position 0..K and so its bucket C_p (Eq. 7).
3. Fine ranking (Eq. 8): one `ListwiseRequest` per bucket of >= 2 answers, all at once.
   The complete order is the buckets' concatenation; rewards by Eq. 9-10 (base class).
4. Maintenance: Algorithm 2 (`anchor_buffer.update_buffer`), or the LLM manager (Appendix G).

The module is the algorithm's frame; its parts are their own modules: the options
(`RankBufferOptions`, here), the ranking strategy (`ranking_strategy`: steps 2-3, the
extension point `rank_buffer_plus` uses), the buffer manager (`buffer_manager`: step 4),
and the state (`query_buffers`, over an `anchor_store.AnchorStore`).

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

Per-group `details`: `bucket_sizes`, `coarse_position_mean` (position / K averaged over
valid rollouts), `coarse_calls`, `fine_calls`, `buffer_size`, `anchors_added` and
`anchors_pruned` ({source: count}), `bootstrap`, `maintained`, and for the manager
`manager_calls`, `manager_invalid`, and `listwise_display` (the audit of the fine and
bootstrap answers against their display order, `display_audit`). `rank_buffer_metrics` makes
them and turns them into the `buffer/...` and `rank/...` metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._gc import paused_gc
from ..judging.protocol import Judge
from ..judging.seeding import text_id
from ..judging.subsample import select_endpoints
from .anchor_buffer import Anchor, AnchorBuffer, current_name
from .anchor_store import AnchorStore, InMemoryAnchorStore
from .base import Candidates, Group, GroupResult, GroupRewardMethod, RankOutcome, RunContext, require
from .buffer_manager import BufferManager, LLMManager, RuleManager, changes
from .display_audit import DETAILS_KEY, RESHUFFLE_CHECK_HELP, ask_listwise, check_reshuffle, new_tally
from .options import DataNeeds, MethodOptions, check_int
from .query_buffers import QueryBuffers
from .rank_buffer_metrics import buffer_step_metrics, ranked_details
from .ranking_strategy import CoarseToFine, RankingStrategy, listwise_request
from .sqlite_anchor_store import SQLiteAnchorStore
from .state_files import METHOD_STATE_NAME, read_method_state
from .verdicts import check_order

INITS = ("auto", "references", "bootstrap")
#: dynamic = the paper's RankBuffer; static = RankBuffer* (maintained only in the epoch the
#: buffer was created, then frozen: Sec. 4.3); coarse_only and order_only are the Sec. 4.5
#: ablations of dynamic RankBuffer (no fine ranking / coarse prompt without anchor texts).
VARIANTS = ("dynamic", "static", "coarse_only", "order_only")
MANAGERS = ("llm", "llm_lookahead")
ANCHOR_STORES = ("sqlite", "memory")
#: the `format` of a saved RankBuffer state (checkpoints; `buffer-report` reads it)
STATE_FORMAT = "trl_rankreward.rank_buffer/1"


@dataclass
class AnchorBufferOptions(MethodOptions):
    """The options of every method that ranks against a per-query anchor buffer (`RankBufferOptions`,
    `rank_buffer_plus.RankBufferPlusOptions`): the first buffer, pruning, the anchor store, the reshuffle check."""

    lambda_fmt: float = field(
        default=0.2, metadata={"help": "Weight of the format reward (the paper uses 0.2, Section 4.1)."}
    )
    k0: int = field(
        default=4,
        metadata={"help": "Initial buffer size K0 (paper: 2, 4 or 7; anchors are subsampled keeping both ends)."},
    )
    buffer_init: str = field(
        default="auto",
        metadata={
            "help": "Where the first buffer comes from: 'references' (K0 of the query's ranked `references`, which "
            "every row must have: the paper's RankBuffer), 'bootstrap' (listwise ranking of the query's first group: "
            "RankBuffer-Bootstrap) or 'auto' (references for a query whose row has them, bootstrap otherwise).",
            "choices": list(INITS),
        },
    )
    inactivity_epochs: int = field(
        default=3, metadata={"help": "H: an anchor inactive for H epochs is pruned (Algorithm 2)."}
    )
    reshuffle_check: float = field(default=0.0, metadata={"help": RESHUFFLE_CHECK_HELP})
    anchor_store: str = field(
        default="sqlite",
        metadata={
            "help": "'sqlite': anchor texts and buffer structures in an SQLite file, snapshotted into every "
            "checkpoint; 'memory': both inside every checkpoint's state file (small runs).",
            "choices": list(ANCHOR_STORES),
        },
    )
    anchor_store_path: str | None = field(
        default=None,
        metadata={
            "help": "SQLite anchor file; default {output_dir}/anchors.sqlite in a trainer, memory outside one. A "
            "resume restores it from the checkpoint's own snapshot."
        },
    )

    def __post_init__(self):
        self.buffer_init = current_name(self.buffer_init)
        super().__post_init__()
        check_int("k0", self.k0, 2, " (the paper uses 2, 4, 7)")
        check_int("inactivity_epochs (H)", self.inactivity_epochs, 1)
        self.reshuffle_check = check_reshuffle(self.reshuffle_check)
        if self.anchor_store_path is not None and self.anchor_store != "sqlite":
            raise ValueError(
                f"anchor_store_path={self.anchor_store_path!r} is for the SQLite store, but anchor_store="
                f"{self.anchor_store!r}; set anchor_store='sqlite' or drop anchor_store_path"
            )

    def data_needs(self) -> DataNeeds:
        """`buffer_init="references"` needs each row's ranked `references` (`auto` uses them where a row has them);
        "bootstrap" takes the first buffer's k0 anchors from the query's first group, so it needs G >= k0."""
        references = 1 if self.buffer_init == "references" else 0
        if self.buffer_init != "bootstrap" or self.k0 <= 2:
            return DataNeeds(references=references)
        why = f"with buffer_init='bootstrap' takes its first buffer's k0={self.k0} anchors from a query's first group"
        return DataNeeds(references=references, min_group_size=self.k0, group_size_why=why)

    def open_store(self) -> AnchorStore:
        """The anchor store these options name (memory when no path is known: `anchor_store_path`)."""
        if self.anchor_store == "sqlite" and self.anchor_store_path is not None:
            return SQLiteAnchorStore(self.anchor_store_path)
        return InMemoryAnchorStore()


@dataclass
class RankBufferOptions(AnchorBufferOptions):
    """RankBuffer's options, the one source of their defaults (`RankBufferGRPOConfig` inherits them): the
    buffer's options (`AnchorBufferOptions`) plus the paper's variants and the LLM buffer managers."""

    buffer_variant: str = field(
        default="dynamic",
        metadata={
            "help": "'dynamic' (Algorithm 2 maintenance), 'static' (frozen after the first epoch), 'coarse_only' "
            "(no fine ranking), 'order_only' (coarse prompt without anchor texts).",
            "choices": list(VARIANTS),
        },
    )
    buffer_manager: str | None = field(
        default=None,
        metadata={
            "help": "Replace Algorithm 2 with the judge choosing the buffer (Appendix G): 'llm' or 'llm_lookahead'.",
            "choices": list(MANAGERS),
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.buffer_manager is not None and self.buffer_variant == "static":
            raise ValueError(
                f"buffer_manager={self.buffer_manager!r} maintains the buffer but buffer_variant='static' freezes it; "
                "pick one"
            )


@dataclass(frozen=True)
class AnchorView:
    """An anchor as `RankBufferReward.anchors()` shows it: with its text."""

    text: str
    source: str
    created_epoch: int
    inactive_epochs: int
    text_key: str


class RankBufferReward(GroupRewardMethod):
    """RankBuffer rank rewards (RankBuffer paper, Sec. 3, Algorithms 1-2, Appendices G-H).

    Args:
        judge: answers `CoarseRequest` and `ListwiseRequest` (and the manager's `BufferSelectRequest`).
        options: a `RankBufferOptions`, or its fields as keywords, not both.
        answer_format, format_reward, seed: as in `GroupRewardMethod`; the seed orders coarse_only's buckets
            for maintenance (that variant has no fine ranking).
        store: the anchor store object (`anchor_store.AnchorStore`), instead of the one the options
            name; with an SQLite store `state_dict()` holds keys and totals only.
        manager_judge: judge for the LLM manager's requests (default: `judge`).

    A variant ranks or maintains differently by overriding `make_ranking` (a `RankingStrategy`)
    and `make_manager` (a `BufferManager`), as `rank_buffer_plus` does.

    Example: `RankBufferReward(judge, k0=4, buffer_init="bootstrap")`.
    """

    name = "rank_buffer"
    options_class = RankBufferOptions

    def __init__(
        self,
        judge: Judge,
        options: RankBufferOptions | None = None,
        *,
        store: AnchorStore | None = None,
        manager_judge: Judge | None = None,
        **kwargs: Any,
    ):
        super().__init__(judge, options, **kwargs)
        if manager_judge is not None and getattr(self.options, "buffer_manager", None) is None:
            raise ValueError(
                "manager_judge is given but buffer_manager is None; set buffer_manager='llm' or 'llm_lookahead'"
            )
        self.manager_judge = manager_judge or judge
        self.store = store if store is not None else self.options.open_store()
        self.ranking = self.make_ranking()
        self.manager = self.make_manager()
        self.buffers = QueryBuffers(self.store)

    @classmethod
    def for_run(cls, judge: Judge, options: AnchorBufferOptions, run: RunContext) -> RankBufferReward:
        """The trainer's RankBuffer: the run's seed and answer format; with `anchor_store="sqlite"` and no
        path, the anchors live in `{output_dir}/anchors.sqlite`."""
        if options.anchor_store == "sqlite" and options.anchor_store_path is None and run.output_dir:
            options = replace(options, anchor_store_path=os.path.join(run.output_dir, "anchors.sqlite"))
        return super().for_run(judge, options, run)

    def make_ranking(self) -> RankingStrategy:
        """How groups are ranked: the paper's coarse and fine rounds, per `buffer_variant`."""
        variant = self.options.buffer_variant
        return CoarseToFine(self.judge, fine=variant != "coarse_only", show_anchor_text=variant != "order_only",
                            seed=self.seed, reshuffle_check=self.options.reshuffle_check)  # fmt: skip

    def make_manager(self) -> BufferManager:
        """How buffers change: Algorithm 2 (frozen for variant static), or the LLM manager."""
        o = self.options
        if o.buffer_manager is None:
            return RuleManager(o.inactivity_epochs, static=o.buffer_variant == "static")
        return LLMManager(self.manager_judge, o.k0, lookahead=o.buffer_manager == "llm_lookahead")

    # ------------------------------------------------------------------ public views
    def anchors(self, query_id: str) -> list[AnchorView]:
        """The buffer of `query_id` worst -> best (empty before it is initialized)."""
        buffer = self.buffers.get(query_id)
        if buffer is None:
            return []
        return [
            AnchorView(self.store.get(a.text_key), a.source, a.created_epoch, a.inactive_epochs, a.text_key)
            for a in buffer.anchors
        ]

    def buffer(self, query_id: str) -> AnchorBuffer | None:
        """The raw buffer structure of `query_id` (keys, epoch markers), or None."""
        return self.buffers.get(query_id)

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
        self.buffers.table.flush()
        return results  # type: ignore[return-value]

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        qid, answers = group.query_id, candidates.answers
        old = self.buffers.get(qid)
        init = self.options.buffer_init
        if old is None and (init == "bootstrap" or (init == "auto" and not group.references)):
            return await self._bootstrap(group, candidates, epoch=epoch, step=step)
        initial: tuple[Anchor, ...] = ()
        if old is None:
            old = self._reference_buffer(group, epoch)
            initial = old.anchors
        details: dict[str, Any] = {"bootstrap": False}
        keys = [text_id(a) for a in answers]
        texts = dict(zip(keys, answers, strict=True))
        get = lambda k: texts[k] if k in texts else self.store.get(k)  # noqa: E731
        when = {"epoch": epoch, "step": step, "details": details}

        pending = self.buffers.pending(qid)
        ranked = await self.manager.before_ranking(group, old, pending, answers, get, **when)
        ranking = await self.ranking.rank(group, [self.store.get(k) for k in ranked.keys], answers, step=step)
        key_buckets = [[keys[u] for u in bucket] for bucket in ranking.buckets]
        if ranking.unranked:  # a fine call failed: rank rewards from what was judged, no maintenance
            details["partial_failures"] = list(ranking.failures)
            update = changes(old, ranked)
        else:
            update = await self.manager.after_ranking(group, old, ranked, key_buckets, get, **when)

        # Commit (no await from here on): texts of new anchors first, then the structure.
        for anchor in update.added:
            if anchor.text_key in texts:  # look-ahead picks come from stored pending groups
                self.store.put(texts[anchor.text_key])
        if self.manager.lookahead:
            for key in keys:
                self.store.put(texts[key])
            self.buffers.set_pending(qid, epoch, key_buckets)
        self.buffers.set(qid, update.buffer)
        details.update(ranked_details(candidates, ranking, ranked, old, update, initial))
        return RankOutcome(ranking.blocks(), details)

    def _reference_buffer(self, group: Group, epoch: int) -> AnchorBuffer:
        """Algorithm 1, lines 5-7: Select_K0 of the references, worst -> best."""
        if not group.references:
            raise ValueError(
                f"RankBuffer buffer_init='references' needs ranked references for query {group.query_id!r} "
                "(dataset column `references`, best first), but the group has none; "
                "add references, or set buffer_init='auto' (the first group where a query has none) or 'bootstrap'"
            )
        texts = select_endpoints(list(reversed(group.references)), self.options.k0)
        keys = [self.store.put(t) for t in texts]
        return AnchorBuffer.initial(keys, "references", epoch)

    async def _bootstrap(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        """Algorithm 1, lines 9-12: rank the first group listwise; its rewards come from that
        ranking and Select_K0 of it becomes the buffer; no maintenance on this group."""
        answers = candidates.answers
        order, tally = list(range(len(answers))), new_tally()
        if len(answers) >= 2:
            request = listwise_request(group, answers, step)
            (verdict,) = require([await ask_listwise(self.judge, request, tally, self.options.reshuffle_check)])
            order = check_order(verdict, len(answers))
        details: dict[str, Any] = {"bootstrap": True, "maintained": False, "bootstrap_calls": int(len(answers) >= 2)}
        details[DETAILS_KEY] = tally
        if answers:  # a group of only invalid rollouts cannot seed a buffer; the next one will
            keys = [self.store.put(answers[u]) for u in select_endpoints(order, self.options.k0)]
            buffer = AnchorBuffer.initial(keys, "bootstrap", epoch)
            self.buffers.set(group.query_id, buffer)
            details.update(buffer_size=buffer.size, anchors_added={"bootstrap": buffer.size})
        return RankOutcome([[u] for u in order], details)

    # ------------------------------------------------------------------ metrics
    def step_metrics(self, results: Sequence[GroupResult]) -> dict[str, float]:
        """Base metrics plus the buffers' statistics and RankBuffer's `buffer/...` and `rank/...`
        numbers over this step's judged groups (`rank_buffer_metrics.buffer_step_metrics`)."""
        out = super().step_metrics(results)
        out.update(self.buffers.table.stats())
        judged = [r.details for r in results if not r.neutral]
        out.update(buffer_step_metrics(judged, self.options.reshuffle_check))
        return out

    # ------------------------------------------------------------------ state
    def frozen_state(self) -> contextlib.AbstractContextManager[None]:
        """Score without keeping state changes, in O(queries touched) instead of O(all queries)
        (`QueryBuffers.frozen`); `state_dict()` is never called. Blocks nest."""
        return self.buffers.frozen()

    def _config(self) -> dict[str, Any]:
        """The options a state must have been saved with (the state file's `config`, with its own key names)."""
        o = self.options
        return {"k0": o.k0, "init": o.buffer_init, "inactivity_epochs": o.inactivity_epochs,
                "variant": o.buffer_variant, "manager": getattr(o, "buffer_manager", None)}  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """Plain JSON-able state: config, look-ahead groups, and the buffers: their structures (keys,
        counters, epoch markers) and, for a store that keeps no buffers, the referenced texts; with an
        SQLite store the structures are in the store (flushed now) and the state holds their totals only.
        Built with the garbage collector paused (`_gc.paused_gc`): linear time at 10^5 queries."""
        with paused_gc():
            return {"format": STATE_FORMAT, "config": self._config(), **self.buffers.state()}

    def export_buffers(self) -> dict[str, dict[str, Any]]:
        """Every query's buffer structure (`AnchorBuffer.to_state()`), e.g. to compare two runs."""
        return {qid: b.to_state() for qid, b in self.buffers.table.items()}

    def summary(self) -> dict[str, float]:
        """The buffers at the end: how many, their size, and their anchors by source."""
        return self.buffers.table.stats()

    def save_state(self, directory: str) -> None:
        """The store's part of the checkpoint (`AnchorStore.save_checkpoint`; SQLite: `anchors/`, text
        segments and a snapshot of the buffer structures), so the folder resumes on its own, e.g. on
        another machine or after a push to the Hub; then the state file, last: a folder without it is
        an interrupted save."""
        self.buffers.table.flush()
        self.store.save_checkpoint(directory)
        super().save_state(directory)

    def load_state(self, directory: str) -> None:
        """Restore the store's part of the checkpoint (with the buffer structures when the state keeps
        them in the store), then load the state file."""
        state = read_method_state(os.path.join(directory, METHOD_STATE_NAME), self.name)
        self.store.load_checkpoint(directory, buffers="buffers_stored" in state)
        self.load_state_dict(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output exactly; checks the config and that every key's text exists."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            got = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"Not a RankBufferReward state: expected format {STATE_FORMAT!r}, got {got!r}")
        saved = {**state["config"], "init": current_name(state["config"].get("init"))}
        differ = {k: (v, saved.get(k)) for k, v in self._config().items() if saved.get(k) != v}
        if differ:
            raise ValueError(
                f"RankBuffer state was saved with other settings {{field: (now, saved)}} = {differ}; "
                "construct RankBufferReward with the saved settings to resume"
            )
        self.buffers.load(state)
