"""`OracleJudge`: a noiseless judge that answers from a known quality, for hand-computed tests.

Unlike `SimulatedJudge` (noise, biases, token costs), every verdict follows from the
quality table alone, so a test's expected buffers and rewards can be derived on paper:

- `CoarseRequest`: the number of anchors strictly worse than the candidate (ties go below
  the anchor), which is the insertion position when the anchors are sorted.
- `ListwiseRequest`: candidates by quality, worst -> best (ties keep the given order).
- `PairwiseRequest`: "A", "B" or "TIE" by quality.
- `PointwiseRequest`: the quality clipped to [0, 10].
- `BufferSelectRequest`: `select` (a callable `(request) -> indices`) when given, else the
  endpoint-preserving uniform subsample of the pool sorted by quality.

`fail` makes chosen requests fail: a callable `(request) -> bool`; the failure is returned
as a `JudgeFailure`, as a judge whose retries ran out would. `requests` lists every request
received, `counts` counts them by kind, and `ledger` records them as parsed calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from ..judging.ledger import JudgeLedger
from ..judging.requests import (
    BufferSelectRequest,
    CoarseRequest,
    JudgeFailure,
    ListwiseRequest,
    PairwiseRequest,
    PointwiseRequest,
    request_kind,
)
from ..rewards.anchor_buffer import select_endpoints


class OracleJudge:
    """Answers from `quality`: a `{text: float}` dict or a callable `(query_id, text) -> float`."""

    def __init__(
        self,
        quality: dict[str, float] | Callable[[str, str], float],
        *,
        fail: Callable[[Any], bool] | None = None,
        select: Callable[[BufferSelectRequest], Any] | None = None,
    ):
        self._quality = quality
        self._fail = fail
        self._select = select
        self.requests: list[Any] = []
        self.counts: Counter[str] = Counter()
        self.ledger = JudgeLedger()

    def quality(self, query_id: str, text: str) -> float:
        if callable(self._quality):
            return float(self._quality(query_id, text))
        try:
            return float(self._quality[text])
        except KeyError:
            raise KeyError(f"OracleJudge has no quality for text {text!r}; add it to the quality table") from None

    async def judge(self, request) -> Any:
        kind = request_kind(request)
        self.requests.append(request)
        self.counts[kind] += 1
        if self._fail is not None and self._fail(request):
            self.ledger.record(request_kind=kind, parsed=False, failure="invalid")
            return JudgeFailure("invalid", f"OracleJudge was told to fail this {kind} request", attempts=1)
        self.ledger.record(request_kind=kind, parsed=True)
        return self._answer(request)

    def _answer(self, request) -> Any:
        q = lambda text: self.quality(request.query_id, text)  # noqa: E731
        if isinstance(request, CoarseRequest):
            c = q(request.candidate)
            return sum(q(a) < c for a in request.anchors)
        if isinstance(request, ListwiseRequest):
            return sorted(range(len(request.candidates)), key=lambda i: q(request.candidates[i]))
        if isinstance(request, PairwiseRequest):
            a, b = q(request.a), q(request.b)
            return "A" if a > b else "B" if b > a else "TIE"
        if isinstance(request, PointwiseRequest):
            return min(max(q(request.response), 0.0), 10.0)
        if isinstance(request, BufferSelectRequest):
            if self._select is not None:
                return self._select(request)
            pool = list(request.anchors) + list(request.rollouts)
            by_quality = sorted(range(len(pool)), key=lambda i: q(pool[i]))
            return sorted(select_endpoints(by_quality, request.size))
        raise TypeError(f"OracleJudge does not answer {type(request).__name__}")
