"""`BenchJudge`: a `SimulatedJudge` that keeps one cost record per call, for the benchmark.

Verdicts, noise, biases and the ledger are `SimulatedJudge`'s: every request is rendered
with the real templates (`judging.rendering`) and costed in the ledger. On top, each call:

- sleeps one unit on the virtual clock (`evaluation.virtual_clock`) before answering, so
  with every call lasting the same time, the clock time a call is issued at, counted from
  the start of the step, is the number of judge rounds before it: its *round* is exact;
- keeps the rendered prompt as token lines (`prompt_cache.LineTokenizer`), for the
  prefix-cache saving of its group (the very rendering the ledger costed, kept by `_render`,
  so `key_tokens(record.prompt)` equals the ledger's prompt tokens);
- copies its ledger entry (prompt and completion tokens, parsed), so the benchmark's sums
  are the ledger's by construction.

Pointwise scores are rounded to integers by default: an LLM judge asked for a 0-10 score
writes an integer, which is where pointwise rewards' clustered advantages come from
(RankBuffer Sec. 4.2, Figure 1); the simulated judge itself returns a real number.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass

from ..judging.templates import JudgeTemplates
from .prompt_cache import LineTokenizer, PromptKey
from .simulated_judge import SimulatedJudge

#: the prompt of the call in progress, set by `BenchJudge._render` (one value per asyncio task)
_PROMPT: contextvars.ContextVar[PromptKey] = contextvars.ContextVar("bench_judge_prompt")


@dataclass(frozen=True)
class CallRecord:
    """One judge call as the benchmark sees it."""

    query_id: str
    round: int
    parsed: bool
    prompt_tokens: int
    completion_tokens: int
    prompt: PromptKey


class BenchJudge(SimulatedJudge):
    """`SimulatedJudge` with per-call records (module docstring).

    Args:
        quality, rubric_quality, noise, position_bias, length_bias, seed, fail_rate: as
            in `SimulatedJudge`.
        tokenizer: the `LineTokenizer` that counts every prompt and completion.
        integer_scores: as in `SimulatedJudge`, but on by default: LLM judges answer integers.
    """

    def __init__(self, quality, *, tokenizer: LineTokenizer, integer_scores: bool = True, **kwargs):
        # Build the templates once: rendering with `templates=None` validates the defaults on every call.
        kwargs["templates"] = kwargs.get("templates") or JudgeTemplates()
        super().__init__(quality, token_counter=tokenizer, integer_scores=integer_scores, **kwargs)
        self.tokenizer = tokenizer
        self.records: list[CallRecord] = []
        self._step_start = 0.0

    def start_step(self) -> None:
        """Mark the start of a training step (rounds count from here) and clear the records."""
        self._step_start = asyncio.get_running_loop().time()
        self.records = []

    async def judge(self, request):
        issued = asyncio.get_running_loop().time() - self._step_start
        await asyncio.sleep(1.0)
        before = _counters(self.ledger)
        verdict = await super().judge(request)  # renders once (see `_render`), answers and records
        prompt = _PROMPT.get()
        calls, parsed, prompt_tokens, completion_tokens = (b - a for a, b in zip(before, _counters(self.ledger)))
        if calls != 1:
            raise RuntimeError(f"BenchJudge expected exactly one ledger entry for this call, found {calls}")
        self.records.append(
            CallRecord(
                query_id=request.query_id,
                round=round(issued) + 1,
                parsed=parsed == 1,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                prompt=prompt,
            )
        )
        return verdict

    def _render(self, request):
        # Keep the prompt the ledger was costed with, instead of rendering it a second time. The
        # context variable is per task, so concurrent calls each read their own prompt.
        rendered = super()._render(request)
        _PROMPT.set(self.tokenizer.prompt_key(rendered.messages))
        return rendered


def _counters(ledger) -> tuple[int, int, int, int]:
    return ledger.calls, ledger.parsed, ledger.prompt_tokens, ledger.completion_tokens


__all__ = ["BenchJudge", "CallRecord"]
