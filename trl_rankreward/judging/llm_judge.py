"""`LLMJudge`: a judge that asks a chat model, with the papers' prompts, and checks its answers.

For each request: fit it to the judge's context window (`judging.prompt_budget`), render it (deterministic display
order), call the backend, parse and validate the JSON answer, map it back to canonical terms. The request carries
its kind's JSON schema as `response_format` unless its prompt asks for a rationale first; a server that refuses
`response_format` (HTTP 400 naming it) is asked once more without it, and from then on none is sent (a logged note
says so). Failed tries are retried by one `RetryPolicy` (`judging.calls`), after which the request returns a
`JudgeFailure`, never a made-up verdict. Every try is one call in `ledger`.
"""

from __future__ import annotations

import logging
from typing import Any

from .backends.base import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, BackendError, ChatBackend
from .calls import JudgeLedger, RetryPolicy, complete_and_parse
from .parsing import answer_schema, asks_rationale_first, parse_answer
from .prompt_budget import FittedPrompt, WindowFitting, request_fitting
from .rendering import JudgeTemplates
from .requests import JudgeError, request_kind

logger = logging.getLogger(__name__)


class LLMJudge:
    """Judge requests with a chat model behind `backend` (any `ChatBackend`) and `templates` (default: the papers'
    prompts); `seed` drives the display-order hash, `retry` the retries (default: three tries, MatrixReward App.
    A.2). `structured_output` sends each kind's JSON schema (module docstring); `max_model_len` is the window where
    the backend does not tell it (None: none until a server refuses a prompt as too long); `token_counter` counts
    for the fitting (default `prompt_budget.default_token_counter()`)."""

    def __init__(
        self,
        backend: ChatBackend,
        templates: JudgeTemplates | None = None,
        *,
        seed: int = 0,
        retry: RetryPolicy | None = None,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        structured_output: bool = True,
        max_model_len: int | None = None,
        token_counter=None,
    ):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        self.backend = backend
        self.templates = templates or JudgeTemplates()
        self.seed = seed
        self.retry = retry or RetryPolicy(seed=seed)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.structured_output = structured_output
        self.format_refusal: str | None = None  # the server's refusal of response_format, once one came
        self.ledger = JudgeLedger()
        self.fitting = WindowFitting(backend, self.ledger, max_model_len=max_model_len, token_counter=token_counter)

    @property
    def budget(self):
        """The `PromptBudget` requests are fitted with; None while the window is unknown."""
        return self.fitting.budget

    async def judge(self, request) -> Any:
        """The canonical verdict for `request`, or a `JudgeFailure` once the retry policy gives up."""
        kind, error = request_kind(request), None
        fitting = request_fitting(request, self.templates, seed=self.seed, max_tokens=self.max_tokens)
        try:
            async for watch, fitted in self.fitting.rounds(**fitting):
                try:
                    verdict, _ = await complete_and_parse(
                        watch,
                        fitted.rendered.messages,
                        lambda completion, rendered=fitted.rendered: parse_answer(completion.text, request, rendered),
                        retry=self.retry,
                        ledger=self.ledger,
                        request_kind=kind,
                        what=f"{kind} request (query_id={request.query_id!r})",
                        on_format_refused=self._note_refusal,
                        temperature=self.temperature,
                        max_tokens=fitted.max_tokens,
                        response_format=self._response_format(request, fitted),
                    )
                    return verdict
                except JudgeError as exc:
                    error = exc  # a refusal as over the window: the next round fits it again
        except JudgeError as exc:  # the request cannot fit the window
            error = exc
        return error.as_failure()

    def _response_format(self, request, fitted: FittedPrompt) -> dict | None:
        """The kind's JSON schema, unless off, refused, or the prompt asks for a rationale (a schema forbids it)."""
        if not self.structured_output or self.format_refusal is not None or asks_rationale_first(fitted.rendered):
            return None
        return answer_schema(request)

    def _note_refusal(self, error: BackendError) -> None:
        if self.format_refusal is None:
            self.format_refusal = str(error)
            logger.warning(
                "The judge server refused structured output (%s); this judge asks without response_format from now "
                "on and validates the answers it parses. Set judge_structured_output=False to skip the refused try.",
                self.format_refusal,
            )

    def describe(self) -> str:
        """One line for the run's log: what judges, where, with which templates."""
        return (f"LLMJudge over {self.backend!r}, templates: {self.templates.source}, "
                f"retry: {self.retry.max_attempts} attempts")  # fmt: skip

    def __repr__(self) -> str:
        return f"LLMJudge(backend={self.backend!r}, seed={self.seed}, retry={self.retry!r})"
