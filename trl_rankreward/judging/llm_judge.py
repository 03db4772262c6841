"""`LLMJudge`: a judge that asks a chat model, with the papers' prompts, and checks its answers.

For each request: render it (deterministic display order), call the backend, parse and
validate the JSON answer, map it back to canonical terms. Failed tries are retried by one
`RetryPolicy` (`judging.retry`): an invalid answer at once, a transport error, timeout,
malformed response, HTTP 408/429/5xx after a backoff (or the server's `Retry-After`); an
error that repeats on every try (HTTP 400, 401, 404) fails the request at once. After that
the request returns a `JudgeFailure`, never a made-up verdict. Every try is one call in
`ledger`, with the backend's token usage and latency, so one request makes at most
`retry.max_attempts` HTTP requests; `retry.worst_case_s(timeout_s)` bounds its time.
"""

from __future__ import annotations

from typing import Any

from .backends.base import ChatBackend
from .calls import complete_and_parse
from .ledger import JudgeLedger
from .parsing import answer_schema, parse_answer
from .rendering import render
from .requests import JudgeError, request_kind
from .retry import RetryPolicy
from .templates import JudgeTemplates


class LLMJudge:
    """Judge requests with a chat model behind `backend`.

    Args:
        backend: any `ChatBackend` (`OpenAICompatibleBackend`, `TransformersBackend`).
        templates: prompt templates; default: the papers' prompts (`JudgeTemplates()`).
        seed: global seed of the display-order hash.
        retry: how failed calls are retried (default `RetryPolicy()`: three tries in all, as
            MatrixReward App. A.2).
        temperature, max_tokens: sampling settings of every call.
        structured_output: send a JSON-schema `response_format` per request kind, for
            servers with guided decoding (vLLM, SGLang). Answers are validated either way.

    Example:
        judge = LLMJudge(OpenAICompatibleBackend("http://localhost:8000/v1", "Qwen/Qwen3-30B-A3B-Instruct-2507"))
        position = asyncio.run(judge.judge(CoarseRequest(query=q, rubrics=r, anchors=a, candidate=c)))
    """

    def __init__(
        self,
        backend: ChatBackend,
        templates: JudgeTemplates | None = None,
        *,
        seed: int = 0,
        retry: RetryPolicy | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        structured_output: bool = False,
    ):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        self.backend = backend
        self.templates = templates or JudgeTemplates()
        self.seed = seed
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.structured_output = structured_output
        self.ledger = JudgeLedger()

    async def judge(self, request) -> Any:
        """The canonical verdict for `request`, or a `JudgeFailure` once the retry policy gives up."""
        kind = request_kind(request)
        rendered = render(request, self.templates, seed=self.seed)

        def parse(completion):
            return parse_answer(completion.text, request, rendered)

        try:
            verdict, _ = await complete_and_parse(
                self.backend,
                rendered.messages,
                parse,
                retry=self.retry,
                ledger=self.ledger,
                request_kind=kind,
                what=f"{kind} request (query_id={request.query_id!r})",
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                response_format=answer_schema(request) if self.structured_output else None,
            )
        except JudgeError as exc:
            return exc.as_failure()
        return verdict

    def describe(self) -> str:
        """One line for the run's log: what judges, where, with which templates."""
        return (f"LLMJudge over {self.backend!r}, templates: {self.templates.source}, "
                f"retry: {self.retry.max_attempts} attempts")  # fmt: skip

    def __repr__(self) -> str:
        return f"LLMJudge(backend={self.backend!r}, seed={self.seed}, retry={self.retry!r})"
