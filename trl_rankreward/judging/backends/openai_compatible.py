"""`OpenAICompatibleBackend`: chat completions from vLLM, SGLang, `transformers serve` or any OpenAI-compatible
server, over `aiohttp` (the protocol is one JSON POST; an SDK's models would cost several times its client CPU).

Each base URL is a replica routed by `ReplicaPool` (least in flight). `complete` makes one HTTP request within
`timeout_s`; failures are `BackendError`s of a kind (docs/judging.md, "OpenAICompatibleBackend"), retried by the
caller's policy. Bodies are read up to `max_response_bytes`, so the client's memory is bounded whatever a server
sends. Each event loop gets one `aiohttp.ClientSession`, closed when the loop shuts down its async generators (as
`asyncio.run` does) or with the backend. The API key comes from `api_key_env` and never appears in reprs, logs or
errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp

from .base import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
    BackendError,
    Completion,
)

_START_CHECK_TIMEOUT_S = 5.0
_REST_S = 10.0  # a URL that refused a connection or timed out is skipped this long while another is live
_TOKENIZE_CONCURRENCY = 16  # `/tokenize` calls in flight per loop, on connections beside the chat requests'
_CHUNK_BYTES = 64 * 1024


@dataclass
class _LoopState:
    session: aiohttp.ClientSession
    headers: dict[str, str]
    tokenize_slots: asyncio.Semaphore
    closer: AsyncGenerator  # held here: the loop keeps its async generators only weakly


class OpenAICompatibleBackend:
    """Chat backend for one or several OpenAI-compatible servers serving `model` (a URL without a path gets
    "/v1"; for `transformers serve`, `model` is the path it was started with). `check_on_start` GETs
    `<url>/models` on every URL now and fails fast if one does not answer or, with `require_listed_model`, does not
    list `model`; `max_model_len` is the window for servers that list none there (`judging.server_settings`)."""

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
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
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
        if isinstance(max_response_bytes, bool) or not isinstance(max_response_bytes, int) or max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be an integer >= 1, got {max_response_bytes!r}")
        self.max_response_bytes = max_response_bytes
        self.base_urls = [normalize_base_url(u) for u in urls]
        self.model = model
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.max_model_len = max_model_len
        self.timeout_s = timeout_s
        self.pool = ReplicaPool(len(self.base_urls), per_replica=per_replica, total=max_concurrency, rest_s=_REST_S)
        self._tokenize_offered = [True] * len(self.base_urls)  # until a server answers 404/405 to /tokenize
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        check_timeout = min(_START_CHECK_TIMEOUT_S, timeout_s)
        self._tokenize_timeout = aiohttp.ClientTimeout(total=check_timeout)
        # a loop's entry goes when the loop shuts down (a session holds its loop, so a weak key would never go)
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        weakref.finalize(self, _release_sessions, self._loops)
        self.listed_max_model_lens = [
            listed_window(url, self._api_key(), model, require_listed_model, check_timeout, max_response_bytes)
            if check_on_start
            else None
            for url in self.base_urls
        ]

    def _api_key(self) -> str:
        return os.environ.get(self.api_key_env) or "EMPTY"

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            for closed in [other for other in self._loops if other.is_closed()]:  # closed without shutting down
                del self._loops[closed]
            # the chat requests' connections (the pool bounds them by max_concurrency) plus /tokenize's
            connector = aiohttp.TCPConnector(limit=self.max_concurrency + _TOKENIZE_CONCURRENCY)
            # answers are small JSON: asked uncompressed, they are read without a decompressor
            session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
            headers = {"Authorization": f"Bearer {self._api_key()}", "Content-Type": "application/json",
                       "Accept-Encoding": "identity"}  # fmt: skip
            # forgetting the loop's entry must not hold `self` (the finalizer holds `_loops`)
            closer = _close_at_loop_shutdown(session, functools.partial(self._loops.pop, loop, None))
            state = self._loops[loop] = _LoopState(session, headers, asyncio.Semaphore(_TOKENIZE_CONCURRENCY), closer)
        return state

    def context_window(self) -> int | None:
        """The smallest `max_model_len` the replicas list, else the configured one, else None (unknown)."""
        listed = [n for n in self.listed_max_model_lens if n]
        return min(listed) if listed else self.max_model_len

    async def count_prompt_tokens(self, messages: list[dict]) -> int | None:
        """The prompt tokens of `messages` from a live replica's `POST /tokenize` (vLLM's); None where no replica
        offers it or the count fails."""
        offered = [i for i in range(len(self.base_urls)) if self._tokenize_offered[i]]
        if not offered:
            return None
        live = [i for i in offered if self.pool.is_live(i)] or offered
        index = min(live, key=lambda i: self.pool.in_flight[i])
        url = self.base_urls[index].removesuffix("/v1") + "/tokenize"  # vLLM serves it at the root
        body = json.dumps({"model": self.model, "messages": messages, "add_generation_prompt": True}).encode("ascii")
        state = self._state()
        try:
            async with state.tokenize_slots:
                async with state.session.post(
                    url, data=body, headers=state.headers, timeout=self._tokenize_timeout
                ) as response:
                    status, data = response.status, await _read_bounded(response, self.max_response_bytes, url)
        except (TimeoutError, aiohttp.ClientError, BackendError):
            return None
        if status in (404, 405):  # not a vLLM server: never ask this replica again
            self._tokenize_offered[index] = False
            return None
        try:
            count = json.loads(data).get("count") if status == 200 else None
        except (ValueError, AttributeError):
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
        state = self._state()
        payload = {"model": self.model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        if response_format is not None:
            payload["response_format"] = response_format
        body = json.dumps(payload).encode("ascii")
        async with self.pool.slot() as index:
            url = self.base_urls[index]
            try:
                async with state.session.post(
                    f"{url}/chat/completions", data=body, headers=state.headers, timeout=self._timeout
                ) as response:
                    status, headers = response.status, response.headers
                    data = await _read_bounded(response, self.max_response_bytes, url)
            except TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors too: check them first
                self.pool.rest(index)
                raise BackendError(
                    f"Judge request to {url} got no complete answer within {self.timeout_s:g}s", kind="timeout"
                ) from exc
            except aiohttp.ClientError as exc:  # refused, reset, a body cut short of its Content-Length
                self.pool.rest(index)
                raise BackendError(f"Cannot reach judge server {url}: {_transport_reason(exc)}") from exc
        if status >= 400:
            raise BackendError(
                f"Judge server {url} returned HTTP {status}: {_short(_error_detail(data))}",
                kind="http",
                status=status,
                retry_after_s=retry_after_s(headers),
            )
        return _completion(data, url, self.model)

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleBackend(base_urls={self.base_urls!r}, model={self.model!r}, "
            f"max_concurrency={self.max_concurrency}, timeout_s={self.timeout_s})"
        )


def _close_at_loop_shutdown(session: aiohttp.ClientSession, forget) -> AsyncGenerator:
    """A started async generator that closes `session` and calls `forget()` when the running loop shuts down its
    async generators; the caller must hold it (the loop holds it weakly)."""

    async def closer() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await session.close()
            forget()

    generator = closer()
    with contextlib.suppress(StopIteration):
        generator.asend(None).send(None)  # runs it to its `yield`: the loop now knows it
    return generator


def _release_sessions(loops: dict[asyncio.AbstractEventLoop, _LoopState]) -> None:
    """A backend collected while a loop it used lives on: its sessions' connections are closed on that loop."""
    for loop, state in list(loops.items()):
        connector = state.session.connector
        if state.session.closed or connector is None:
            continue
        state.session.detach()
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(connector.close(), loop)


async def _read_bounded(response: aiohttp.ClientResponse, max_bytes: int, url: str) -> bytes:
    """The body of `response`, read in chunks; a "too_large" `BackendError`, the connection closed, once it
    passes `max_bytes`."""
    chunks, size = [], 0
    if (response.content_length or 0) <= max_bytes:
        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
            size += len(chunk)
            if size > max_bytes:
                break
            chunks.append(chunk)
        else:
            return b"".join(chunks)
    response.close()
    raise BackendError(
        f"Judge server {url} sent a response body over max_response_bytes={max_bytes} bytes (HTTP "
        f"{response.status}, Content-Length {response.content_length}); cut there. A judge's answer is a few kB: the "
        "server or a proxy in front of it misbehaves (or raise max_response_bytes for answers this long)",
        kind="too_large",
    )


def _transport_reason(exc: aiohttp.ClientError) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):  # its text repeats the address and adds ssl details
        return f"connection failed ({type(exc.os_error).__name__})"
    return str(exc) or type(exc).__name__


def normalize_base_url(url: str) -> str:
    """Strip the trailing slash; a bare `http://host:port` gets `/v1`; a URL with user-info is refused."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        shown = redact_user_info(url) if isinstance(url, str) else url
        raise ValueError(f"Judge base URL must start with http:// or https://, got {shown!r}")
    url = url.rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        raise ValueError(
            f"Judge base URL {redact_user_info(url)!r} holds credentials (user-info before '@'); they would be "
            "printed wherever the URL is, and are not sent. Remove them from the URL and put the API key in the "
            "environment variable named by api_key_env (judge_api_key_env in a training config)"
        )
    if parts.path in ("", "/"):
        url += "/v1"
    return url


def redact_user_info(url: str) -> str:
    """`url` with its user-info (before an '@' in its host part) masked."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    host_end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    netloc = rest[:host_end]
    return f"{scheme}://***@{netloc.rpartition('@')[2]}{rest[host_end:]}" if "@" in netloc else url


def listed_window(
    base_url: str, api_key: str, model: str, require: bool, timeout_s: float, max_bytes: int
) -> int | None:
    """vLLM's `max_model_len` of `model` (or of the only entry) in `GET <base_url>/models`; `BackendError` naming
    the URL if it does not answer or, with `require`, does not list `model`."""
    url = f"{base_url}/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            data = response.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise BackendError(
                f"Judge server check failed: GET {url} answered more than {max_bytes} bytes (max_response_bytes)",
                kind="too_large",
            )
        body = json.loads(data.decode("utf-8") or "{}")
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
    entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    ids = [m.get("id") for m in entries]
    if require and model not in ids:
        raise BackendError(
            f"Judge model {model!r} is not served at {base_url}: GET {base_url}/models lists {ids}. Set judge_model "
            "to one of them (for `transformers serve`, the path the server was started with), or point "
            "judge_base_urls at the server that serves it.",
            kind="http",
            status=404,
        )
    chosen = [m for m in entries if m.get("id") == model] or (entries if len(entries) == 1 else [])
    return _count(chosen[0].get("max_model_len") if chosen else None) or None


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


def _completion(body: bytes, url: str, model: str) -> Completion:
    """The `Completion` of a success status's body; else a "malformed" or server-fault `BackendError`."""
    try:
        payload = json.loads(body)
    except ValueError as exc:  # an HTML page from a proxy, JSON cut off, bytes that are not UTF-8
        raise BackendError(
            f"Judge server {url} answered a success status with a body that is not valid JSON ({exc}); a proxy or "
            f"the server cut or replaced the response: {_short(body.decode('utf-8', 'replace'), 200)!r}",
            kind="malformed",
        ) from None
    _server_fault(payload, url, model)
    choices = payload.get("choices") if isinstance(payload, dict) else None
    choice = (choices[0] if choices else {}) if isinstance(choices, list) else None
    message = choice.get("message", {}) if isinstance(choice, dict) else None
    text = message.get("content") or "" if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise BackendError(
            f"Judge server {url} answered a success status with a body that is not a chat completion: "
            f"{_short(body.decode('utf-8', 'replace'), 200)!r}",
            kind="malformed",
        )
    reasoning, finish_reason = message.get("reasoning_content"), choice.get("finish_reason")
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(
        text=text,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


def _server_fault(payload, url: str, model: str) -> None:
    if not isinstance(payload, dict):
        return
    if "error" in payload and "choices" not in payload:
        raise BackendError(
            f"Judge server {url} answered HTTP 200 with an error instead of a chat completion: "
            f"{_short(_error_detail(json.dumps(payload).encode()))}",
            kind="error_body",
        )
    if payload.get("choices") == []:
        raise BackendError(
            f"Judge server {url} answered a chat completion with no choices (an empty `choices` list): the server "
            "produced no answer for the request",
            kind="no_choices",
        )
    answered = payload.get("model")
    if isinstance(answered, str) and answered and not same_model(model, answered):
        raise BackendError(
            f"Judge server {url} answered with model {answered!r}, not the configured {model!r}: a gateway or a "
            "replica serves another model. Point the judge URLs at servers of judge_model, or set judge_model to "
            "the model they serve",
            kind="wrong_model",
        )


def same_model(configured: str, answered: str) -> bool:
    """Whether an answer's `model` names the configured one: the same, with a version suffix (`gpt-4o` as
    `gpt-4o-2024-08-06`), or the same last path part (`Qwen/Qwen3-8B` as `/models/Qwen3-8B`)."""
    if answered == configured or answered.startswith(configured + "-"):
        return True
    return answered.rstrip("/").rsplit("/", 1)[-1] == configured.rstrip("/").rsplit("/", 1)[-1]


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _error_detail(body: bytes) -> str:
    """An OpenAI error body's `message` (vLLM's top-level one too), else the text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return text
    error = payload.get("error", payload) if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else text


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class ReplicaPool:
    """Which judge replica of `n` gets the next request: the live one with the fewest requests in flight, so a fast
    replica gets more and a slow one is never a step's bottleneck (round-robin is only as fast as its slowest).
    At most `per_replica` (a replica's batch size) are in flight on one, so a replica's queue stays on the client,
    where any replica that frees a slot takes it, and `total` over all; a replica that refused a connection or
    timed out rests `rest_s` seconds of `clock` while another is live. The counters are shared by every event
    loop; only the queue of waiting requests belongs to a loop, served in arrival order."""

    def __init__(self, n: int, *, per_replica: int, total: int, rest_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        if n < 1 or per_replica < 1 or total < 1:
            raise ValueError(f"ReplicaPool needs n, per_replica and total >= 1; got {n}, {per_replica}, {total}")
        self.n, self.per_replica, self.total, self.rest_s = n, per_replica, total, rest_s
        self.in_flight = [0] * n
        self.sent = [0] * n  # requests routed to each replica so far
        self.resting_until = [0.0] * n
        self._clock = clock
        # per loop: the futures of the requests waiting for a slot, first come first
        self._waiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, deque[asyncio.Future]] = (
            weakref.WeakKeyDictionary()
        )

    def is_live(self, index: int) -> bool:
        return self.resting_until[index] <= self._clock()

    def choose(self) -> int | None:
        """The replica the next request goes to (of equally loaded ones, the one sent fewest so far, then the
        first), or None when it has to wait for a free slot."""
        if sum(self.in_flight) >= self.total:
            return None
        free = [i for i in range(self.n) if self.in_flight[i] < self.per_replica]
        live = [i for i in range(self.n) if self.is_live(i)]
        candidates = [i for i in free if i in live] if live else free
        if not candidates:
            return None
        return min(candidates, key=lambda i: (self.in_flight[i], self.sent[i], i))

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """`async with pool.slot() as index:` one request on replica `index`, waiting for a free slot."""
        loop = asyncio.get_running_loop()
        waiters = self._waiters.get(loop)
        if waiters is None:
            waiters = self._waiters[loop] = deque()
        index = None if waiters else self.choose()  # a newcomer waits behind the requests already waiting
        woken = None
        while index is None:
            # first in the queue again if a newcomer took the slot it was woken for, else last
            queue_at = waiters.appendleft if woken is not None else waiters.append
            woken = loop.create_future()
            queue_at(woken)
            try:
                await woken
            except asyncio.CancelledError:
                if woken.cancelled():
                    with contextlib.suppress(ValueError):
                        waiters.remove(woken)
                else:  # woken, then cancelled: the wake-up goes to the next waiter
                    _wake_first(waiters)
                raise
            index = self.choose()
        self.in_flight[index] += 1
        self.sent[index] += 1
        try:
            yield index
        finally:
            self.in_flight[index] -= 1
            _wake_first(waiters)

    def rest(self, index: int) -> None:
        self.resting_until[index] = self._clock() + self.rest_s

    def __repr__(self) -> str:
        return (
            f"ReplicaPool(n={self.n}, per_replica={self.per_replica}, total={self.total}, in_flight={self.in_flight})"
        )


def _wake_first(waiters: deque[asyncio.Future]) -> None:
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return
