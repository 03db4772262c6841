"""Statistics and a figure of the RankBuffer buffers saved with a trainer checkpoint.

Reads `CHECKPOINT/reward_method_state.json` (`RankBufferReward.state_dict()`): the buffers' structure only, so
the checkpoint alone suffices (anchor texts live in the run's anchor store). `plot_report` draws it as the
RankBuffer paper's Figure 6 (Sec. 4.4): (a) live anchors per query by source and creation epoch; (b) source shares
by normalized position i / (K - 1) of anchor i in a buffer of K, worst 0 to best 1 (a lone anchor at 0.5).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..rewards.anchor_buffer import SOURCES, checkpoint_buffer_rows
from ..rewards.rank_buffer import STATE_FORMAT, RankBufferReward
from ..rewards.state_files import METHOD_STATE_NAME, CheckpointStateError, read_method_state
from ..user_errors import ConfigError, MissingFileError
from . import report_files


@dataclass
class BufferReport:
    """Counts over all query buffers of one RankBuffer state (see `buffer_report`)."""

    queries: int
    anchors: int
    config: dict[str, Any]
    size_hist: Counter = field(default_factory=Counter)  # buffer size -> queries
    by_source: Counter = field(default_factory=Counter)  # source -> anchors
    by_epoch_source: Counter = field(default_factory=Counter)  # (created_epoch, source) -> anchors
    inactivity_hist: Counter = field(default_factory=Counter)  # inactivity counter h -> anchors
    by_position_source: Counter = field(default_factory=Counter)  # (bin, source) -> anchors
    bins: int = 10
    pending: int = 0  # look-ahead groups waiting for the LLM manager

    @property
    def size_mean(self) -> float:
        return self.anchors / self.queries if self.queries else 0.0

    @property
    def size_max(self) -> int:
        return max(self.size_hist, default=0)

    @property
    def epochs(self) -> list[int]:
        return sorted({e for e, _ in self.by_epoch_source})

    @property
    def sources(self) -> list[str]:
        """Sources that occur, in `SOURCES` order."""
        return [s for s in SOURCES if self.by_source[s]]


def load_buffer_state(path: str | os.PathLike) -> dict[str, Any]:
    """The RankBuffer state of a checkpoint directory (or of a `reward_method_state.json` file)."""
    path = os.fspath(path)
    file = os.path.join(path, METHOD_STATE_NAME) if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise MissingFileError(
            f"No RankBuffer state at {file}; expected a trainer checkpoint directory holding {METHOD_STATE_NAME} "
            "(saved by RankBufferGRPOTrainer) or the path of that file"
        )
    try:
        state = read_method_state(file, RankBufferReward.name)
    except CheckpointStateError as exc:
        if exc.reason != "method":
            raise
        with open(file, encoding="utf-8") as f:
            saved = json.load(f).get("method")
        raise ConfigError(
            f"{file} holds the state of a {saved!r} run; buffer-report reads checkpoints of runs with "
            "the rank_buffer reward only (other methods build no buffers)"
        ) from None
    fmt = state.get("format") if isinstance(state, dict) else None
    if fmt != STATE_FORMAT:
        raise ConfigError(
            f"{file} is not a RankBuffer state: expected format {STATE_FORMAT!r}, got {fmt!r} "
            "(buffer-report only reads checkpoints of runs with the rank_buffer reward)"
        )
    if "buffers_stored" in state:  # the structures are in the checkpoint's anchors/ folder
        rows = checkpoint_buffer_rows(os.path.dirname(file))
        state = {**state, "buffers": {qid: json.loads(row) for qid, row in rows}}
    return state


def buffer_report(state: dict[str, Any], *, bins: int = 10) -> BufferReport:
    """Count anchors of `state["buffers"]` by size, source, creation epoch, inactivity, position."""
    if bins < 1:
        raise ConfigError(f"bins must be >= 1, got {bins}")
    buffers = state.get("buffers")
    if not isinstance(buffers, dict):
        raise ConfigError("RankBuffer state has no 'buffers' mapping; expected RankBufferReward.state_dict() output")
    report = BufferReport(
        queries=len(buffers), anchors=0, config=dict(state.get("config", {})), bins=bins,
        pending=len(state.get("pending", {})),
    )  # fmt: skip
    for buffer in buffers.values():
        rows = buffer["anchors"]
        report.size_hist[len(rows)] += 1
        report.anchors += len(rows)
        for i, (_key, source, created, inactive) in enumerate(rows):
            report.by_source[source] += 1
            report.by_epoch_source[(int(created), source)] += 1
            report.inactivity_hist[int(inactive)] += 1
            position = i / (len(rows) - 1) if len(rows) > 1 else 0.5  # worst 0, best 1, a lone anchor 0.5
            b = min(int(position * bins), bins - 1)
            report.by_position_source[(b, source)] += 1
    return report


def format_report(report: BufferReport) -> str:
    """The report as plain-text tables."""
    lines = [
        f"RankBuffer state: {report.queries} queries, {report.anchors} anchors; config {report.config}",
        f"buffer size: mean {report.size_mean:.2f}, max {report.size_max}",
        "buffer size histogram (size: queries): " + ", ".join(f"{s}: {n}" for s, n in sorted(report.size_hist.items())),
        "anchors by source (total, per query): "
        + ", ".join(
            f"{s} {report.by_source[s]} ({report.by_source[s] / max(report.queries, 1):.2f})" for s in report.sources
        ),  # fmt: skip
        "inactivity counter h (h: anchors): "
        + ", ".join(f"{h}: {n}" for h, n in sorted(report.inactivity_hist.items())),
    ]
    if report.pending:
        lines.append(f"look-ahead groups pending for the LLM manager: {report.pending}")
    sources = report.sources
    head = f"{'':<16}" + "".join(f"{s:>11}" for s in sources)
    lines += ["", "anchors by creation epoch and source:", head]
    for e in report.epochs:
        lines.append(f"{'epoch ' + str(e):<16}" + "".join(f"{report.by_epoch_source[(e, s)]:>11}" for s in sources))
    lines += ["", "source share by normalized position (index/(K-1), 0 = worst anchor, 1 = best):", head]
    for b in range(report.bins):
        total = sum(report.by_position_source[(b, s)] for s in sources)
        label = f"[{b / report.bins:.1f}, {(b + 1) / report.bins:.1f}{']' if b == report.bins - 1 else ')'}"
        shares = "".join(f"{report.by_position_source[(b, s)] / total:>11.2f}" if total else f"{'-':>11}"
                         for s in sources)  # fmt: skip
        lines.append(f"{label:<16}{shares}")
    return "\n".join(lines)


def plot_report(report: BufferReport, path: str | os.PathLike) -> None:
    """Write the two-panel PNG (Figure 6 of the RankBuffer paper) to `path` (matplotlib, Agg)."""
    plt = report_files.pyplot()
    sources, epochs, n = report.sources, report.epochs, max(report.queries, 1)
    colors = {s: c for s, c in zip(SOURCES, plt.get_cmap("tab10").colors)}
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(12, 4.5))

    bottom = [0.0] * len(epochs)
    for s in sources:
        heights = [report.by_epoch_source[(e, s)] / n for e in epochs]
        ax_a.bar([str(e) for e in epochs], heights, bottom=bottom, label=s, color=colors[s])
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax_a.set_xlabel("epoch the anchor was created in")
    ax_a.set_ylabel("live anchors per query")
    ax_a.set_title(f"(a) anchor sources by creation epoch (mean size {report.size_mean:.2f})")
    ax_a.legend(title="source")

    centers = [100 * (b + 0.5) / report.bins for b in range(report.bins)]
    totals = [sum(report.by_position_source[(b, s)] for s in sources) or 1 for b in range(report.bins)]
    bottom = [0.0] * report.bins
    for s in sources:
        shares = [report.by_position_source[(b, s)] / totals[b] for b in range(report.bins)]
        ax_b.bar(centers, shares, width=100 / report.bins * 0.9, bottom=bottom, label=s, color=colors[s])
        bottom = [b + h for b, h in zip(bottom, shares)]
    ax_b.set_xlabel("normalized position in buffer (0 = worst anchor, 100 = best)")
    ax_b.set_ylabel("share of anchors")
    ax_b.set_xlim(0, 100)
    ax_b.set_title("(b) anchor sources by normalized quality position")
    fig.suptitle(f"RankBuffer buffers of {report.queries} queries")
    fig.tight_layout()
    report_files.save_png(fig, path, dpi=120)
