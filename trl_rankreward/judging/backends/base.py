"""What `LLMJudge` needs from a chat model: `async complete(messages, ...) -> Completion`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

BackendFailure = Literal[
    "transport", "timeout", "http", "malformed", "too_large", "no_choices", "error_body", "wrong_model"
]

#: decoding defaults of a judge call (a judge answers in a few hundred tokens, greedily) ...
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TEMPERATURE = 0.0
#: ... and of a GenRM, which writes a rationale before its verdict
GENRM_MAX_TOKENS = 4096
#: how a judge server is reached unless told otherwise (`OpenAICompatibleBackend`, `JudgeServerSettings`)
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MAX_CONCURRENCY = 64
DEFAULT_TIMEOUT_S = 120.0
#: most bytes of one response body a client reads (a judge's answer is a few kB), so a server that sends more
#: (or streams without end) cannot fill the client's memory
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Completion:
    """One chat completion: the text, the server's `usage` numbers, its separate `reasoning_content` (servers with
    a reasoning parser) and `finish_reason` ("stop", "length" when `max_tokens` cut it; None: not said)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning: str | None = None
    finish_reason: str | None = None


class BackendError(RuntimeError):
    """A completion that could not be obtained in one try. `kind`: "transport", "timeout", "http" (the error status
    in `status`), "malformed" (a success status whose body is not a chat completion), or another server fault:
    "too_large" (a body over the client's byte bound), "no_choices", "error_body" (an OpenAI error under 200),
    "wrong_model". `retry_after_s`: the server's `Retry-After`, when sent."""

    def __init__(
        self,
        message: str,
        *,
        kind: BackendFailure = "transport",
        status: int | None = None,
        retry_after_s: float | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later: all but HTTP errors other than 408, 429 and 5xx (400 context
        too long, 401 bad key, 404 unknown model repeat on every try)."""
        if self.kind != "http":
            return True
        return self.status in (408, 429) or (self.status is not None and self.status >= 500)


@runtime_checkable
class ChatBackend(Protocol):
    """Anything that completes a chat: `OpenAICompatibleBackend`, `TransformersBackend`, a test fake."""

    async def complete(
        self,
        messages: list[dict],
        *,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        response_format: dict | None = None,
    ) -> Completion: ...
