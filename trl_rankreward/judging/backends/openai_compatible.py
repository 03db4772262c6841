"""`OpenAICompatibleBackend`: chat completions from vLLM, SGLang, `transformers serve` or any
OpenAI-compatible server, through `openai.AsyncOpenAI`.

One client per base URL (a *replica*); `replica_pool.ReplicaPool` routes each request (a replica
that refused a connection or timed out rests, so retries go to a live one). Each request has a deadline of
`timeout_s` for the whole answer, counted from when it leaves the queue (a server that trickles
bytes cannot hold it longer: httpx's own timeout bounds each read, not the request). `complete`
makes one HTTP request: failures come out as `BackendError` (with the server's `Retry-After`),
and the caller's `judging.retry.RetryPolicy` decides whether to try again. A success status
whose body is not a chat completion (an HTML page from a proxy, truncated JSON) is a
"malformed" failure, not an empty answer. Token counts are the server's `usage` numbers.
`context_window()` and `count_prompt_tokens(messages)` serve `judging.prompt_budget`.

Clients and the per-loop parts of the pool belong to an event loop, and trainers call
`asyncio.run` once per step, so they are created lazily for each running loop.
The API key is read from the environment variable `api_key_env` ("EMPTY" when unset, which
local servers accept); it never appears in reprs, logs or error messages.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from dataclasses import dataclass

import httpx
import openai

from .base import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
    BackendError,
    Completion,
)
from .replica_pool import ReplicaPool

_START_CHECK_TIMEOUT_S = 5.0
# A URL that refused a connection or timed out is skipped this long while another URL is live.
_REST_S = 10.0


@dataclass
class _LoopState:
    clients: list[openai.AsyncOpenAI]
    tokenizer_client: httpx.AsyncClient


class OpenAICompatibleBackend:
    """Chat backend for one or several OpenAI-compatible servers serving `model`.

    Args:
        base_urls: a URL or a list, e.g. "http://localhost:8000/v1" (a URL without a path gets "/v1").
        model: the served model name (for `transformers serve`, the path it was started with).
        api_key_env: environment variable holding the API key.
        max_concurrency: requests in flight at once, over all URLs.
        max_concurrency_per_replica: requests in flight at once on one URL (None: `max_concurrency`);
            a replica's batch size (vLLM's `--max-num-seqs`) is a good value.
        max_model_len: the judge's context window, prompt and answer together, for servers that
            do not list `max_model_len` at `/models` (None: unknown, prompts are not fitted).
        timeout_s: deadline of one HTTP request, from sending it to the last byte of the answer.
        check_on_start: GET `<url>/models` on every URL now, and fail fast if one does not
            answer or does not list `model`.
        require_listed_model: with `check_on_start`, a `model` missing from a server's list is an
            error; turn off for gateways that route models they do not list.
    """

    def __init__(
        self,
        base_urls: str | list[str],
        model: str,
        *,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        max_concurrency_per_replica: int | None = None,
        max_model_len: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        check_on_start: bool = True,
        require_listed_model: bool = True,
    ):
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise ValueError("OpenAICompatibleBackend needs at least one base URL, got an empty list")
        per_replica = max_concurrency if max_concurrency_per_replica is None else max_concurrency_per_replica
        if max_concurrency < 1 or per_replica < 1 or not timeout_s > 0:
            raise ValueError(
                "Expected max_concurrency >= 1, max_concurrency_per_replica >= 1 and timeout_s > 0; "
                f"got {max_concurrency}, {max_concurrency_per_replica}, {timeout_s}"
            )
        if max_model_len is not None and max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1 or None, got {max_model_len}")
        self.base_urls = [normalize_base_url(u) for u in urls]
        self.model = model
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.max_model_len = max_model_len
        self.timeout_s = timeout_s
        self.pool = ReplicaPool(len(self.base_urls), per_replica=per_replica, total=max_concurrency, rest_s=_REST_S)
        self.listed_max_model_lens: list[int | None] = [None] * len(self.base_urls)
        self._tokenize_offered = [True] * len(self.base_urls)  # until a server answers 404/405 to /tokenize
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        if check_on_start:
            for index, url in enumerate(self.base_urls):
                entries = list_models(url, self._api_key(), timeout_s=min(_START_CHECK_TIMEOUT_S, timeout_s))
                check_listed_model(url, entries, model if require_listed_model else None)
                self.listed_max_model_lens[index] = _listed_max_model_len(entries, model)

    def _api_key(self) -> str:
        return os.environ.get(self.api_key_env) or "EMPTY"

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            key = self._api_key()
            clients = [
                openai.AsyncOpenAI(base_url=u, api_key=key, timeout=self.timeout_s, max_retries=0)
                for u in self.base_urls
            ]
            tokenizer_client = httpx.AsyncClient(timeout=min(_START_CHECK_TIMEOUT_S, self.timeout_s))
            state = self._loops[loop] = _LoopState(clients, tokenizer_client)
        return state

    def context_window(self) -> int | None:
        """Tokens of prompt and answer one request may hold: the smallest `max_model_len` the replicas
        list, else the configured one, else None (unknown)."""
        listed = [n for n in self.listed_max_model_lens if n]
        return min(listed) if listed else self.max_model_len

    async def count_prompt_tokens(self, messages: list[dict]) -> int | None:
        """The prompt tokens of `messages` under the served model's chat template, from a live replica's
        `POST /tokenize` (vLLM's); None where no replica offers it or the count fails (the caller then
        counts itself)."""
        offered = [i for i in range(len(self.base_urls)) if self._tokenize_offered[i]]
        if not offered:
            return None
        live = [i for i in offered if self.pool.is_live(i)] or offered
        index = min(live, key=lambda i: self.pool.in_flight[i])
        url = _server_root(self.base_urls[index]) + "/tokenize"
        headers = {"Authorization": f"Bearer {self._api_key()}"}
        body = {"model": self.model, "messages": messages, "add_generation_prompt": True}
        try:
            response = await self._state().tokenizer_client.post(url, json=body, headers=headers)
        except httpx.HTTPError:
            return None
        if response.status_code in (404, 405):  # not a vLLM server: never ask this replica again
            self._tokenize_offered[index] = False
            return None
        try:
            count = response.json().get("count") if response.status_code == 200 else None
        except ValueError:
            return None
        return count if isinstance(count, int) and count > 0 else None

    async def complete(
        self,
        messages: list[dict],
        *,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        response_format: dict | None = None,
    ) -> Completion:
        """One chat completion from the least loaded live replica; raises `BackendError` if it fails."""
        state = self._state()
        extra = {"response_format": response_format} if response_format is not None else {}
        async with self.pool.slot() as index:
            url = self.base_urls[index]
            try:
                request = state.clients[index].chat.completions.create(
                    model=self.model, messages=messages, temperature=temperature, max_tokens=max_tokens, **extra
                )
                response = await asyncio.wait_for(request, self.timeout_s)
            except (TimeoutError, openai.OpenAIError) as exc:
                error = _backend_error(exc, url, self.timeout_s)
                if error.kind in ("transport", "timeout"):
                    self.pool.rest(index)
                raise error from exc
            except json.JSONDecodeError as exc:  # a 200 whose JSON body does not parse (the client's json.loads)
                raise BackendError(
                    f"Judge server {url} answered HTTP 200 with a body that is not valid JSON ({exc}); "
                    "a proxy or the server cut the response",
                    kind="malformed",
                ) from exc
            return _completion(response, url)

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleBackend(base_urls={self.base_urls!r}, model={self.model!r}, "
            f"max_concurrency={self.max_concurrency}, timeout_s={self.timeout_s})"
        )


def normalize_base_url(url: str) -> str:
    """Strip the trailing slash; a bare `http://host:port` gets the usual `/v1`."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"Judge base URL must start with http:// or https://, got {url!r}")
    url = url.rstrip("/")
    if urllib.parse.urlsplit(url).path in ("", "/"):
        url += "/v1"
    return url


def list_models(base_url: str, api_key: str, *, timeout_s: float = 5.0) -> list[dict]:
    """The model entries of `GET <base_url>/models`; `BackendError` naming the URL if it does not answer."""
    url = f"{base_url}/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = json.loads(response.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as exc:
        hint = " (check the API key environment variable)" if exc.code in (401, 403) else ""
        raise BackendError(
            f"Judge server check failed: GET {url} returned HTTP {exc.code}{hint}", kind="http", status=exc.code
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        kind = "timeout" if isinstance(reason, TimeoutError) else "transport"
        raise BackendError(
            f"Judge server at {base_url} does not answer (GET {url} within {timeout_s:g}s: {reason}). "
            "Start the server, or fix the base URL.",
            kind=kind,
        ) from None
    data = body.get("data", []) if isinstance(body, dict) else []
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def check_listed_model(base_url: str, entries: list[dict], model: str | None) -> None:
    """`BackendError` if `model` (unless None) is not among the ids of `entries`."""
    ids = [m.get("id") for m in entries]
    if model is not None and model not in ids:
        raise BackendError(
            f"Judge model {model!r} is not served at {base_url}: GET {base_url}/models lists {ids}. Set judge_model "
            "to one of them (for `transformers serve`, the path the server was started with), or point "
            "judge_base_urls at the server that serves it.",
            kind="http",
            status=404,
        )


def _listed_max_model_len(entries: list[dict], model: str) -> int | None:
    """vLLM's `max_model_len` of `model` in a `/models` answer (of its only entry when `model` is not listed)."""
    chosen = [m for m in entries if m.get("id") == model] or (entries if len(entries) == 1 else [])
    value = chosen[0].get("max_model_len") if chosen else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _server_root(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (vLLM serves `/tokenize` at the root)."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


def _backend_error(exc: Exception, url: str, timeout_s: float) -> BackendError:
    if isinstance(exc, (openai.APITimeoutError, TimeoutError)):
        return BackendError(f"Judge request to {url} got no complete answer within {timeout_s:g}s", kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return BackendError(f"Cannot reach judge server {url}: {exc}", kind="transport")
    if isinstance(exc, openai.APIStatusError):
        return BackendError(
            f"Judge server {url} returned HTTP {exc.status_code}: {_short(exc.message)}",
            kind="http",
            status=exc.status_code,
            retry_after_s=retry_after_s(exc.response.headers),
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return BackendError(
            f"Judge server {url} answered a body that is not a chat completion: {exc}", kind="malformed"
        )
    return BackendError(f"Judge request to {url} failed: {type(exc).__name__}: {_short(str(exc))}", kind="transport")


def retry_after_s(headers) -> float | None:
    """The server's requested wait: `retry-after-ms`, or `Retry-After` in seconds or as an HTTP date."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        if value.strip().replace(".", "", 1).isdigit():
            return float(value)
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def _completion(response, url: str) -> Completion:
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):  # e.g. the client hands back the text of an HTML page
        raise BackendError(
            f"Judge server {url} answered a success status with a body that is not a chat completion: "
            f"{_short(str(response), 200)!r}",
            kind="malformed",
        )
    text = (choices[0].message.content or "") if choices else ""
    reasoning = getattr(choices[0].message, "reasoning_content", None) if choices else None
    finish_reason = getattr(choices[0], "finish_reason", None) if choices else None
    usage = response.usage
    return Completion(
        text=text,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
