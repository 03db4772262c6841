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

`RationaleBenchJudge` also costs the rationale a rationale-first judge writes before its
pairwise verdict (`rationale_answer`), for `bench --pairwise_rationale`.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
from dataclasses import dataclass

from ..judging.rendering import JudgeTemplates, pair_display
from ..judging.requests import PairwiseRequest, seeded_rng, text_id
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
    """`SimulatedJudge` (its arguments) with per-call records (module docstring); `tokenizer`, a `LineTokenizer`,
    counts every prompt and completion, and `integer_scores` is on by default: an LLM judge asked for a 0-10
    score writes an integer, which is where pointwise rewards' tied advantages come from (RankBuffer Sec. 4.2)."""

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


class RationaleBenchJudge(BenchJudge):
    """`BenchJudge` that costs rationale-first pairwise answers (`templates.pairwise_rationale`).

    The simulated judge costs every answer as its JSON verdict. With the rationale-first
    template a real judge writes a rationale before that verdict, so each parsed pairwise
    call's completion is re-costed as the full answer text (`rationale_answer`); the tokens
    added are kept in `rationale_extra`, so records and ledger + extra stay equal. Other
    requests, and pairwise ones under the JSON-only template, are costed as by `BenchJudge`.
    """

    def __init__(self, quality, *, rationale_tokens: int = 800, **kwargs):
        super().__init__(quality, **kwargs)
        self.rationale_tokens = rationale_tokens
        self.rationale_extra = 0

    async def judge(self, request):
        verdict = await super().judge(request)
        record = self.records[-1]  # appended by BenchJudge.judge for this call, with no await since
        if self.templates.pairwise_rationale and isinstance(request, PairwiseRequest) and record.parsed:
            answer = rationale_answer(
                request, verdict, seed=self.seed, mean_tokens=self.rationale_tokens, count=self.tokenizer.count
            )
            extra = self.tokenizer.count(answer) - record.completion_tokens
            self.records[-1] = dataclasses.replace(record, completion_tokens=record.completion_tokens + extra)
            self.rationale_extra += extra
        return verdict


def rationale_answer(request: PairwiseRequest, verdict: str, *, seed: int, mean_tokens: int, count) -> str:
    """The answer a rationale-first judge writes for canonical `verdict`: RATIONALE, VERDICT.

    About `mean_tokens` (0.6x-1.4x, seeded per request) of comparison sentences, one block
    per rubric in turn, then the verdict in display terms (A is the response shown first)."""
    shown_first = pair_display(request, seed)
    letter = verdict if verdict == "TIE" or shown_first[0] == 0 else {"A": "B", "B": "A"}[verdict]
    rng = seeded_rng(seed, "rationale", request.query_id, request.step, text_id(request.a), text_id(request.b))
    target = mean_tokens * rng.uniform(0.6, 1.4)
    rubrics = [r.text for r in request.rubrics] or ["overall quality"]
    lines, tokens, k = ["RATIONALE"], 0, 0
    while tokens < target:
        rubric = rubrics[k % len(rubrics)]
        line = _RATIONALE_LINES[rng.randrange(len(_RATIONALE_LINES))].format(n=k % len(rubrics) + 1, rubric=rubric)
        n = count(line)
        if tokens + n / 2 > target and k:  # stop at the line boundary nearest the target
            break
        lines.append(line)
        tokens += n
        k += 1
    return "\n".join([*lines, "", "VERDICT", json.dumps({"winner": letter})])


# Sentence shapes of a short comparative rationale ({n}: rubric number, {rubric}: its text).
_RATIONALE_LINES = tuple(
    f"Rubric {{n}} ({{rubric}}): {a} {b}"
    for a in (
        "Response A addresses this more directly and gives a concrete example, while Response B stays general.",
        "Response B covers the main point but omits a step that the query explicitly asks for.",
        "Both responses meet this criterion; A is slightly clearer in how the steps are ordered.",
        "Response A makes an unsupported claim here, which weakens it against B's more careful wording.",
        "Neither response fully satisfies this; B at least states the key trade-off explicitly.",
    )
    for b in (
        "This rubric carries a high weight, so the difference matters for the overall verdict.",
        "The gap is small and does not decide the comparison on its own.",
        "Length and formatting are not evidence here, so I compare only the substance.",
        "Taken together with the other rubrics, this shifts the balance a little.",
    )
)


__all__ = ["BenchJudge", "CallRecord", "RationaleBenchJudge", "rationale_answer"]
