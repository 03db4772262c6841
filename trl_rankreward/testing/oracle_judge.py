"""`OracleJudge`: a noiseless judge that answers from a known quality, for exact-value tests.

Unlike `SimulatedJudge` (noise, biases, token ledger), it answers every request by comparing
fixed qualities, records each request, can be told to fail, and can count a method's
sequential judge rounds exactly (`run_in_rounds`).

Verdicts (q = quality of a text; rubric k uses `rubric_quality(text, k)` when given):
- `PairwiseRequest`: "A" if q(a) > q(b), "B" if lower, "TIE" if equal.
- `RubricPairwiseRequest`: the same per judged rubric.
- `PointwiseRequest`: q(response) (or rubric k's), clipped to [0, 10].
- `CoarseRequest`: the number of anchors with quality strictly below the candidate's.
- `ListwiseRequest`: candidate indices sorted by quality, worst -> best (stable).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..judging.requests import (
    CoarseRequest,
    JudgeFailure,
    ListwiseRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
)


def _lookup(table: Callable | Mapping, *args) -> Any:
    if callable(table):
        return table(*args)
    try:
        return table[args[0]]
    except KeyError:
        raise KeyError(f"OracleJudge has no quality for text {args[0]!r}; add it to the quality table") from None


class OracleJudge:
    """Deterministic judge from latent qualities.

    Args:
        quality: `text -> float` or a `{text: float}` mapping.
        rubric_quality: `(text, rubric_index) -> float` or `{text: [one value per rubric]}`;
            defaults to `quality` for every rubric.
        fail_when: `request -> bool`; matching requests get a `JudgeFailure` ("invalid").
        gated: hold every call until `release()` (used by `run_in_rounds`).

    `requests` lists every request received, in arrival order.
    """

    def __init__(
        self,
        quality: Callable[[str], float] | Mapping[str, float],
        *,
        rubric_quality: Callable[[str, int], float] | Mapping[str, Sequence[float]] | None = None,
        fail_when: Callable[[Any], bool] | None = None,
        gated: bool = False,
    ):
        self.quality = quality
        self.rubric_quality = rubric_quality
        self.fail_when = fail_when
        self.gated = gated
        self.requests: list[Any] = []
        self.rounds = 0
        self._pending: list[asyncio.Future] = []

    def q(self, text: str, rubric_index: int | None = None) -> float:
        if rubric_index is None or self.rubric_quality is None:
            return float(_lookup(self.quality, text))
        if callable(self.rubric_quality):
            return float(self.rubric_quality(text, rubric_index))
        return float(_lookup(self.rubric_quality, text)[rubric_index])

    async def judge(self, request):
        self.requests.append(request)
        if self.gated:
            gate = asyncio.get_running_loop().create_future()
            self._pending.append(gate)
            await gate
        if self.fail_when is not None and self.fail_when(request):
            return JudgeFailure("invalid", "OracleJudge told to fail this request")
        return self.verdict(request)

    def verdict(self, request):
        if isinstance(request, PairwiseRequest):
            return self._winner(request.a, request.b, None)
        if isinstance(request, RubricPairwiseRequest):
            indices = range(len(request.rubrics)) if request.rubric_index is None else [request.rubric_index]
            return [self._winner(request.a, request.b, k) for k in indices]
        if isinstance(request, PointwiseRequest):
            return min(10.0, max(0.0, self.q(request.response, request.rubric_index)))
        if isinstance(request, CoarseRequest):
            return sum(self.q(a) < self.q(request.candidate) for a in request.anchors)
        if isinstance(request, ListwiseRequest):
            return sorted(range(len(request.candidates)), key=lambda i: self.q(request.candidates[i]))
        raise TypeError(f"OracleJudge cannot answer {type(request).__name__}")

    def _winner(self, a: str, b: str, rubric_index: int | None) -> str:
        qa, qb = self.q(a, rubric_index), self.q(b, rubric_index)
        return "A" if qa > qb else "B" if qa < qb else "TIE"

    def release(self) -> int:
        """Answer every held call at once (one judge round); returns how many were released."""
        pending, self._pending = self._pending, []
        for gate in pending:
            gate.set_result(None)
        self.rounds += bool(pending)
        return len(pending)

    async def run_in_rounds(self, coro, *, settle_ticks: int = 50):
        """Await `coro` with this (gated) judge, releasing held calls only once nothing else can run.

        Every release is one sequential judge round, so afterwards `self.rounds` is the
        number of rounds the awaited method needed. Returns the coroutine's result.
        """
        if not self.gated:
            raise ValueError("run_in_rounds needs OracleJudge(..., gated=True)")
        task = asyncio.ensure_future(coro)
        while not task.done():
            for _ in range(settle_ticks):
                await asyncio.sleep(0)
                if task.done():
                    break
            self.release()
        return task.result()
