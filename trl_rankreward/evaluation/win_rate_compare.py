"""Which reward method buys the most quality per judge token: win rate against training judge tokens.

Rank rewards are zero-mean in every group, so reward means say nothing across methods; a run
that logged the judge win rate (`eval/win_rate`, `trainers.judge_eval`) says how good its policy
became. Each of its evaluations becomes a point (training judge tokens so far, win rate):

- tokens at an evaluation's step: the cumulative training judge tokens (`judge/prompt_tokens_total`
  + `judge/completion_tokens_total`, else the running sum of the per-step `judge/*_tokens`),
  interpolated linearly in steps between the logged steps around it, from 0 tokens at step 0
  (exact where they coincide). An evaluation after the run's last logged tokens is left out:
  its tokens are not known. The evaluation judge's own tokens are never counted.
- win rate at a token budget B: linear interpolation in tokens between the two evaluations around
  B (exact at an evaluation); None before a run's first evaluation or after its last (no
  extrapolation). Default budgets: 1/4, 1/2, 3/4 and all of the largest budget every run
  reached (the smallest of the runs' last evaluation tokens).
- tokens to reach a win rate w: the first crossing, interpolated linearly between the last
  evaluation below w and the first at or above it; the first evaluation's tokens when that one
  is already at or above w (it was reached by then); None when never reached.
- runs told apart: two runs whose final evaluations' 95% intervals overlap cannot be told apart
  by the evaluation; the table then leaves their "tokens to" cells out ("overlap") and says so,
  since which run reached w first is then noise.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .report_files import cell, markdown_table, pyplot, save_png
from .run_history import COMPLETION, PROMPT, RunHistory

WIN_RATE, WIN_LOW, WIN_HIGH = "eval/win_rate", "eval/win_rate_low", "eval/win_rate_high"
BUDGET_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
DEFAULT_TARGETS = (0.55, 0.6)
NO_EVALUATION = (
    "No run logged eval/win_rate, so the table above compares learning signal and judge cost, not how good the "
    "policies became. Rank rewards are zero-mean in every group, so reward means are not comparable across "
    "methods either. Set eval_prompts (the judge win-rate evaluation, docs/evaluation.md) to compare the win rate "
    "at equal training judge tokens."
)


@dataclass(frozen=True)
class WinRatePoint:
    """One evaluation: its step, the training judge tokens spent by then, the win rate and its interval."""

    step: int
    tokens: float
    rate: float
    low: float | None
    high: float | None


def training_tokens(run: RunHistory) -> tuple[list[int], list[float]]:
    """Steps and cumulative training judge tokens (prompt + completion) logged at them."""
    steps, totals = run.series(f"{PROMPT}_total", f"{COMPLETION}_total")
    return ([int(s) for s in steps], totals) if steps else run.cumulative(PROMPT, COMPLETION)


def _interpolate(x: float, xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Piecewise-linear y(x) through the points (xs increasing); None outside [xs[0], xs[-1]]."""
    if not xs or x < xs[0] or x > xs[-1]:
        return None
    for i in range(1, len(xs)):
        if x <= xs[i]:
            x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
            return y1 if x1 == x0 else y0 + (x - x0) / (x1 - x0) * (y1 - y0)
    return ys[0]  # a single point, x == xs[0]


def win_rate_curve(run: RunHistory) -> list[WinRatePoint]:
    """The run's evaluations as (tokens, win rate) points, in step order (module docstring)."""
    steps, tokens = training_tokens(run)
    steps, tokens = [0, *steps], [0.0, *tokens]
    points = []
    for entry in run.entries:
        if WIN_RATE in entry:
            spent = _interpolate(entry["step"], steps, tokens)
            if spent is not None:
                points.append(WinRatePoint(int(entry["step"]), spent, entry[WIN_RATE], entry.get(WIN_LOW),
                                           entry.get(WIN_HIGH)))  # fmt: skip
    return points


def win_rate_at(curve: Sequence[WinRatePoint], budget: float) -> float | None:
    """The win rate at `budget` training judge tokens, interpolated in tokens; None outside the curve."""
    return _interpolate(budget, [p.tokens for p in curve], [p.rate for p in curve])


def tokens_to_reach(curve: Sequence[WinRatePoint], target: float) -> float | None:
    """Training judge tokens at the first crossing of win rate `target` (module docstring); None if never."""
    for i, point in enumerate(curve):
        if point.rate >= target:
            if i == 0:
                return point.tokens
            before = curve[i - 1]
            return before.tokens + (target - before.rate) / (point.rate - before.rate) * (point.tokens - before.tokens)
    return None


def default_budgets(curves: Sequence[Sequence[WinRatePoint]]) -> list[float]:
    """Fractions `BUDGET_FRACTIONS` of the largest budget every run reached (the smallest final tokens)."""
    finals = [curve[-1].tokens for curve in curves if curve]
    return [round(min(finals) * f) for f in BUDGET_FRACTIONS] if finals else []


def overlapping_runs(runs: Sequence[RunHistory]) -> list[tuple[str, str]]:
    """Pairs of run labels whose final win-rate intervals overlap (runs without an interval are left out)."""
    finals = []
    for run in runs:
        curve = win_rate_curve(run)
        if curve and curve[-1].low is not None and curve[-1].high is not None:
            finals.append((run.label, curve[-1].low, curve[-1].high))
    return [
        (a, b) for i, (a, low_a, high_a) in enumerate(finals) for b, low_b, high_b in finals[i + 1 :]
        if low_a <= high_b and low_b <= high_a
    ]  # fmt: skip


def win_rate_table(runs: Sequence[RunHistory], budgets: Sequence[float], targets: Sequence[float]) -> str:
    """Markdown: per run, the final win rate with its interval, the win rate at each budget, the tokens to
    reach each target ('–' where the run's curve does not say; 'overlap' where the run's final interval
    overlaps another run's), and a note naming the runs the evaluation cannot tell apart."""
    headers = ["run", "evaluations", "final win rate (95% CI)"]
    headers += [f"win rate @ {b:,.0f} tokens" for b in budgets] + [f"tokens to {t:g}" for t in targets]
    rows = []
    overlaps = overlapping_runs(runs)
    untold = {label for pair in overlaps for label in pair}
    finals = {}
    for run in runs:
        curve = win_rate_curve(run)
        if curve:
            last = curve[-1]
            interval = f" [{last.low:.3f}, {last.high:.3f}]" if last.low is not None and last.high is not None else ""
            final = f"{last.rate:.3f}{interval} (step {last.step})"
            finals[run.label] = f"{run.label} {last.rate:.3f}{interval}"
        elif any(WIN_RATE in e for e in run.entries):
            final = "eval/win_rate logged, but no training judge tokens"
        else:
            final = "no eval/win_rate logged"
        cells = [run.label, str(len(curve)), final]
        cells += [cell(win_rate_at(curve, b), "{:.3f}") for b in budgets]
        cells += ["overlap" if run.label in untold else cell(tokens_to_reach(curve, t), "{:,.0f}") for t in targets]
        rows.append(cells)
    lines = [markdown_table(headers, rows, ["---"] + ["---:"] * (len(headers) - 1))]
    for a, b in overlaps:
        lines.append(
            f"\nThe final win-rate intervals of {finals[a]} and {finals[b]} overlap: the evaluation cannot tell "
            "these runs apart, so their tokens to each target are left out ('overlap'). Evaluate on more prompts "
            "(eval_prompts) to separate them."
        )
    return "\n".join(lines)


def plot_win_rate(runs: Sequence[RunHistory], output_dir: str | os.PathLike, name: str = "win_rate.png") -> Path:
    """Win rate (with its interval as a band) against cumulative training judge tokens, one line per run."""
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for i, run in enumerate(runs):
        curve = win_rate_curve(run)
        if not curve:
            continue
        tokens = [p.tokens for p in curve]
        ax.plot(tokens, [p.rate for p in curve], marker="o", markersize=3, color=f"C{i}", label=run.label)
        if all(p.low is not None and p.high is not None for p in curve):
            ax.fill_between(tokens, [p.low for p in curve], [p.high for p in curve], color=f"C{i}", alpha=0.15)
    ax.axhline(0.5, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel("training judge tokens (cumulative)")
    ax.set_ylabel("eval/win_rate (95% Wilson interval)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=9)
    fig.tight_layout()
    return save_png(fig, Path(output_dir) / name, dpi=90)
