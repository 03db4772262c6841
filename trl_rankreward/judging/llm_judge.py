"""`LLMJudge`: a judge that asks a chat model, with the papers' prompts, and checks its answers.

For each request: render it (deterministic display order), call the backend, parse and
validate the JSON answer, map it back to canonical terms. An invalid answer or a retryable
backend failure (`BackendError.retryable`) is retried up to `max_attempts` times; an error
that repeats on every try (HTTP 400, 401, 404) fails the request at once. After that the
request returns a `JudgeFailure`, never a made-up verdict. Every attempt is one call in
`ledger`, with the backend's token usage and latency.

Retries multiply: the backend retries each attempt's transport errors itself. With
`OpenAICompatibleBackend(max_retries=R, timeout_s=T, backoff_s=b)` one request makes at most
`max_attempts * (1 + R)` HTTP requests and, against a server that hangs, takes at most
`max_attempts * ((1 + R) * T + b * (2**R - 1))` seconds: 3 * (4 * 120 + 3.5) = 1450.5 s with
the defaults. The ledger counts attempts, not the backend's HTTP retries.
"""

from __future__ import annotations

from typing import Any

from .backends.base import BackendError, ChatBackend
from .ledger import JudgeLedger
from .parsing import InvalidAnswer, answer_schema, parse_answer
from .rendering import render
from .requests import JudgeFailure, request_kind
from .templates import JudgeTemplates


class LLMJudge:
    """Judge requests with a chat model behind `backend`.

    Args:
        backend: any `ChatBackend` (`OpenAICompatibleBackend`, `TransformersBackend`).
        templates: prompt templates; default: the papers' prompts (`JudgeTemplates()`).
        seed: global seed of the display-order hash.
        max_attempts: calls per request before it fails (MatrixReward App. A.2: three).
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
        max_attempts: int = 3,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        structured_output: bool = False,
    ):
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        self.backend = backend
        self.templates = templates or JudgeTemplates()
        self.seed = seed
        self.max_attempts = max_attempts
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.structured_output = structured_output
        self.ledger = JudgeLedger()

    async def judge(self, request) -> Any:
        """The canonical verdict for `request`, or a `JudgeFailure` after `max_attempts` calls."""
        kind = request_kind(request)
        rendered = render(request, self.templates, seed=self.seed)
        response_format = answer_schema(request) if self.structured_output else None
        failure_kind, message = "error", "no attempt made"
        for attempts in range(1, self.max_attempts + 1):
            try:
                completion = await self.backend.complete(
                    rendered.messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    response_format=response_format,
                )
            except BackendError as exc:
                self.ledger.record(request_kind=kind, parsed=False, failure=exc.kind)
                failure_kind, message = exc.kind, str(exc)
                if not exc.retryable:
                    return JudgeFailure(
                        failure_kind,
                        f"{kind} request (query_id={request.query_id!r}) failed with an error that does not go away "
                        f"on retry: {message}",
                        attempts=attempts,
                    )
                continue
            usage = dict(
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                latency_s=completion.latency_s,
            )
            try:
                verdict = parse_answer(completion.text, request, rendered)
            except InvalidAnswer as exc:
                self.ledger.record(request_kind=kind, parsed=False, failure="invalid", **usage)
                failure_kind, message = "invalid", str(exc)
                continue
            self.ledger.record(request_kind=kind, parsed=True, **usage)
            return verdict
        return JudgeFailure(
            failure_kind,
            f"{kind} request (query_id={request.query_id!r}) failed after {self.max_attempts} attempt(s): {message}",
            attempts=self.max_attempts,
        )

    def __repr__(self) -> str:
        return f"LLMJudge(backend={self.backend!r}, seed={self.seed}, max_attempts={self.max_attempts})"
