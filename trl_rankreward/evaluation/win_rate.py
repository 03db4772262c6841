"""Win rate against a baseline as a judge sees it, and win rate against training judge tokens across runs.

Each evaluation prompt's answer is judged against its baseline (the best reference, or the starting policy's
answer) in both display orders, so position bias cancels: a win counts 1, a tie 1/2, a loss 0, averaged over the
orders. A failed comparison is counted and left out, never given a made-up verdict.

    win rate  p = mean of s_i over the n judged prompts

Confidence interval: Wilson's score interval (Wilson, 1927) at z = 1.96 (95%),

    center = (p + z^2 / 2n) / (1 + z^2 / n)
    half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

Why Wilson: conservative for tie-split scores (variance at most p (1 - p)), inside [0, 1] and not collapsed at 0%
or 100% on a few dozen prompts (unlike the normal interval), and no random draws (unlike a bootstrap).

Across runs (reward means say nothing across rank methods), each logged `eval/win_rate` is a point (training judge
tokens so far, interpolated in steps; the evaluation judge's never counted, win rate); budgets and targets
interpolate along it. Runs whose final intervals overlap cannot be told apart ("overlap"); see docs/compare.md.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.prompts import query_text
from ..judging.calls import LedgerSnapshot
from ..judging.requests import Judge, JudgeFailure, PairwiseRequest, Rubric, ask_pair, is_failure, text_id
from .report_files import cell, markdown_table, pyplot, save_png
from .run_history import COMPLETION, PROMPT, RunHistory

Z_95 = 1.96
#: metric name prefix of the evaluation; its judge's usage is logged as `eval/judge_...`
PREFIX = "eval/"


@dataclass(frozen=True)
class WinRate:
    """A win rate with its Wilson interval; `rate`, `low`, `high` are None when no prompt was judged."""

    rate: float | None
    low: float | None
    high: float | None
    judged: int
    failed: int

    def metrics(self) -> dict[str, float]:
        """`eval/win_rate`, its interval and the prompt counts (docs/metrics.md); no rate keys without a rate."""
        out = {f"{PREFIX}prompts_judged": float(self.judged), f"{PREFIX}prompts_failed": float(self.failed)}
        if self.rate is not None:
            out.update({f"{PREFIX}win_rate": self.rate, f"{PREFIX}win_rate_low": self.low,
                        f"{PREFIX}win_rate_high": self.high})  # fmt: skip
        return out


def evaluation_metrics(scores: Sequence[float | None], usage: LedgerSnapshot) -> dict[str, float]:
    """What one evaluation logs: the win rate of `scores` and its judge's usage as `eval/judge_*`, apart from
    training's `judge/*`."""
    return {**win_rate(scores).metrics(), **usage.metrics(f"{PREFIX}judge_")}


def wilson_interval(p: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson's score interval of a proportion `p` observed on `n` > 0 trials (module docstring)."""
    if n < 1 or not 0.0 <= p <= 1.0:
        raise ValueError(f"wilson_interval needs n >= 1 and p in [0, 1], got n={n}, p={p}")
    shrink = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / shrink
    half = z / shrink * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def win_rate(scores: Sequence[float | None], z: float = Z_95) -> WinRate:
    """The win rate of per-prompt scores in [0, 1] (None: the comparison failed; left out, counted)."""
    judged = [s for s in scores if s is not None]
    for s in judged:
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"a prompt's score must be in [0, 1] (win 1, tie 1/2, loss 0), got {s}")
    failed = len(scores) - len(judged)
    if not judged:
        return WinRate(None, None, None, 0, failed)
    p = sum(judged) / len(judged)
    low, high = wilson_interval(p, len(judged), z)
    return WinRate(p, low, high, len(judged), failed)


@dataclass(frozen=True)
class EvalPrompt:
    """One evaluation prompt: what the policy reads (`prompt`), what the judge reads (`query`, `rubrics`), its id
    and its references, best first."""

    query_id: str
    prompt: object
    query: str
    rubrics: tuple[Rubric, ...] = ()
    references: tuple[str, ...] = ()

    @property
    def best_reference(self) -> str | None:
        return self.references[0] if self.references else None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EvalPrompt:
        """A dataset row in the training layout; without a `query_id` the id is the query's `text_id`, as in training."""
        query = query_text(row["prompt"])
        query_id = row.get("query_id")
        return cls(
            query_id=str(query_id) if query_id is not None else text_id(query),
            prompt=row["prompt"],
            query=query,
            rubrics=tuple(Rubric.coerce(r) for r in row.get("rubrics") or ()),
            references=tuple(row.get("references") or ()),
        )


async def judge_against_baselines(
    judge: Judge, prompts: Sequence[EvalPrompt], answers: Sequence[str], baselines: Sequence[str]
) -> tuple[list[float | None], list[str]]:
    """Each answer against its prompt's baseline, both display orders: the scores (None: failed) and the distinct
    failure messages (`kind: message`)."""
    requests = [
        PairwiseRequest(query=p.query, rubrics=p.rubrics, query_id=p.query_id, a=answer, b=baseline)
        for p, answer, baseline in zip(prompts, answers, baselines, strict=True)
    ]
    outcomes = await asyncio.gather(*(ask_pair(judge, r, both_orders=True) for r in requests))
    scores = [None if is_failure(o) else float(o) for o in outcomes]
    messages = sorted({f"{o.kind}: {o.message}" for o in outcomes if isinstance(o, JudgeFailure)})
    return scores, messages


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
    """Training judge tokens at the first crossing of `target`, interpolated (the first evaluation's when it is
    already there); None if never."""
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
    lasts = [(run.label, curve[-1]) for run in runs if (curve := win_rate_curve(run))]
    finals = [(label, p.low, p.high) for label, p in lasts if p.low is not None and p.high is not None]
    return [
        (a, b) for i, (a, low_a, high_a) in enumerate(finals) for b, low_b, high_b in finals[i + 1 :]
        if low_a <= high_b and low_b <= high_a
    ]  # fmt: skip


def win_rate_table(runs: Sequence[RunHistory], budgets: Sequence[float], targets: Sequence[float]) -> str:
    """Markdown: per run, the final win rate with its interval, the win rate at each budget and the tokens to each
    target ('–': the curve does not say; 'overlap'), then a note naming the runs that cannot be told apart."""
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
    ax.set(xlabel="training judge tokens (cumulative)", ylabel="eval/win_rate (95% Wilson interval)", ylim=(0, 1))
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=9)
    fig.tight_layout()
    return save_png(fig, Path(output_dir) / name, dpi=90)
