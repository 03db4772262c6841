"""`OracleJudge`: a noiseless judge that answers from a known quality, for hand-computed tests.

Unlike `SimulatedJudge` (noise, biases, token costs), every verdict follows from the
quality table alone, so a test's expected buffers and rewards can be derived on paper: the
verdicts are `judging.quality_judge.QualityJudge`'s (its table) with no tie margin, a
pointwise score is the quality (or the rubric's quality) clipped to [0, 10], and a
`BufferSelectRequest` is answered by `select` (a callable `(request) -> indices`) when given.

Rubric k's quality comes from `rubric_quality` (a `{text: [one value per rubric]}` dict or a
callable `(query_id, text, k) -> float`), and defaults to the overall quality.

`fail` makes chosen requests fail: a callable `(request) -> bool`; the failure is returned
as a `JudgeFailure`, as a judge whose retries ran out would. `requests` lists every request
received, `counts` counts them by kind, and `ledger` records them as parsed calls, without tokens.

Sequential judge rounds: with `gated=True` every call waits until `release()`;
`run_in_rounds(coro)` releases the held calls only when nothing else can run, so
`rounds` counts the sequential judge rounds the awaited method needed, exactly.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..judging.prompt_budget import ApproxCounter
from ..judging.quality_judge import QualityJudge
from ..judging.requests import BufferSelectRequest, JudgeFailure, request_kind


class OracleJudge(QualityJudge):
    """Answers from `quality`: a `{text: float}` dict or a callable `(query_id, text) -> float`."""

    def __init__(
        self,
        quality: dict[str, float] | Callable[[str, str], float],
        *,
        rubric_quality: dict[str, Sequence[float]] | Callable[[str, str, int], float] | None = None,
        fail: Callable[[Any], bool] | None = None,
        select: Callable[[BufferSelectRequest], Any] | None = None,
        gated: bool = False,
    ):
        super().__init__(token_counter=ApproxCounter())
        self._quality = quality
        self._rubric_quality = rubric_quality
        self._fail = fail
        self._select = select
        self.gated = gated
        self.requests: list[Any] = []
        self.counts: Counter[str] = Counter()
        self.rounds = 0
        self._held: list[asyncio.Future] = []

    def quality(self, query_id: str, text: str, rubric_index: int | None = None) -> float:
        if rubric_index is not None and self._rubric_quality is not None:
            if callable(self._rubric_quality):
                return float(self._rubric_quality(query_id, text, rubric_index))
            return float(_lookup(self._rubric_quality, text)[rubric_index])
        if callable(self._quality):
            return float(self._quality(query_id, text))
        return float(_lookup(self._quality, text))

    async def judge(self, request) -> Any:
        kind = request_kind(request)
        self.requests.append(request)
        self.counts[kind] += 1
        if self.gated:
            gate = asyncio.get_running_loop().create_future()
            self._held.append(gate)
            await gate
        if self._fail is not None and self._fail(request):
            self.ledger.record(request_kind=kind, parsed=False, failure="invalid")
            return JudgeFailure("invalid", f"OracleJudge was told to fail this {kind} request", attempts=1)
        self.ledger.record(request_kind=kind, parsed=True)
        if isinstance(request, BufferSelectRequest) and self._select is not None:
            return self._select(request)
        return await self._verdict(request, ())

    async def qualities(self, request, texts, rubric_index=None, *, display=()) -> list[float]:
        return [self.quality(request.query_id, text, rubric_index) for text in texts]

    def pointwise_score(self, quality: float) -> float:
        return min(max(quality, 0.0), 10.0)

    def release(self) -> int:
        """Answer every held call at once (one judge round); returns how many were released."""
        held, self._held = self._held, []
        for gate in held:
            gate.set_result(None)
        self.rounds += bool(held)
        return len(held)

    async def run_in_rounds(self, coro):
        """Await `coro`, releasing held calls only once nothing else can run; returns its result.

        Each release is one sequential judge round, so afterwards `rounds` is the number of
        rounds the awaited method needed (nothing here does real I/O, so settling is exact).
        """
        if not self.gated:
            raise ValueError("run_in_rounds needs OracleJudge(..., gated=True)")
        task = asyncio.ensure_future(coro)
        while not task.done():
            for _ in range(50):  # event-loop turns for the other tasks before each release
                await asyncio.sleep(0)
                if task.done():
                    break
            self.release()
        return task.result()


def _lookup(table: dict, text: str) -> Any:
    try:
        return table[text]
    except KeyError:
        raise KeyError(f"OracleJudge has no quality for text {text!r}; add it to the quality table") from None
