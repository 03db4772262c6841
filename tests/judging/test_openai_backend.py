"""OpenAICompatibleBackend against a scripted local HTTP server: one try per call, failure kinds,
Retry-After, usage, round-robin, key hygiene, the start-up check."""

import asyncio
import gc
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trl_rankreward.judging.backends.base import BackendError
from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend, normalize_base_url
from trl_rankreward.testing.chat_servers import free_port

MESSAGES = [{"role": "user", "content": "hi"}]


class ScriptedServer:
    """Answers POST /v1/chat/completions with scripted statuses (200 -> a completion with usage 11/3).

    A script entry is a status, `(status, headers)`, "html" (200 with an HTML page) or "truncated"
    (200 with half a JSON completion). GET /v1/models lists `models`.
    """

    def __init__(self, statuses=(), delay_s=0.0, models=("judge",)):
        self.statuses = list(statuses)
        self.delay_s = delay_s
        self.models = list(models)
        self.requests: list[dict] = []
        self.auth: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=(), content_type="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in dict(headers).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                server.auth.append(self.headers.get("Authorization", ""))
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.auth.append(self.headers.get("Authorization", ""))
                time.sleep(server.delay_s)
                entry = server.statuses.pop(0) if server.statuses else 200
                status, headers = entry if isinstance(entry, tuple) else (entry, ())
                if status == "html":
                    self._send(200, b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")
                elif status == "truncated":
                    self._send(200, b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess')
                elif status != 200:
                    self._send(status, {"error": {"message": f"scripted {status}"}}, headers)
                else:
                    self._send_completion(body["model"])

            def _send_completion(self, model):
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
                        ],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory():
    servers = []

    def make(*args, **kwargs):
        servers.append(ScriptedServer(*args, **kwargs))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def backend_for(urls, **kw):
    return OpenAICompatibleBackend(urls, "judge", **kw)


def test_completion_text_and_usage_come_from_the_response(server_factory):
    server = server_factory()
    completion = asyncio.run(backend_for(server.url).complete(MESSAGES, temperature=0.0, max_tokens=7))
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("ok", 11, 3)
    sent = server.requests[0]
    assert (sent["model"], sent["max_tokens"], sent["temperature"], sent["messages"]) == ("judge", 7, 0.0, MESSAGES)
    assert "response_format" not in sent


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_a_failed_call_is_one_http_request_and_retryable(server_factory, status):
    # The backend never retries itself: judging.calls.RetryPolicy does, for every caller alike.
    server = server_factory([status])
    with pytest.raises(BackendError) as info:
        asyncio.run(backend_for(server.url).complete(MESSAGES))
    assert (info.value.kind, info.value.status, info.value.retryable, len(server.requests)) == ("http", status, True, 1)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_are_not_retryable(server_factory, status):
    server = server_factory([status])
    with pytest.raises(BackendError) as info:
        asyncio.run(backend_for(server.url).complete(MESSAGES))
    assert (info.value.kind, info.value.status, info.value.retryable) == ("http", status, False)
    assert f"returned HTTP {status}" in str(info.value) and server.url in str(info.value)


@pytest.mark.parametrize(
    "headers, expected",
    [({"Retry-After": "7"}, 7.0), ({"retry-after-ms": "250"}, 0.25), ({}, None), ({"Retry-After": "soon"}, None)],
)
def test_retry_after_is_read_from_a_429(server_factory, headers, expected):
    server = server_factory([(429, headers)])
    with pytest.raises(BackendError) as info:
        asyncio.run(backend_for(server.url).complete(MESSAGES))
    assert info.value.retry_after_s == expected


@pytest.mark.parametrize("body", ["html", "truncated"])
def test_a_200_that_is_not_a_chat_completion_is_a_malformed_failure(server_factory, body):
    # Before, an HTML page came back as an empty answer and truncated JSON as a bare JSONDecodeError.
    server = server_factory([body])
    with pytest.raises(BackendError) as info:
        asyncio.run(backend_for(server.url).complete(MESSAGES))
    assert info.value.kind == "malformed" and info.value.retryable and server.url in str(info.value)


def test_timeout_is_reported_as_timeout(server_factory):
    server = server_factory(delay_s=2.0)
    start = time.monotonic()
    with pytest.raises(BackendError) as info:
        asyncio.run(backend_for(server.url, timeout_s=0.3).complete(MESSAGES))
    assert info.value.kind == "timeout" and time.monotonic() - start < 1.9


def test_round_robin_over_base_urls_and_a_new_event_loop_per_call(server_factory):
    first, second = server_factory(), server_factory()
    backend = backend_for([first.url, second.url])

    async def four():
        return await asyncio.gather(*[backend.complete(MESSAGES) for _ in range(4)])

    asyncio.run(four())
    asyncio.run(four())  # trainers call asyncio.run per step: clients are made per loop
    assert (len(first.requests), len(second.requests)) == (4, 4)
    gc.collect()
    assert len(backend._loops) == 0  # clients of finished loops are not kept


def test_response_format_is_forwarded(server_factory):
    server = server_factory()
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    asyncio.run(backend_for(server.url).complete(MESSAGES, response_format=fmt))
    assert server.requests[0]["response_format"] == fmt


def test_api_key_comes_from_the_environment_and_stays_out_of_reprs(server_factory, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", "sk-secret-123")
    server = server_factory([400])
    backend = backend_for(server.url, api_key_env="JUDGE_KEY_FOR_TEST")
    with pytest.raises(BackendError) as info:
        asyncio.run(backend.complete(MESSAGES))
    assert server.auth == ["Bearer sk-secret-123", "Bearer sk-secret-123"]  # start-up check, then the call
    assert "sk-secret" not in repr(backend) and "sk-secret" not in str(info.value)
    monkeypatch.delenv("JUDGE_KEY_FOR_TEST")
    other = server_factory()
    asyncio.run(backend_for(other.url, api_key_env="JUDGE_KEY_FOR_TEST").complete(MESSAGES))
    assert other.auth[-1] == "Bearer EMPTY"


def test_start_up_check_fails_fast_with_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    start = time.monotonic()
    with pytest.raises(BackendError) as info:
        OpenAICompatibleBackend(url, "judge")
    assert time.monotonic() - start < 5
    assert f"Judge server at {url} does not answer" in str(info.value) and info.value.kind == "transport"


def test_connection_refused_is_a_transport_error():
    url = f"http://127.0.0.1:{free_port()}/v1"
    backend = OpenAICompatibleBackend(url, "judge", check_on_start=False)
    with pytest.raises(BackendError) as info:
        asyncio.run(backend.complete(MESSAGES))
    assert info.value.kind == "transport" and info.value.retryable and url in str(info.value)


def test_start_up_check_fails_on_a_model_the_server_does_not_serve(server_factory):
    server = server_factory(models=("Qwen/Qwen3-8B", "other"))
    with pytest.raises(BackendError) as info:
        OpenAICompatibleBackend(server.url, "Qwen/Qwen3-30B")
    message = str(info.value)
    assert "'Qwen/Qwen3-30B' is not served at" in message and server.url in message
    assert "['Qwen/Qwen3-8B', 'other']" in message and len(server.requests) == 0
    # a gateway that routes models it does not list: the check can be relaxed
    OpenAICompatibleBackend(server.url, "Qwen/Qwen3-30B", require_listed_model=False)


def test_base_url_normalization():
    assert normalize_base_url("http://host:8000") == "http://host:8000/v1"
    assert normalize_base_url("http://host:8000/v1/") == "http://host:8000/v1"
    assert normalize_base_url("https://api.example.com/openai/v1") == "https://api.example.com/openai/v1"
    with pytest.raises(ValueError, match="must start with http:// or https://, got 'localhost:8000'"):
        normalize_base_url("localhost:8000")


def test_a_dead_url_is_skipped_while_another_is_live(server_factory):
    # Round-robin over [dead, live]: the first try at the dead URL fails to connect, then the dead
    # URL rests (10 s) and every later call goes to the live one instead of failing every other time.
    live = server_factory()
    dead = f"http://127.0.0.1:{free_port()}/v1"
    backend = OpenAICompatibleBackend([dead, live.url], "judge", check_on_start=False)
    outcomes = []
    for _ in range(6):
        try:
            asyncio.run(backend.complete(MESSAGES))
            outcomes.append("ok")
        except BackendError as exc:
            outcomes.append(exc.kind)
    assert outcomes == ["transport"] + ["ok"] * 5 and len(live.requests) == 5


def test_text_that_utf8_cannot_encode_is_sent_with_replacement_characters(server_factory):
    # A lone surrogate (bytes decoded with surrogateescape) cannot be sent as JSON; the rendered
    # prompt carries U+FFFD there instead of failing the request or the step.
    from trl_rankreward.judging.rendering import render
    from trl_rankreward.judging.requests import PointwiseRequest, text_id

    request = PointwiseRequest(query="q", response="bad byte \udcff here")
    content = render(request).messages[-1]["content"]
    assert "bad byte \ufffd here" in content and text_id("\udcff") != text_id("\ufffd")
    server = server_factory()
    asyncio.run(backend_for(server.url).complete(render(request).messages))
    assert "bad byte \ufffd here" in server.requests[0]["messages"][-1]["content"]


def test_a_server_that_trickles_its_answer_times_out_at_the_deadline(server_factory):
    """timeout_s bounds the whole answer: a byte every 0.3 s keeps every read short, never the request."""
    from trl_rankreward.testing import FaultProxy

    server = server_factory()
    with FaultProxy(server.url) as proxy:
        proxy.inject("trickle", interval_s=0.3)
        start = time.monotonic()
        with pytest.raises(BackendError) as info:
            asyncio.run(backend_for(proxy.url, timeout_s=1.0).complete(MESSAGES))
        elapsed = time.monotonic() - start
        # the whole answer (~300 bytes) would take ~90 s; the deadline ends the try after 1 s
        assert info.value.kind == "timeout" and "within 1s" in str(info.value) and elapsed < 3.0
        assert asyncio.run(backend_for(proxy.url, timeout_s=1.0).complete(MESSAGES)).text == "ok"  # fault used up


def test_the_servers_error_message_and_the_finish_reason_come_through(server_factory):
    # ScriptedServer's error body is {"error": {"message": "scripted 400"}}; its completion ends with "stop"
    server = server_factory([400])
    backend = backend_for(server.url)
    with pytest.raises(BackendError, match=r"returned HTTP 400: scripted 400$"):
        asyncio.run(backend.complete(MESSAGES))
    assert asyncio.run(backend.complete(MESSAGES)).finish_reason == "stop"


def test_one_session_per_loop_closed_when_the_loop_ends(server_factory):
    server = server_factory()
    backend = backend_for(server.url)

    async def three():
        await asyncio.gather(*[backend.complete(MESSAGES) for _ in range(3)])
        return backend._state().session

    session = asyncio.run(three())
    assert session.closed and len(server.requests) == 3 and backend._loops == {}


def test_a_backend_dropped_while_its_loop_runs_on_leaves_no_open_session(server_factory):
    # a trainer judges on a loop of its own in a daemon thread, which outlives the trainer's backend
    server = server_factory()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        backend = backend_for(server.url)
        assert asyncio.run_coroutine_threadsafe(backend.complete(MESSAGES), loop).result(timeout=10).text == "ok"
        session = backend._loops[loop].session
        del backend
        gc.collect()
        assert session.closed
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
