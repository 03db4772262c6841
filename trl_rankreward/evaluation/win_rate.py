"""Win rate of a policy's answers against fixed baseline answers, as a judge sees it, with a confidence interval.

Each evaluation prompt i has the policy's answer and a baseline answer (the dataset's best
reference, or the starting policy's answer). The judge compares them in both display orders
(`judging.requests.ask_pair`, `both_orders=True`); a win counts 1, a tie 1/2, a loss 0, and the
two orders are averaged, so the prompt's score s_i is a multiple of 1/4 and a judge's position
bias cancels. A prompt whose comparison failed (after the judge's retries) has no score: it is
counted as failed and left out, never given a made-up verdict.

    win rate  p = mean of s_i over the n judged prompts

Confidence interval: Wilson's score interval (Wilson, 1927) at z = 1.96 (95%),

    center = (p + z^2 / 2n) / (1 + z^2 / n)
    half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

Why Wilson: a score in [0, 1] with mean p has variance at most p (1 - p) (the Bernoulli case,
no ties), so the interval is conservative for tie-split scores; unlike the normal interval
p +- z sqrt(p (1 - p) / n) it stays inside [0, 1] and does not collapse to a point at 0% or
100% on the few dozen prompts an evaluation during training affords; unlike a bootstrap over
prompts it needs no random draws, so every process and every rerun logs the same numbers.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..data.conversation import query_text
from ..judging.calls import LedgerSnapshot
from ..judging.requests import Judge, JudgeFailure, PairwiseRequest, Rubric, ask_pair, is_failure, text_id

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
    """What one evaluation logs: the win rate of `scores` (`WinRate.metrics`) and its judge's usage as
    `eval/judge_calls`, `eval/judge_prompt_tokens`, ... (`LedgerSnapshot.metrics`), apart from `judge/*`."""
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
    """One evaluation prompt: what the policy reads (`prompt`, text or chat messages), what the judge
    reads (`query`, `rubrics`), its id, and its reference answers, best first (may be none)."""

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
        """A dataset row in the training layout (`prompt`; optional `query_id`, `rubrics`, `references`
        best first); without a `query_id` the id is the query text's `text_id`, as in training."""
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
    """Each answer against its prompt's baseline, in both display orders, concurrently: the scores
    (None where the comparison failed) and the failure messages (`kind: message`, at most one each)."""
    requests = [
        PairwiseRequest(query=p.query, rubrics=p.rubrics, query_id=p.query_id, a=answer, b=baseline)
        for p, answer, baseline in zip(prompts, answers, baselines, strict=True)
    ]
    outcomes = await asyncio.gather(*(ask_pair(judge, r, both_orders=True) for r in requests))
    scores = [None if is_failure(o) else float(o) for o in outcomes]
    messages = sorted({f"{o.kind}: {o.message}" for o in outcomes if isinstance(o, JudgeFailure)})
    return scores, messages
