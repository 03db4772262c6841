"""RankBuffer: ranking rewards from a per-query buffer of ordered anchors (RankBuffer paper), and
`ListwiseGroupReward`, its listwise ranking used alone.

Per group (Algorithm 1, Appendix A):

1. The query's buffer is initialized on first sight (`buffer_init`): Select_K0 of the group's ranked
   references, worst -> best, or bootstrap: a listwise ranking of this first group, whose rewards come
   from that ranking and which gets no maintenance (Sec. 3.2).
2. Coarse ranking (Eq. 6): one `CoarseRequest` per unique valid answer gives its insertion position
   0..K and so its bucket C_p (Eq. 7).
3. Fine ranking (Eq. 8): one `ListwiseRequest` per bucket of >= 2 answers; the order is the buckets'
   concatenation, rewards by Eq. 9-10 (base class).
4. Maintenance: Algorithm 2 (`anchor_buffer.update_buffer`), or the LLM manager (Appendix G).

Groups of one query in one step run in turn. Buckets hold unique answers; invalid rollouts lie in none.

Failure policy: a failed coarse call (or bootstrap ranking) makes the group neutral and changes nothing
about the query. A failed fine call keeps its bucket as one tie block, is reported (`partial_failures`,
`rank/fine_fallbacks`) and skips maintenance (an unordered bucket would pick anchors by chance). A failed
or invalid LLM-manager selection leaves the buffer unchanged and the rewards as ranked. A verdict of the
wrong shape is a failure of kind `invalid`, never a made-up order.

The display audit: does the judge rank, or copy the seeded shuffle it was shown (App. E)? Per answer over
n >= 3 candidates it tallies *copy* (the display order or its reverse; 2 / n! by chance) and *tau* (Kendall
tau with the display: ~0 honest, +-1 copying). `reshuffle_check=p` also asks a seeded fraction p of listwise
requests as a *twin* in another display order and compares the answers by Kendall tau (rewards unchanged).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._gc import paused_gc
from ..judging.quality_judge import select_endpoints
from ..judging.rendering import display_order
from ..judging.requests import (
    BufferSelectRequest,
    CoarseRequest,
    Judge,
    JudgeFailure,
    ListwiseRequest,
    ask,
    seeded_rng,
    text_id,
)
from .anchor_buffer import (
    SOURCES,
    Anchor,
    AnchorBuffer,
    AnchorStore,
    BufferUpdate,
    InMemoryAnchorStore,
    QueryBuffers,
    SQLiteAnchorStore,
    checked_pending,
    update_buffer,
)
from .base import (
    Candidates,
    Group,
    GroupJudgingFailed,
    GroupResult,
    GroupRewardMethod,
    RankOutcome,
    RunContext,
    require,
)
from .options import DataNeeds, MethodOptions, check_int, option
from .state_files import METHOD_STATE_NAME, read_method_state

#: the `format` of a saved RankBuffer state (checkpoints; `buffer-report` reads it)
STATE_FORMAT = "trl_rankreward.rank_buffer/1"
#: key of the per-group tally in `GroupResult.details`
DETAILS_KEY = "listwise_display"
#: the help of every method's `reshuffle_check` option (checked by `check_reshuffle`)
RESHUFFLE_CHECK_HELP = (
    "Fraction of listwise calls also asked under another display shuffle, to test whether the judge copies the "
    "displayed order (`rank/listwise_reshuffle_agreement`); extra judge calls, rewards unchanged."
)
_MIN_CANDIDATES = 3


@dataclass
class AnchorBufferOptions(MethodOptions):
    """The options of every method that ranks against a per-query anchor buffer."""

    lambda_fmt: float = option(0.2, "Weight of the format reward (the paper uses 0.2, Section 4.1).")
    k0: int = option(4, "Initial buffer size K0 (paper: 2, 4 or 7; anchors are subsampled keeping both ends).")
    buffer_init: str = option(
        "auto",
        "Where the first buffer comes from: 'references' (K0 of the query's ranked `references`, which "
        "every row must have: the paper's RankBuffer), 'bootstrap' (listwise ranking of the query's first group: "
        "RankBuffer-Bootstrap) or 'auto' (references for a query whose row has them, bootstrap otherwise).",
        choices=["auto", "references", "bootstrap"],
    )
    inactivity_epochs: int = option(3, "H: an anchor inactive for H epochs is pruned (Algorithm 2).")
    reshuffle_check: float = option(0.0, RESHUFFLE_CHECK_HELP)
    anchor_store: str = option(
        "sqlite",
        "'sqlite': anchor texts and buffer structures in an SQLite file, snapshotted into every "
        "checkpoint; 'memory': both inside every checkpoint's state file (small runs).",
        choices=["sqlite", "memory"],
    )
    anchor_store_path: str | None = option(
        None,
        "SQLite anchor file; default {output_dir}/anchors.sqlite in a trainer, memory outside one. A "
        "resume restores it from the checkpoint's own snapshot.",
    )

    def __post_init__(self):
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
        references = 1 if self.buffer_init == "references" else 0
        if self.buffer_init != "bootstrap" or self.k0 <= 2:
            return DataNeeds(references=references)
        why = f"with buffer_init='bootstrap' takes its first buffer's k0={self.k0} anchors from a query's first group"
        return DataNeeds(references=references, min_group_size=self.k0, group_size_why=why)


@dataclass
class RankBufferOptions(AnchorBufferOptions):
    """RankBuffer's options: the buffer's, the paper's variants and the LLM buffer managers."""

    buffer_variant: str = option(
        "dynamic",
        "'dynamic' (Algorithm 2 maintenance), 'static' (frozen after the first epoch), 'coarse_only' "
        "(no fine ranking), 'order_only' (coarse prompt without anchor texts).",
        choices=["dynamic", "static", "coarse_only", "order_only"],
    )
    buffer_manager: str | None = option(
        None,
        "Replace Algorithm 2 with the judge choosing the buffer (Appendix G): 'llm' or 'llm_lookahead'.",
        choices=["llm", "llm_lookahead"],
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
    """RankBuffer rank rewards (RankBuffer paper, Sec. 3, Algorithms 1-2, Appendices G-H). `store`: an
    `AnchorStore` instead of the one the options name; `manager_judge`: the LLM manager's judge (default
    `judge`). A variant overrides `make_ranking` and `make_manager`, as `rank_buffer_plus` does."""

    name = "rank_buffer"
    options_class = RankBufferOptions
    citation = """@misc{yang2026rankbuffer,
    title  = {{RankBuffer: Efficient Ranking-Based Rewards for Open-Ended Generation}},
    author = {Zixuan Yang and Yiqun Chen and Qi Liu and Wei Yang and Erhan Zhang and Liyi Chen and Qimeng Wang
              and Yan Gao and Jiaxin Mao},
    year   = 2026,
}"""

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
        if store is None:
            path = self.options.anchor_store_path if self.options.anchor_store == "sqlite" else None
            store = InMemoryAnchorStore() if path is None else SQLiteAnchorStore(path)
        self.store = store
        self.ranking = self.make_ranking()
        self.manager = self.make_manager()
        self.buffers = QueryBuffers(self.store)

    @classmethod
    def for_run(cls, judge: Judge, options: AnchorBufferOptions, run: RunContext) -> RankBufferReward:
        """With `anchor_store="sqlite"` and no path, the anchors live in `{output_dir}/anchors.sqlite`."""
        if options.anchor_store == "sqlite" and options.anchor_store_path is None and run.output_dir:
            options = replace(options, anchor_store_path=os.path.join(run.output_dir, "anchors.sqlite"))
        return super().for_run(judge, options, run)

    def make_ranking(self) -> RankingStrategy:
        variant = self.options.buffer_variant
        return CoarseToFine(self.judge, fine=variant != "coarse_only", show_anchor_text=variant != "order_only",
                            seed=self.seed, reshuffle_check=self.options.reshuffle_check)  # fmt: skip

    def make_manager(self) -> BufferManager:
        o = self.options
        if o.buffer_manager is None:
            return RuleManager(o.inactivity_epochs, static=o.buffer_variant == "static")
        return LLMManager(self.manager_judge, o.k0, lookahead=o.buffer_manager == "llm_lookahead")

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

        # Commit (no await from here on): texts of new anchors first (look-ahead picks are stored), then the structure.
        new = [texts[a.text_key] for a in update.added if a.text_key in texts]
        self.store.put_many(new + answers if self.manager.lookahead else new)
        if self.manager.lookahead:
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
        return AnchorBuffer.initial(self.store.put_many(texts), "references", epoch)

    async def _bootstrap(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        """Algorithm 1, lines 9-12: rank the first group listwise; Select_K0 of it becomes the buffer."""
        answers, tally = candidates.answers, new_tally()
        order = await order_all(self.judge, group, answers, tally, self.options.reshuffle_check, step=step)
        calls = int(len(answers) >= 2)
        details: dict[str, Any] = {"bootstrap": True, "maintained": False, "bootstrap_calls": calls, DETAILS_KEY: tally}
        if answers:  # a group of only invalid rollouts cannot seed a buffer; the next one will
            keys = self.store.put_many(answers[u] for u in select_endpoints(order, self.options.k0))
            buffer = AnchorBuffer.initial(keys, "bootstrap", epoch)
            self.buffers.set(group.query_id, buffer)
            details.update(buffer_size=buffer.size, anchors_added={"bootstrap": buffer.size})
        return RankOutcome([[u] for u in order], details)

    def step_metrics(self, results: Sequence[GroupResult]) -> dict[str, float]:
        """The base metrics, the buffers' totals, and the `buffer/...` and `rank/...` of the judged groups."""
        out = super().step_metrics(results)
        out.update(self.buffers.table.stats())
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
        out.update(tally_metrics((d.get(DETAILS_KEY) for d in judged), self.options.reshuffle_check))
        return out

    def frozen_state(self) -> contextlib.AbstractContextManager[None]:
        """`QueryBuffers.frozen`: O(queries touched), `state_dict()` never called."""
        return self.buffers.frozen()

    def _config(self) -> dict[str, Any]:
        """The options a state must have been saved with (the state file's `config`)."""
        o = self.options
        return {"k0": o.k0, "init": o.buffer_init, "inactivity_epochs": o.inactivity_epochs,
                "variant": o.buffer_variant, "manager": getattr(o, "buffer_manager", None)}  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """Config, look-ahead groups and buffers (`QueryBuffers.state`); GC paused: linear at 10^5 queries."""
        with paused_gc():
            return {"format": STATE_FORMAT, "config": self._config(), **self.buffers.state()}

    def query_state(self, query_ids: Sequence[str]) -> dict[str, Any]:
        """Those queries' buffers, look-ahead groups and anchor texts (`QueryBuffers.export`)."""
        return self.buffers.export(query_ids)

    def merge_query_state(self, state: dict[str, Any]) -> None:
        self.buffers.merge(state)

    def export_buffers(self) -> dict[str, dict[str, Any]]:
        """Every query's buffer structure (`AnchorBuffer.to_state()`), e.g. to compare two runs."""
        return {qid: b.to_state() for qid, b in self.buffers.table.items()}

    def summary(self) -> dict[str, float]:
        """The buffers at the end: how many, their size, and their anchors by source."""
        return self.buffers.table.stats()

    def save_state(self, directory: str) -> None:
        """The store's part of the checkpoint (`AnchorStore.save_checkpoint`), so the folder resumes on its own;
        then the state file, last: a folder without it is an interrupted save."""
        self.buffers.table.flush()
        self.store.save_checkpoint(directory)
        super().save_state(directory)

    def load_state(self, directory: str) -> None:
        path = os.path.join(directory, METHOD_STATE_NAME)
        state = read_method_state(path, self.name)
        self._check_state(state, path)  # before the store takes anything from the checkpoint
        self.store.load_checkpoint(directory, buffers="buffers_stored" in state)
        self.buffers.load(state, path)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output exactly; checks the config and that every key's text exists."""
        self._check_state(state)
        self.buffers.load(state)

    def _check_state(self, state: dict[str, Any], source: str = "the RankBuffer state") -> None:
        """The state's format, its settings (they must be this method's) and its look-ahead groups."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            got = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"Not a RankBufferReward state: expected format {STATE_FORMAT!r}, got {got!r}")
        saved = state["config"]
        differ = {k: (v, saved.get(k)) for k, v in self._config().items() if saved.get(k) != v}
        if differ:
            raise ValueError(
                f"RankBuffer state was saved with other settings {{field: (now, saved)}} = {differ}; "
                "construct RankBufferReward with the saved settings to resume"
            )
        checked_pending(source, state)


# -------- ranking a group: coarse placement, listwise fine ranking (steps 2-3) -------------------------------
@dataclass
class Ranking:
    """One group's ranking over unique-answer indices: `positions[u]` in 0..K, `buckets[p]` worst -> best;
    `unranked`: buckets whose fine call failed (one tie block each); `ties`: every bucket is one tie block;
    `coarse_calls`: when not one per answer; `order`: when not the buckets' concatenation."""

    positions: list[int]
    buckets: list[list[int]]
    fine_calls: int
    unranked: frozenset[int] = frozenset()
    failures: tuple[str, ...] = ()
    ties: bool = False
    coarse_calls: int | None = None
    order: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def blocks(self) -> list[list[int]]:
        """Tie blocks worst -> best."""
        if self.order is not None and not self.ties:
            return [[u] for u in self.order]
        blocks: list[list[int]] = []
        for p, bucket in enumerate(self.buckets):
            tied = self.ties or p in self.unranked
            blocks.extend(([list(bucket)] if bucket else []) if tied else [[u] for u in bucket])
        return blocks


class RankingStrategy(abc.ABC):
    """How a group is ranked against its query's anchors: the extension point of RankBuffer's variants."""

    @abc.abstractmethod
    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        """Rank `answers` against `anchors` (worst -> best); `GroupJudgingFailed` when the placement failed."""


def listwise_request(group: Group, texts: Sequence[str], step: int) -> ListwiseRequest:
    """Order `texts` worst -> best, for `group`'s query."""
    return group.request(ListwiseRequest, step=step, candidates=tuple(texts))


async def order_all(
    judge: Judge, group: Group, texts: list[str], tally: dict[str, float], reshuffle: float, *, step: int
) -> list[int]:
    """All `texts` worst -> best by one listwise call (audited in `tally`; none for fewer than two), else
    `GroupJudgingFailed`."""
    if len(texts) < 2:
        return list(range(len(texts)))
    (verdict,) = require([await ask_listwise(judge, listwise_request(group, texts, step), tally, reshuffle)])
    return check_order(verdict, len(texts))


class CoarseToFine(RankingStrategy):
    """The paper's coarse round, then fine round (Eq. 6-8). `fine=False` is the coarse_only ablation (each
    bucket one tie block, seeded-shuffled for maintenance); `show_anchor_text=False` the order_only control
    (Sec. 4.5, App. H)."""

    def __init__(self, judge: Judge, *, fine: bool = True, show_anchor_text: bool = True, seed: int = 0,
                 reshuffle_check: float = 0.0):  # fmt: skip
        self.judge = judge
        self.fine = fine
        self.show_anchor_text = show_anchor_text
        self.seed = seed
        self.reshuffle_check = reshuffle_check

    async def rank(self, group: Group, anchors: Sequence[str], answers: list[str], *, step: int) -> Ranking:
        K, shown = len(anchors), tuple(anchors)
        coarse = [
            group.request(CoarseRequest, step=step, anchors=shown, candidate=a, show_anchor_text=self.show_anchor_text)
            for a in answers
        ]
        verdicts = require(await asyncio.gather(*(ask(self.judge, r) for r in coarse)))
        positions = [check_position(v, K) for v in verdicts]
        buckets: list[list[int]] = [[] for _ in range(K + 1)]
        for u, p in enumerate(positions):
            buckets[p].append(u)
        to_rank = [p for p, b in enumerate(buckets) if len(b) >= 2]
        if not self.fine:
            for p in to_rank:  # no fine information: a seeded order picks maintenance anchors
                seeded_rng(self.seed, group.query_id, step, p).shuffle(buckets[p])
            return Ranking(positions, buckets, 0, ties=True)
        requests = [listwise_request(group, [answers[u] for u in buckets[p]], step) for p in to_rank]
        unranked, failures, tally = set(), [], new_tally()
        verdicts = await asyncio.gather(*(ask_listwise(self.judge, r, tally, self.reshuffle_check) for r in requests))
        for p, verdict in zip(to_rank, verdicts, strict=True):
            try:
                buckets[p] = [buckets[p][j] for j in check_order(require([verdict])[0], len(buckets[p]))]
            except GroupJudgingFailed as exc:  # keep the coarse bucket as one tie block
                unranked.add(p)
                failures.append(str(exc))
        return Ranking(positions, buckets, len(to_rank), frozenset(unranked), tuple(failures),
                       extra={DETAILS_KEY: tally})  # fmt: skip


def _invalid(message: str) -> GroupJudgingFailed:
    return GroupJudgingFailed(JudgeFailure("invalid", message))


def check_position(verdict: Any, K: int) -> int:
    """A coarse verdict must be an integer position in 0..K (RankBuffer Eq. 6)."""
    if isinstance(verdict, bool) or not isinstance(verdict, int) or not 0 <= verdict <= K:
        raise _invalid(f"Judge returned coarse position {verdict!r} for {K} anchors; expected an integer in 0..{K}")
    return verdict


def check_order(verdict: Any, n: int) -> list[int]:
    """A listwise verdict must be a permutation of range(n), worst -> best (RankBuffer Eq. 8)."""
    ints = isinstance(verdict, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in verdict)
    if not ints or sorted(verdict) != list(range(n)):
        raise _invalid(
            f"Judge returned order {verdict!r} for {n} candidates; expected a permutation of {list(range(n))}"
        )
    return list(verdict)


def order_or_none(verdict: Any, n: int) -> list[int] | None:
    """`check_order`'s order, or None for a failure or a non-permutation (optional looks skip those)."""
    with contextlib.suppress(GroupJudgingFailed):  # a JudgeFailure is no permutation either
        return check_order(verdict, n)
    return None


# -------- the display audit of listwise answers --------------------------------------------------------------
def kendall_tau(a: Sequence[int], b: Sequence[int]) -> float:
    """Kendall tau between two orders of the same indices: (concordant - discordant) / pairs."""
    n = len(a)
    if sorted(a) != sorted(b) or n < 2:
        raise ValueError(f"kendall_tau needs two orders of the same >= 2 indices, got {list(a)} and {list(b)}")
    pos = {u: i for i, u in enumerate(b)}
    score = sum(1 if pos[a[i]] < pos[a[j]] else -1 for i in range(n) for j in range(i + 1, n))
    return score / (n * (n - 1) / 2)


def new_tally() -> dict[str, float]:
    """An empty per-group tally: audited answers, copies, their tau and chance sums, and shuffle checks."""
    return {"answers": 0, "copies": 0, "tau_sum": 0.0, "chance_sum": 0.0, "reshuffles": 0, "reshuffle_tau_sum": 0.0}


def audit_answer(tally: dict[str, float], request: ListwiseRequest, order: Sequence[int], seed: int) -> None:
    """Add one parsed answer (`order`, canonical, worst -> best) to `tally`; n < 3 is skipped."""
    n = len(request.candidates)
    if n < _MIN_CANDIDATES:
        return
    display = display_order(request, n, seed)
    order = list(order)
    tally["answers"] += 1
    tally["copies"] += int(order == display or order == display[::-1])
    tally["tau_sum"] += kendall_tau(order, display)
    tally["chance_sum"] += 2 / math.factorial(n)


def twin_request(request: ListwiseRequest, seed: int) -> tuple[ListwiseRequest, list[int]]:
    """`(twin, perm)`: twin candidate j is `request.candidates[perm[j]]`, a seeded permutation redrawn (at
    most 20 times) while the twin would be shown in the request's display order."""
    n = len(request.candidates)
    ids = tuple(text_id(t) for t in request.candidates)
    shown = display_order(request, n, seed)
    for attempt in range(20):
        perm = list(range(n))
        seeded_rng(seed, "twin", request.query_id, request.step, ids, attempt).shuffle(perm)
        twin = replace(request, candidates=tuple(request.candidates[i] for i in perm))
        if [perm[i] for i in display_order(twin, n, seed)] != shown:
            break
    return twin, perm


async def ask_listwise(judge: Any, request: ListwiseRequest, tally: dict[str, float], reshuffle: float = 0.0) -> Any:
    """`ask(judge, request)`, auditing a valid answer in `tally`, and the shuffle check for a seeded
    fraction `reshuffle` of requests; returns the verdict unchanged."""
    seed, n = getattr(judge, "seed", 0), len(request.candidates)  # the seed the judge renders with
    seed = seed if isinstance(seed, int) else 0
    if reshuffle > 0 and n >= _MIN_CANDIDATES and _draw(request, seed) < reshuffle:
        twin, perm = twin_request(request, seed)
        verdict, second = await asyncio.gather(ask(judge, request), ask(judge, twin))
    else:
        verdict, second, perm = await ask(judge, request), None, []
    order = order_or_none(verdict, n)
    if order is None:
        return verdict
    audit_answer(tally, request, order, seed)
    again = order_or_none(second, n) if second is not None else None
    if again is not None:
        tally["reshuffles"] += 1
        tally["reshuffle_tau_sum"] += kendall_tau(order, [perm[j] for j in again])
    return verdict


def _draw(request: ListwiseRequest, seed: int) -> float:
    ids = tuple(text_id(t) for t in request.candidates)
    return seeded_rng(seed, "reshuffle_check", request.query_id, request.step, ids).random()


def tally_metrics(tallies: Iterable[dict[str, float] | None], reshuffle: float = 0.0) -> dict[str, float]:
    """The `rank/listwise_...` metrics of one step (docs/metrics.md) from its groups' tallies."""
    total = new_tally()
    for tally in tallies:
        for key, value in (tally or {}).items():
            total[key] += value
    out = {"rank/listwise_display_answers": float(total["answers"])}
    if total["answers"]:
        out["rank/listwise_display_copy_rate"] = total["copies"] / total["answers"]
        out["rank/listwise_display_copy_chance"] = total["chance_sum"] / total["answers"]
        out["rank/listwise_display_tau_mean"] = total["tau_sum"] / total["answers"]
    if reshuffle > 0:
        out["rank/listwise_reshuffle_checks"] = float(total["reshuffles"])
        if total["reshuffles"]:
            out["rank/listwise_reshuffle_agreement"] = total["reshuffle_tau_sum"] / total["reshuffles"]
    return out


def check_reshuffle(value: Any) -> float:
    """`reshuffle_check` validated: a probability in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"reshuffle_check is the fraction of listwise calls asked again under another shuffle and must be "
            f"in [0, 1] (0 turns the check off), got {value!r}"
        )
    return float(value)


# -------- buffer maintenance (step 4) ------------------------------------------------------------------------
class BufferManager:
    """How a query's buffer changes around a ranked group (step 4); this base keeps every buffer as it is."""

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
    """`new` with the anchors it added and pruned relative to `old` (by identity)."""
    added = tuple(a for a in new.anchors if all(a is not b for b in old.anchors))
    pruned = tuple(a for a in old.anchors if all(a is not b for b in new.anchors))
    return BufferUpdate(new, added, pruned)


class RuleManager(BufferManager):
    """Algorithm 2 (`update_buffer`: boundary expansion, interval refinement, inactivity pruning); `static`
    freezes the buffer after the epoch it was created in (RankBuffer*, Sec. 4.3); `max_anchors` caps it
    (RankBuffer+, keeping both ends)."""

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
    """Appendix G: the judge keeps `size` of the old anchors + ranked rollouts (`BufferSelectRequest`) after
    ranking, or with `lookahead` before ranking the query's next-epoch group (shown as context)."""

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
        """Pick `size` of old anchors + ranked rollouts, shown and kept in their combined order
        C_0, a_1, C_1, ..., a_K, C_K; an invalid pick leaves the buffer unchanged."""
        rollouts = [k for bucket in key_buckets for k in bucket]
        pool = buffer.size + len(rollouts)  # indices into anchors + rollouts
        size = min(self.size, pool)
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
        chosen = check_selection(verdict, pool, size)
        details["manager_invalid"] = int(chosen is None)
        return buffer if chosen is None else replace(buffer, anchors=tuple(a for i, a in combined if i in chosen))


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
    if not isinstance(verdict, (list, tuple)) or len(verdict) != size:  # a JudgeFailure is neither
        return None
    if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < pool for i in verdict):
        return None
    return set(verdict) if len(set(verdict)) == size else None


# -------- numbers: per-group details (the step metrics are `RankBufferReward.step_metrics`) ------------------
def ranked_details(candidates: Candidates, ranking: Ranking, ranked: AnchorBuffer, old: AnchorBuffer,
                   update: BufferUpdate, initial: tuple[Anchor, ...]) -> dict[str, Any]:  # fmt: skip
    """The per-group details of a group ranked against `ranked` (`old` before it, `initial`: a new buffer's)."""
    details: dict[str, Any] = {}
    K, valid = ranked.size, [len(m) for m in candidates.members]
    if valid:  # position / K averaged over valid rollouts (duplicates count once each)
        positions = zip(valid, ranking.positions, strict=True)
        details["coarse_position_mean"] = sum(n * p / K for n, p in positions) / sum(valid)
    details.update(
        maintained=update.buffer is not old,
        bucket_sizes=[len(b) for b in ranking.buckets],
        coarse_calls=len(candidates.answers) if ranking.coarse_calls is None else ranking.coarse_calls,
        fine_calls=ranking.fine_calls,
        fine_fallbacks=len(ranking.unranked),
        buffer_size=update.buffer.size,
        anchors_added=dict(Counter(a.source for a in initial + tuple(update.added))),
        anchors_pruned=dict(Counter(a.source for a in update.pruned)),
    )
    details.update(ranking.extra)
    return details


# -------- ListwiseGroupReward: the bootstrap ranking as a method of its own ----------------------------------
@dataclass
class ListwiseGroupOptions(MethodOptions):
    """`ListwiseGroupReward`'s options."""

    reshuffle_check: float = option(0.0, RESHUFFLE_CHECK_HELP)

    def __post_init__(self):
        super().__post_init__()
        self.reshuffle_check = check_reshuffle(self.reshuffle_check)


class ListwiseGroupReward(GroupRewardMethod):
    """One listwise call (RankBuffer App. B.2's fine-ranking prompt) ranks the whole group, as
    RankBuffer-Bootstrap ranks a first group; rank rewards by Eq. 9-10. The shape of OpenPipe ART's RULER,
    which asks for scores where this asks for an order. A failed or non-permutation answer: neutral."""

    name = "listwise_group"
    options_class = ListwiseGroupOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        answers, calls, tally = candidates.answers, int(len(candidates.answers) >= 2), new_tally()
        details: dict[str, Any] = {"requests": calls, "rounds": calls, **({DETAILS_KEY: tally} if calls else {})}
        order = await order_all(self.judge, group, answers, tally, self.options.reshuffle_check, step=step)
        return RankOutcome([[u] for u in order], details)

    def step_metrics(self, results: Sequence[GroupResult]) -> dict[str, float]:
        out = super().step_metrics(results)
        out.update(tally_metrics((r.details.get(DETAILS_KEY) for r in results), self.options.reshuffle_check))
        return out
