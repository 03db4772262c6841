"""RankBuffer's numbers: the per-group details of a ranked group and the step's metrics made from them.

`ranked_details` says what one ranked group did (where its rollouts fell among the anchors, how
many judge calls each stage took, what the buffer kept); `buffer_step_metrics` sums the judged
groups of a step into the `buffer/...` and `rank/...` metrics of docs/metrics.md. Both are plain
functions of plain values, so RankBuffer+ and the reports read the same numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .anchor_buffer import SOURCES, Anchor, AnchorBuffer, BufferUpdate
from .base import Candidates
from .display_audit import DETAILS_KEY, tally_metrics
from .ranking_strategy import Ranking


def ranked_details(candidates: Candidates, ranking: Ranking, ranked: AnchorBuffer, old: AnchorBuffer,
                   update: BufferUpdate, initial: tuple[Anchor, ...]) -> dict[str, Any]:  # fmt: skip
    """The per-group numbers of a ranked group (`rank_buffer`'s module docstring): `ranked` is the buffer
    it was ranked against, `old` the buffer before, `update` what is kept, `initial` a new buffer's anchors."""
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


def buffer_step_metrics(judged: Iterable[Mapping[str, Any]], reshuffle_check: bool) -> dict[str, float]:
    """The step's `buffer/added_...`, `buffer/pruned_...`, `buffer/manager_invalid` and `rank/...` metrics
    (docs/metrics.md defines each) from its judged groups' details."""
    judged = list(judged)
    out: dict[str, float] = {}
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
    out.update(tally_metrics((d.get(DETAILS_KEY) for d in judged), reshuffle_check))
    return out
