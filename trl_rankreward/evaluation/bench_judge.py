"""What a judge call costs in the reward-method benchmark: per-call records, prompt tokens, prefix caching, latency.

`LineTokenizer` tokenizes each distinct line once (a judge prompt is mostly lines seen before); exact for
tokenizers that split on whitespace first, as the default WordPiece does. `prefix_cache_savings`: a server with
automatic prefix caching (vLLM APC, SGLang RadixAttention) computes only the tokens beyond a prompt's longest
prefix shared with an earlier one: the sum of the longest common prefixes of neighbours in lexicographic order.

Latency of one call (seconds): `(base_s + per_1k_prompt_s * prompt_tokens / 1000) * X`, `X` lognormal of mean 1
and log-scale sd `sigma`; at most `concurrency` calls at once, first come first served; round r of a group starts
when its round r-1 is done. `BenchJudge` sleeps one unit on the virtual clock per call, so a call's issue time is
its exact round, and keeps the very prompt and ledger entry the ledger costed.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import json
import math
import operator
import zlib
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..judging.prompt_budget import MESSAGE_OVERHEAD_TOKENS, TokenizerCounter, bundled_tokenizer_path
from ..judging.rendering import JudgeTemplates, pair_display
from ..judging.requests import PairwiseRequest, seeded_rng, text_id
from .simulation import SimulatedJudge

# Ends every line of a prompt key, so comparing keys line by line is comparing their flat token sequences.
_EOL = -1
_ROLE_IDS = {"system": -2, "user": -3, "assistant": -4}

Line = tuple[int, ...]
PromptKey = tuple[Line, ...]


class LineTokenizer:
    """Token ids per line, cached; a `TokenCounter`. `path`: a `tokenizer.json` or its folder (default: the bundled
    MiniLM WordPiece, else ~4 characters per token)."""

    def __init__(self, path: str | Path | None = None):
        path = path or bundled_tokenizer_path()
        self._encode = _approx_ids if path is None else TokenizerCounter(path).ids
        self._lines: dict[str, Line] = {}

    def lines(self, text: str) -> list[Line]:
        """Token ids of every line of `text`, each followed by the end-of-line marker (cached, shared objects)."""
        cache = self._lines
        return [cache.get(part) or cache.setdefault(part, (*self._encode(part), _EOL)) for part in text.split("\n")]

    def count(self, text: str) -> int:
        return key_tokens(self.lines(text))

    def prompt_key(self, messages: Iterable[Mapping[str, str]]) -> PromptKey:
        """A chat prompt as lines of token ids, each message after a role marker line of `MESSAGE_OVERHEAD_TOKENS`,
        so `key_tokens(key)` equals `count_message_tokens` under this counter."""
        key: list[Line] = []
        for message in messages:
            key.append((_ROLE_IDS.get(message["role"], -5),) * MESSAGE_OVERHEAD_TOKENS + (_EOL,))
            key.extend(self.lines(message["content"]))
        return tuple(key)


def key_tokens(key: Sequence[Line]) -> int:
    """Number of tokens of a prompt key (end-of-line markers are not tokens)."""
    return sum(map(len, key)) - len(key)


def shared_prefix_tokens(a: PromptKey, b: PromptKey) -> int:
    """Length in tokens of the longest common token prefix of two prompt keys."""
    shared = 0
    for line_a, line_b in zip(a, b):
        if line_a is line_b or line_a == line_b:
            shared += len(line_a) - 1
            continue
        for x, y in zip(line_a, line_b):
            if x != y or x == _EOL:
                break
            shared += 1
        break
    return shared


def prefix_cache_savings(keys: Sequence[PromptKey]) -> int:
    """Prompt tokens a prefix-caching server would not recompute over `keys` (module docstring)."""
    ordered = sorted(keys)
    return sum(shared_prefix_tokens(a, b) for a, b in zip(ordered, ordered[1:]))


def _approx_ids(text: str) -> list[int]:
    """~4 characters per token (as `judging.prompt_budget.ApproxCounter`), chunks as stable ids."""
    return [zlib.crc32(text[i : i + 4].encode("utf-8")) for i in range(0, 4 * math.ceil(len(text) / 4), 4)]


@dataclass(frozen=True)
class LatencyModel:
    """Per-call latency and the server's concurrency cap (module docstring)."""

    base_s: float = 0.5
    per_1k_prompt_s: float = 0.25
    sigma: float = 0.5
    concurrency: int = 64

    def __post_init__(self):
        if self.base_s < 0 or self.per_1k_prompt_s < 0 or self.sigma < 0:
            raise ValueError(f"Latency parameters must be >= 0, got {self}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")

    def sample(self, prompt_tokens: Sequence[int], *seed_parts) -> list[float]:
        """One latency per call, seeded by `seed_parts`."""
        rng = seeded_rng("latency", *seed_parts)
        shift = -(self.sigma**2) / 2  # E[exp(N(shift, sigma^2))] = 1
        return [
            (self.base_s + self.per_1k_prompt_s * n / 1000) * math.exp(rng.gauss(shift, self.sigma))
            for n in prompt_tokens
        ]


def step_wall_time(groups: Sequence[Sequence[Sequence[float]]], concurrency: int) -> float:
    """Time until every call of a step is done; `groups[g][r]`: the latencies of group g's calls in its round r."""
    waiting: deque[tuple[int, float]] = deque()  # (group, latency), in release order
    left = [0] * len(groups)  # calls of the group's current round not yet finished
    current = [-1] * len(groups)
    running: list[tuple[float, int]] = []  # (finish time, group)
    now = 0.0

    def release(g: int) -> None:
        while current[g] + 1 < len(groups[g]):
            current[g] += 1
            calls = groups[g][current[g]]
            if calls:
                left[g] = len(calls)
                waiting.extend((g, latency) for latency in calls)
                return

    for g in range(len(groups)):
        release(g)
    while waiting or running:
        while waiting and len(running) < concurrency:
            g, latency = waiting.popleft()
            heapq.heappush(running, (now + latency, g))
        now, g = heapq.heappop(running)
        left[g] -= 1
        if left[g] == 0:
            release(g)
    return now


_COUNTERS = operator.attrgetter("calls", "parsed", "prompt_tokens", "completion_tokens")  # of a ledger
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
    """`SimulatedJudge` with per-call records (module docstring), counted by `tokenizer`; `integer_scores` on by
    default, as an LLM judge writes a 0-10 score (the ties of pointwise rewards, RankBuffer Sec. 4.2). Under
    `templates.pairwise_rationale`, each parsed pairwise answer is re-costed as the full rationale-first text
    (`rationale_answer`); the tokens added are kept in `rationale_extra`, so the records equal ledger + extra."""

    def __init__(self, quality, *, tokenizer: LineTokenizer, integer_scores=True, rationale_tokens=800, **kwargs):
        # Build the templates once: rendering with `templates=None` validates the defaults on every call.
        kwargs["templates"] = kwargs.get("templates") or JudgeTemplates()
        super().__init__(quality, token_counter=tokenizer, integer_scores=integer_scores, **kwargs)
        self.tokenizer, self.rationale_tokens, self.rationale_extra = tokenizer, rationale_tokens, 0
        self.records: list[CallRecord] = []
        self._step_start = 0.0

    def start_step(self) -> None:
        """Mark the start of a training step (rounds count from here) and clear the records."""
        self._step_start = asyncio.get_running_loop().time()
        self.records = []

    async def judge(self, request):
        issued = asyncio.get_running_loop().time() - self._step_start
        await asyncio.sleep(1.0)
        before = _COUNTERS(self.ledger)
        verdict = await super().judge(request)  # renders once (see `_render`), answers and records
        calls, parsed, prompt_tokens, completion_tokens = (b - a for a, b in zip(before, _COUNTERS(self.ledger)))
        if calls != 1:
            raise RuntimeError(f"BenchJudge expected exactly one ledger entry for this call, found {calls}")
        if parsed and self.templates.pairwise_rationale and isinstance(request, PairwiseRequest):
            count = self.tokenizer.count
            answer = rationale_answer(request, verdict, seed=self.seed, mean_tokens=self.rationale_tokens, count=count)
            extra = count(answer) - completion_tokens
            completion_tokens += extra
            self.rationale_extra += extra
        self.records.append(
            CallRecord(
                request.query_id, round(issued) + 1, parsed == 1, prompt_tokens, completion_tokens, _PROMPT.get()
            )
        )
        return verdict

    def _render(self, request):
        # the prompt the ledger was costed with, per task (concurrent calls each read their own)
        rendered = super()._render(request)
        _PROMPT.set(self.tokenizer.prompt_key(rendered.messages))
        return rendered


def rationale_answer(request: PairwiseRequest, verdict: str, *, seed: int, mean_tokens: int, count) -> str:
    """The answer a rationale-first judge writes for canonical `verdict`: about `mean_tokens` (0.6x-1.4x, seeded)
    of comparison sentences, rubric by rubric, then the verdict in display terms (A: shown first)."""
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
