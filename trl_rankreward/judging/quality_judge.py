"""`QualityJudge`: answers every request type from one quality number per text.

Offline judges (`EmbeddingJudge`, `evaluation.simulation.SimulatedJudge`) differ only in
how they score a text; the mapping from scores to verdicts lives here, once (`_verdict`, one
branch per request kind, with `winner`, `pointwise_score`, `order_by_quality` and
`evenly_spaced_selection`).

Every call is recorded in `.ledger` with the token cost an LLM judge would have paid:
prompt tokens of the rendered request (`rendering.render`, with this judge's templates and
seed) and completion tokens of the JSON answer in the format `judging.parsing` reads, both
under the judge's token counter.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from typing import Any

from .ledger import JudgeLedger
from .rendering import render
from .requests import (
    BufferSelectRequest,
    CoarseRequest,
    JudgeError,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
    request_kind,
)
from .subsample import select_endpoints
from .tokens import TokenCounter, count_message_tokens, resolve_token_counter


class QualityJudge(abc.ABC):
    """Base of judges that score texts and derive verdicts from the scores (module docstring).

    Subclasses implement `qualities(request, texts, rubric_index=None, *, display=())`: one
    float per text of `texts` (canonical order), higher is better; `rubric_index` names the
    rubric being judged for per-rubric requests, else None; `display` is the rendered display
    order (`display[slot]` = canonical index shown there; empty when the order is fixed),
    for judges whose answers depend on what was shown first.
    """

    def __init__(
        self,
        *,
        token_counter: TokenCounter | str | None = None,
        templates=None,
        seed: int = 0,
        tie_margin: float = 0.0,
        pointwise_range: tuple[float, float] = (0.0, 10.0),
        meta_threshold: float = 0.5,
    ):
        lo, hi = pointwise_range
        if not hi > lo:
            raise ValueError(f"pointwise_range must be (low, high) with high > low, got {pointwise_range!r}")
        if tie_margin < 0:
            raise ValueError(f"tie_margin must be >= 0, got {tie_margin!r}")
        self.token_counter = resolve_token_counter(token_counter)
        self.templates = templates
        self.seed = seed
        self.tie_margin = float(tie_margin)
        self.pointwise_range = (float(lo), float(hi))
        self.meta_threshold = float(meta_threshold)
        self.ledger = JudgeLedger()

    @abc.abstractmethod
    async def qualities(
        self, request, texts: Sequence[str], rubric_index: int | None = None, *, display: tuple[int, ...] = ()
    ) -> list[float]:
        """One quality per text of `texts`, for judging `request` (under `rubric_index` if given)."""

    async def judge(self, request) -> Any:
        """Verdict for `request` (see `judging.requests`); records the call in `.ledger`."""
        kind = request_kind(request)
        rendered = self._render(request)
        try:
            verdict = await self._verdict(request, rendered.display)
        except JudgeError as exc:
            self.ledger.record(request_kind=kind, parsed=False, failure=exc.kind)
            raise
        self.ledger.record(
            request_kind=kind,
            parsed=True,
            prompt_tokens=count_message_tokens(self.token_counter, rendered.messages),
            completion_tokens=self.token_counter.count(json.dumps(answer_json(request, verdict))),
        )
        return verdict

    def prompt_tokens(self, request) -> int:
        """Tokens of the prompt an LLM judge would receive for `request`."""
        return count_message_tokens(self.token_counter, self._render(request).messages)

    def _render(self, request):
        """The prompt an LLM judge would receive (this judge's templates and seed); rendered once per call."""
        return render(request, self.templates, seed=self.seed)

    async def _verdict(self, request, display: tuple[int, ...]) -> Any:
        if isinstance(request, CoarseRequest):
            *anchors, candidate = await self.qualities(request, (*request.anchors, request.candidate))
            return sum(1 for q in anchors if q < candidate)  # counted: anchors out of quality order do not break it
        if isinstance(request, ListwiseRequest):
            return order_by_quality(await self.qualities(request, request.candidates, display=display))
        if isinstance(request, PairwiseRequest):
            return self.winner(*await self.qualities(request, (request.a, request.b), display=display))
        if isinstance(request, RubricPairwiseRequest):
            indices = range(len(request.rubrics)) if request.rubric_index is None else [request.rubric_index]
            pair = (request.a, request.b)
            return [self.winner(*await self.qualities(request, pair, r, display=display)) for r in indices]
        if isinstance(request, PointwiseRequest):
            (q,) = await self.qualities(request, (request.response,), request.rubric_index)
            return self.pointwise_score(q)
        if isinstance(request, MetaJudgeRequest):
            (q,) = await self.qualities(request, (request.rationale,))
            return bool(q >= self.meta_threshold)
        if isinstance(request, BufferSelectRequest):
            pool = await self.qualities(request, (*request.anchors, *request.rollouts))
            return evenly_spaced_selection(pool, request.size)
        raise TypeError(f"{type(self).__name__} cannot judge a {type(request).__name__}")

    def winner(self, q_a: float, q_b: float) -> str:
        """ "A", "B" or "TIE" (when the qualities differ by at most `tie_margin`)."""
        if abs(q_a - q_b) <= self.tie_margin:
            return "TIE"
        return "A" if q_a > q_b else "B"

    def pointwise_score(self, quality: float) -> float:
        """Quality mapped linearly from `pointwise_range` onto 0..10, clipped."""
        lo, hi = self.pointwise_range
        return 10.0 * min(1.0, max(0.0, (quality - lo) / (hi - lo)))


def order_by_quality(qualities: Sequence[float]) -> list[int]:
    """Indices worst -> best; equal qualities keep canonical index order."""
    return sorted(range(len(qualities)), key=lambda i: (qualities[i], i))


def evenly_spaced_selection(qualities: Sequence[float], size: int) -> list[int]:
    """`size` indices spread evenly over the quality order (always the worst and best), sorted.

    RankBuffer's Select_K0 rule (Sec. 3.2) applied to the worst -> best order.
    """
    return sorted(select_endpoints(order_by_quality(qualities), size))


def answer_json(request, verdict) -> dict:
    """The answer an LLM judge would write for `verdict` (the default templates' keys)."""
    if isinstance(request, CoarseRequest):
        return {"position": verdict}
    if isinstance(request, ListwiseRequest):
        return {"order": verdict}
    if isinstance(request, PairwiseRequest):
        return {"winner": verdict}
    if isinstance(request, RubricPairwiseRequest):
        return {"winners": verdict} if request.rubric_index is None else {"winner": verdict[0]}
    if isinstance(request, PointwiseRequest):
        return {"score": round(verdict, 1)}
    if isinstance(request, MetaJudgeRequest):
        return {"consistent": verdict}
    k = len(request.anchors)  # pool index i < k is anchor A{i}, else rollout R{i - k}
    return {
        "keep_anchor_ids": [f"A{i}" for i in verdict if i < k],
        "add_rollout_ids": [f"R{i - k}" for i in verdict if i >= k],
    }


__all__ = ["QualityJudge", "order_by_quality", "evenly_spaced_selection"]
