"""Compare training runs side by side: progress, judge cost, neutral groups, buffer size.

`summarize` gives one row per run of `run_history` (`COLUMNS`, explained by `COLUMN_NOTE`). A run's *progress*
is the `run_history.PROGRESS_SIGNALS` metric it logged, else its reward mean. `reward_std` is TRL's std of the
step's whole reward column: for the rank methods the within-group spread GRPO learns from, flat however the
policy does; otherwise an upper bound on it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import report_files
from .run_history import BUFFER_SIZE, CALLS, COMPLETION, NEUTRAL, PROMPT, REWARD_STD, RunHistory

#: (key, column header, format) of the summary table, in order
COLUMNS = (
    ("run", "run", "{}"),
    ("steps", "steps", "{:d}"),
    ("progress", "progress signal", "{}"),
    ("progress_first", "progress (first)", "{:.3f}"),
    ("progress_final", "progress (final)", "{:.3f}"),
    ("reward_std_final", "reward std (final)", "{:.3f}"),
    ("reward_std_mean", "reward std (mean)", "{:.3f}"),
    ("judge_calls_per_step", "judge calls / step", "{:.1f}"),
    ("judge_calls_per_step_after_epoch_1", "calls / step after epoch 1", "{:.1f}"),
    ("judge_tokens_per_step", "judge tokens / step", "{:,.0f}"),
    ("judge_tokens_per_step_after_epoch_1", "tokens / step after epoch 1", "{:,.0f}"),
    ("judge_tokens_total", "judge tokens (total)", "{:,.0f}"),
    ("neutral_groups_total", "neutral groups", "{:.0f}"),
    ("buffer_size_final", "buffer size (final)", "{:.1f}"),
    ("wall_time_s", "step time (s)", "{:.0f}"),
)


#: printed under the table: what the columns that are easy to misread mean
COLUMN_NOTE = (
    "Per step: the mean over the run's steps; 'after epoch 1' over the steps logged after the first epoch "
    "(RankBuffer's first epoch starts its buffers and costs less than the steps after it; '–': the run did not "
    "pass epoch 1). Progress: the first and last logged value of what moves when the policy improves (RankBuffer's "
    "coarse position, GenRM's win rate vs the references, the judge win rate, else the reward mean; a rank method's "
    "reward mean and std stay flat). Step time: the sum of TRL's step_time (evaluation and checkpoints excluded)."
)


def _weighted_mean(pairs: list[tuple[float, int]]) -> float | None:
    steps = sum(n for _, n in pairs)
    return sum(v * n for v, n in pairs) / steps if steps else None


def _last(run: RunHistory, name: str) -> float | None:
    _, values = run.series(name)
    return values[-1] if values else None


def summarize(run: RunHistory) -> dict[str, Any]:
    """The table row of one run (None where the run did not log the metric)."""
    totals = [_last(run, f"{PROMPT}_total"), _last(run, f"{COMPLETION}_total")]
    tokens_total = (
        sum(t or 0.0 for t in totals) if any(t is not None for t in totals) else run.total(PROMPT, COMPLETION)
    )
    calls_total = _last(run, f"{CALLS}_total")
    progress, _, values = run.progress()
    return {
        "run": run.label,
        "steps": run.last_step,
        "steps_after_epoch_1": sum(n for _, n in run.weighted(CALLS, PROMPT, after_first_epoch=True)),
        "reward_std_final": _last(run, REWARD_STD),
        "reward_std_mean": _weighted_mean(run.weighted(REWARD_STD)),
        "progress": progress,
        "progress_first": values[0] if values else None,
        "progress_final": values[-1] if values else None,
        "judge_calls_per_step": _weighted_mean(run.weighted(CALLS)),
        "judge_calls_per_step_after_epoch_1": _weighted_mean(run.weighted(CALLS, after_first_epoch=True)),
        "judge_calls_total": run.total(CALLS) if calls_total is None else calls_total,
        "judge_tokens_per_step": _weighted_mean(run.weighted(PROMPT, COMPLETION)),
        "judge_tokens_per_step_after_epoch_1": _weighted_mean(run.weighted(PROMPT, COMPLETION, after_first_epoch=True)),
        "judge_tokens_total": tokens_total,
        "neutral_groups_total": run.total(NEUTRAL),
        "buffer_size_final": _last(run, BUFFER_SIZE),
        "wall_time_s": run.wall_time_s,
        "train_runtime_s": run.train_runtime_s,
        "source": run.source,
    }


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The summary rows as a markdown table ('–' where a run did not log the metric)."""
    align = ["---" if key == "run" else "---:" for key, _, _ in COLUMNS]
    cells = ([report_files.cell(row.get(key), fmt) for key, _, fmt in COLUMNS] for row in rows)
    return report_files.markdown_table([header for _, header, _ in COLUMNS], cells, align)


#: (title, y label, function run -> (steps, values)) of each panel, left to right, top to bottom
PANELS = (
    ("Progress (moves as the policy improves)", "each run's signal (legend)", lambda r: r.progress()[1:]),
    ("Judge tokens per step", "prompt + completion tokens", lambda r: r.series(PROMPT, COMPLETION)),
    ("Judge calls per step", "judge/calls", lambda r: r.series(CALLS)),
    ("Judge tokens, cumulative", "tokens", lambda r: r.cumulative(PROMPT, COMPLETION)),
    ("Neutral groups, cumulative", "groups", lambda r: r.cumulative(NEUTRAL)),
    ("Buffer size (RankBuffer)", "buffer/size_mean", lambda r: r.series(BUFFER_SIZE)),
)


def plot_runs(runs: list[RunHistory], output_dir: str | os.PathLike, name: str = "compare.png") -> Path:
    """One PNG of the `PANELS` (2 x 3), one line per run, named with its progress signal in the legend."""
    plt = report_files.pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 3, figsize=(13, 6.8))
    names = [f"{run.label} ({run.progress()[0] or 'no progress signal'})" for run in runs]  # the legend's
    for ax, (title, ylabel, get) in zip(axes.flat, PANELS):
        for i, run in enumerate(runs):
            steps, values = get(run)
            if steps:
                ax.plot(steps, values, marker="o" if len(steps) <= 30 else None, markersize=3, color=f"C{i}",
                        label=names[i])  # fmt: skip
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step", fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if not ax.lines:
            ax.text(0.5, 0.5, "not logged by these runs", ha="center", va="center", transform=ax.transAxes,
                    color="gray")  # fmt: skip
    legends = [ax.get_legend_handles_labels() for ax in axes.flat]
    handles, labels = next(((h, names) for h, names in legends if h), ([], []))  # the first panel with lines
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return report_files.save_png(fig, Path(output_dir) / name, dpi=90)
