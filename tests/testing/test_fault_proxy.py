"""FaultProxy in front of the scripted judge: each fault as a client sees it, counts, down/restore, shutdown."""

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

from trl_rankreward.judging.rendering import render_messages
from trl_rankreward.judging.requests import PairwiseRequest
from trl_rankreward.testing import FaultProxy, serve_scripted_judge

MESSAGES = render_messages(PairwiseRequest(query="q", a="short", b="a longer answer", display="ab"))
VERDICT = '{"winner": "B"}'  # "a longer answer" has more distinct words


@pytest.fixture(scope="module")
def upstream():
    with serve_scripted_judge() as url:
        yield url


@pytest.fixture
def proxy(upstream):
    with FaultProxy(upstream) as proxy:
        yield proxy


def client(proxy, timeout=10.0):
    return openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0, timeout=timeout)


def chat(proxy, timeout=10.0) -> str:
    completion = client(proxy, timeout).chat.completions.create(model="scripted-judge", messages=MESSAGES)
    return completion.choices[0].message.content


def post(proxy, timeout=10.0):
    """A raw POST /chat/completions with urllib: (status, content type, body bytes)."""
    body = json.dumps({"model": "scripted-judge", "messages": MESSAGES}).encode()
    request = urllib.request.Request(
        f"{proxy.url}/chat/completions", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.headers["Content-Type"], response.read()


def post_in_background(proxy):
    """Start a raw POST in a thread; returns the thread and a list that receives its result or OSError."""
    outcome = []

    def call():
        try:
            outcome.append(post(proxy, timeout=30))
        except OSError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, outcome


def wait_until(condition, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.01)


def test_passes_requests_through_and_counts_them(proxy, upstream):
    assert proxy.url.endswith("/v1") and proxy.url != str(upstream)
    assert chat(proxy) == VERDICT
    assert [m.id for m in client(proxy).models.list()] == ["scripted-judge"]
    assert proxy.forwarded == 2 and not proxy.injected


def test_get_models_passes_through_while_faults_wait_for_posts(proxy):
    proxy.inject("http_500")
    assert [m.id for m in client(proxy).models.list()] == ["scripted-judge"]
    assert proxy.pending == 1
    with pytest.raises(openai.InternalServerError):
        chat(proxy)
    assert proxy.pending == 0


@pytest.mark.parametrize(
    "kind, error, status",
    [("http_500", openai.InternalServerError, 500), ("http_503", openai.InternalServerError, 503)],
)
def test_server_errors(proxy, kind, error, status):
    proxy.inject(kind)
    with pytest.raises(error) as caught:
        chat(proxy)
    assert caught.value.status_code == status and "injected by FaultProxy" in caught.value.message
    assert chat(proxy) == VERDICT  # one request only
    assert proxy.injected == {kind: 1} and proxy.forwarded == 1


def test_http_429_carries_retry_after(proxy):
    proxy.inject("http_429", retry_after_s=2)
    with pytest.raises(openai.RateLimitError) as caught:
        chat(proxy)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "2"


def test_faults_apply_in_order_to_the_next_n_posts(proxy):
    proxy.inject("passthrough")
    proxy.inject("http_500", count=2)
    assert chat(proxy) == VERDICT
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            chat(proxy)
    assert chat(proxy) == VERDICT
    assert proxy.injected == {"passthrough": 1, "http_500": 2}
    assert proxy.forwarded == 2 and proxy.pending == 0


def test_reset_is_a_connection_error(proxy):
    proxy.inject("reset", count=2)
    with pytest.raises(openai.APIConnectionError) as caught:
        chat(proxy)
    assert not isinstance(caught.value, openai.APITimeoutError)
    with pytest.raises(ConnectionResetError):  # urllib: reset by peer (RemoteDisconnected is a subclass)
        post(proxy)
    assert proxy.injected == {"reset": 2} and proxy.forwarded == 0


@pytest.mark.parametrize("kind", ["timeout", "hang"])
def test_hang_until_the_client_times_out(proxy, kind):
    proxy.inject(kind)
    with pytest.raises(openai.APITimeoutError):
        chat(proxy, timeout=0.3)
    assert chat(proxy) == VERDICT
    assert proxy.injected == {kind: 1}


def test_hang_with_max_s_closes_without_answer(proxy):
    proxy.inject("hang", max_s=0.1)
    with pytest.raises(openai.APIConnectionError) as caught:
        chat(proxy, timeout=10)
    assert not isinstance(caught.value, openai.APITimeoutError)


def test_slow_answers_after_the_delay(proxy):
    proxy.inject("slow", delay_s=0.2)
    start = time.monotonic()
    assert chat(proxy) == VERDICT
    assert time.monotonic() - start >= 0.2
    proxy.inject("slow", delay_s=5)
    with pytest.raises(openai.APITimeoutError):
        chat(proxy, timeout=0.2)
    assert proxy.injected == {"slow": 2}


def test_html_200(proxy):
    proxy.inject("html_200")
    status, content_type, body = post(proxy)
    assert status == 200 and content_type.startswith("text/html")
    assert body.startswith(b"<!DOCTYPE html>") and b"502 Bad Gateway" in body
    assert proxy.forwarded == 0


def test_truncated_json(proxy):
    proxy.inject("truncated_json")
    status, content_type, body = post(proxy)
    assert status == 200 and content_type == "application/json"
    assert body.startswith(b'{"id": "chatcmpl-scripted-')
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    assert proxy.forwarded == 1 and proxy.injected == {"truncated_json": 1}


def test_down_refuses_connections_until_restore(proxy):
    url = proxy.url
    proxy.inject("down")
    assert proxy.is_down
    with pytest.raises(urllib.error.URLError) as caught:
        post(proxy)
    assert isinstance(caught.value.reason, ConnectionRefusedError)
    with pytest.raises(openai.APIConnectionError):
        client(proxy).models.list()  # GET fails too
    proxy.restore()
    assert proxy.url == url and not proxy.is_down
    assert chat(proxy) == VERDICT
    assert proxy.injected == {"down": 1}


def test_down_resets_a_request_in_flight(proxy):
    proxy.inject("hang")
    thread, outcome = post_in_background(proxy)
    wait_until(lambda: proxy.injected["hang"] == 1)
    proxy.inject("down")
    thread.join(timeout=5)
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionResetError)
    proxy.restore()
    assert chat(proxy) == VERDICT


def test_restore_drops_queued_faults(proxy):
    proxy.inject("http_500", count=3)
    proxy.restore()
    assert proxy.pending == 0 and chat(proxy) == VERDICT


def test_close_returns_fast_while_a_request_hangs(upstream):
    proxy = FaultProxy(upstream)
    proxy.inject("hang")
    thread, outcome = post_in_background(proxy)
    wait_until(lambda: proxy.injected["hang"] == 1)
    start = time.monotonic()
    proxy.close()
    assert time.monotonic() - start < 2.0
    thread.join(timeout=5)
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionResetError)  # let go, not left waiting 30 s
    with pytest.raises(RuntimeError, match="closed"):
        proxy.inject("http_500")
    proxy.close()  # idempotent


def test_unreachable_upstream_is_a_502():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    with FaultProxy(dead, upstream_timeout_s=2) as proxy:
        with pytest.raises(urllib.error.HTTPError) as caught:
            post(proxy)
        assert caught.value.code == 502
        assert "cannot reach upstream" in json.loads(caught.value.read())["error"]["message"]
        assert proxy.forwarded == 0


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("explode",), {}, "Unknown fault kind"),
        (("slow",), {"retry_after_s": 1}, "takes no parameter"),
        (("slow",), {"delay_s": -1}, "must be a number >= 0"),
        (("http_500",), {"count": 0}, "count must be an integer >= 1"),
        (("down",), {"count": 2}, "takes no count"),
    ],
)
def test_bad_injections_raise(proxy, args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        proxy.inject(*args, **kwargs)
    assert proxy.pending == 0 and not proxy.is_down


def test_bad_upstream_raises():
    with pytest.raises(ValueError, match="http:// base URL"):
        FaultProxy("https://example.com/v1")
