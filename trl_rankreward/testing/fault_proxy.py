"""`FaultProxy`: a reverse proxy on loopback that breaks chosen requests, to test judge clients.

Each of the next POST requests takes the next queued fault, then requests pass through again; GETs always
pass. Every wait is bounded: `close()` returns within about a second even while requests hang.

    with serve_scripted_judge() as upstream, FaultProxy(upstream) as proxy:
        proxy.inject("http_429", count=2, retry_after_s=1)

| kind               | what the client sees                                                      |
|--------------------|---------------------------------------------------------------------------|
| `timeout` / `hang` | no answer until it gives up (or `max_s`, default 60, passes: disconnect)  |
| `slow`             | the upstream answer after `delay_s` (default 1)                           |
| `trickle`          | one byte every `interval_s` (default 0.3): no per-read timeout fires      |
| `http_429`         | 429 with `Retry-After: <retry_after_s>` (default 1) and an OpenAI error   |
| `http_500`/`_503`  | 500 / 503 with an OpenAI error body                                       |
| `reset`            | the connection reset (TCP RST) after its request was read                 |
| `html_200`         | 200, `text/html`: a gateway's HTML error page                             |
| `truncated_json`   | 200, `application/json`: the first half of the upstream answer            |
| `endless_body`     | 200 JSON without length, streamed without end (or until `max_s`, 60)      |
| `empty_choices`    | 200: the upstream answer with an empty `choices` list                     |
| `error_200`        | 200 with an OpenAI error body instead of a chat completion                |
| `wrong_model`      | 200: the upstream answer naming model `other-model`                       |
| `passthrough`      | the upstream answer, unchanged (to queue a fault after some good answers) |
| `down`             | at once: connection refused and requests in flight reset, until `restore()` |

`injected` counts faults by kind, `forwarded` the upstream's answers, `streamed_bytes` what `endless_body`
sent; an unreachable upstream gives 502."""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import select
import socket
import struct
import sys
import threading
import time
import urllib.parse

from .scripted_judge import JSONHandler, LoopbackServer, openai_error

# Parameters (and defaults) each fault kind accepts.
FAULTS: dict[str, dict[str, float]] = {
    "timeout": {"max_s": 60.0},
    "hang": {"max_s": 60.0},
    "slow": {"delay_s": 1.0},
    "trickle": {"interval_s": 0.3},
    "http_429": {"retry_after_s": 1.0},
    "endless_body": {"max_s": 60.0},
    **dict.fromkeys("http_500 http_503 reset html_200 truncated_json empty_choices error_200".split(), {}),
    **dict.fromkeys("wrong_model passthrough down".split(), {}),
}
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
# Not forwarded either: the upstream's own host, length and framing are recomputed, and the
# upstream is asked for an unencoded answer so that `truncated_json` cuts JSON text.
_DROP_REQUEST = _HOP_BY_HOP | {"host", "content-length", "accept-encoding"}
_DROP_RESPONSE = _HOP_BY_HOP | {"content-length", "content-encoding", "date", "server"}
_HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body><center><h1>502 Bad Gateway</h1>"
    b"</center><hr><center>nginx</center></body></html>\n"
)
_ERRORS = {  # kind -> status, the OpenAI error body's message and type
    "http_429": (429, "Rate limit reached (injected by FaultProxy)", "rate_limit_error"),
    "http_500": (500, "The server had an error while processing your request (injected by FaultProxy)", "server_error"),
    "http_503": (503, "The server is overloaded or not ready yet (injected by FaultProxy)", "server_error"),
}
_ERRORS["error_200"] = (200, *_ERRORS["http_500"][1:])
_REWRITES = {"empty_choices": {"choices": []}, "wrong_model": {"model": "other-model"}}  # of a JSON upstream answer


class FaultProxy:
    """Fault-injecting reverse proxy in front of `upstream` (a base URL such as `http://host:port/v1`)."""

    def __init__(self, upstream: str, *, upstream_timeout_s: float = 60.0):
        parts = urllib.parse.urlsplit(str(upstream))
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"FaultProxy upstream must be an http:// base URL, got {upstream!r}")
        if upstream_timeout_s <= 0:
            raise ValueError(f"upstream_timeout_s must be > 0, got {upstream_timeout_s!r}")
        self.upstream = str(upstream).rstrip("/")
        self.upstream_timeout_s = float(upstream_timeout_s)
        self._upstream_address = (parts.hostname, parts.port or 80)
        self.injected: collections.Counter[str] = collections.Counter()
        self.forwarded = 0
        self.streamed_bytes = 0
        self._faults: collections.deque[tuple[str, dict[str, float]]] = collections.deque()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._closed = False
        self._listen(0)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{parts.path.rstrip('/')}"

    def inject(self, kind: str, count: int = 1, **params: float) -> None:
        """Apply fault `kind` (parameters: `FAULTS`) to the next `count` POST requests, after those already queued;
        `down` acts at once, until `restore()`."""
        if kind not in FAULTS:
            raise ValueError(f"Unknown fault kind {kind!r}; expected one of {sorted(FAULTS)}")
        unknown = sorted(set(params) - set(FAULTS[kind]))
        if unknown:
            raise ValueError(f"Fault {kind!r} takes no parameter(s) {unknown}; it accepts {sorted(FAULTS[kind])}")
        for name, value in params.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"Fault parameter {name} must be a number >= 0, got {value!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be an integer >= 1, got {count!r}")
        if self._closed:
            raise RuntimeError("FaultProxy is closed")
        if kind == "down":
            if count != 1:
                raise ValueError("fault 'down' lasts until restore(); it takes no count")
            with self._lock:
                self.injected["down"] += 1
            self._stop_listening()
            return
        with self._lock:
            self._faults.extend([(kind, {**FAULTS[kind], **params})] * count)

    def restore(self) -> None:
        """Back to a healthy proxy: drop queued faults, and listen again on the same port if down."""
        if self._closed:
            raise RuntimeError("FaultProxy is closed")
        with self._lock:
            self._faults.clear()
        if self._server is None:
            try:
                self._listen(self.port)
            except OSError as exc:
                raise RuntimeError(f"FaultProxy cannot listen on port {self.port} again: {exc}") from exc

    @property
    def pending(self) -> int:
        """Faults queued and not yet applied."""
        return len(self._faults)

    @property
    def is_down(self) -> bool:
        return self._server is None

    def close(self) -> None:
        """Stop listening and reset requests in flight (idempotent)."""
        self._closed = True
        self._stop_listening()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "down" if self.is_down else "up"
        return f"FaultProxy({self.url!r} -> {self.upstream!r}, {state}, pending={self.pending})"

    def _listen(self, port: int) -> None:
        server = _Server(("127.0.0.1", port), _Handler)
        server.proxy, server.stopped = self, threading.Event()
        self._server = server.start()

    def _stop_listening(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stopped.set()  # handlers in flight reset their connection instead of answering
            server.stop()

    def _next_fault(self) -> tuple[str, dict[str, float]]:
        with self._lock:
            if not self._faults:
                return "none", {}
            kind, params = self._faults.popleft()
            self.injected[kind] += 1
            return kind, params


class _Server(LoopbackServer):
    proxy: FaultProxy
    stopped: threading.Event

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):  # a client that hung up is not an error
            super().handle_error(request, client_address)


class _Handler(JSONHandler):  # its quiet logging; answers pass through `_reply`
    server: _Server

    def do_GET(self):
        self._reply(*self._forward(None))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        kind, params = self.server.proxy._next_fault()
        if kind in ("timeout", "hang"):
            self._hang(params["max_s"])
        elif kind == "slow":
            if self.server.stopped.wait(params["delay_s"]):
                self._reset()
            else:
                self._reply(*self._forward(body))
        elif kind == "trickle":
            self._trickle(*self._forward(body), interval_s=params["interval_s"])
        elif kind in _ERRORS:
            status, message, error_kind = _ERRORS[kind]
            retry = [("Retry-After", f"{params['retry_after_s']:g}")] if kind == "http_429" else []
            self._reply(status, [("Content-Type", "application/json"), *retry], _error_body(message, error_kind))
        elif kind == "html_200":
            self._reply(200, [("Content-Type", "text/html; charset=utf-8")], _HTML_PAGE)
        elif kind == "truncated_json":
            _, _, data = self._forward(body)
            self._reply(200, [("Content-Type", "application/json")], data[: len(data) // 2])
        elif kind in _REWRITES:
            status, headers, data = self._forward(body)
            with contextlib.suppress(ValueError):  # not JSON: nothing to rewrite
                data = json.dumps({**json.loads(data), **_REWRITES[kind]}).encode("utf-8")
            self._reply(status, headers, data)
        elif kind == "endless_body":
            self._stream_forever(params["max_s"])
        elif kind == "reset":
            self._reset()
        else:  # "none" (no fault queued) or "passthrough"
            self._reply(*self._forward(body))

    def _forward(self, body: bytes | None) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send this request upstream; its status, headers and body (502 if the upstream cannot be reached)."""
        proxy = self.server.proxy
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _DROP_REQUEST}
        connection = http.client.HTTPConnection(*proxy._upstream_address, timeout=proxy.upstream_timeout_s)
        try:
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            message = f"FaultProxy cannot reach upstream {proxy.upstream}: {type(exc).__name__}: {exc}"
            return 502, [("Content-Type", "application/json")], _error_body(message, "bad_gateway")
        finally:
            connection.close()
        with proxy._lock:
            proxy.forwarded += 1
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _DROP_RESPONSE]
        return response.status, kept, data

    def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        if self.server.stopped.is_set():
            return self._reset()  # went down meanwhile: die as a killed server would
        self._send_head(status, headers, len(body))
        self.wfile.write(body)

    def _send_head(self, status: int, headers: list[tuple[str, str]], length: int) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _trickle(self, status: int, headers: list[tuple[str, str]], body: bytes, *, interval_s: float) -> None:
        """The answer's status and headers at once, then its body one byte per `interval_s`, until the client
        hangs up or the proxy stops."""
        self._send_head(status, headers, len(body))
        for i in range(len(body)):
            if self.server.stopped.wait(interval_s):
                return self._reset()
            try:
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
            except OSError:  # the client gave up
                return

    def _stream_forever(self, max_s: float) -> None:
        """200 with a body of JSON-looking bytes and no length, sent as fast as the client reads, until it
        hangs up, `max_s` passes or the proxy stops."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        chunk, deadline = b'{"choices": [' + b" " * 65523, time.monotonic() + max_s
        while time.monotonic() < deadline and not self.server.stopped.is_set():
            try:
                self.wfile.write(chunk)
            except OSError:  # the client hung up
                return
            with self.server.proxy._lock:
                self.server.proxy.streamed_bytes += len(chunk)

    def _hang(self, max_s: float) -> None:
        """Answer nothing until the client hangs up, `max_s` passes (then close), or the proxy stops (reset)."""
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            if self.server.stopped.is_set():
                return self._reset()
            if select.select([self.connection], [], [], 0.05)[0]:
                return  # readable: the client closed its end (or sent more, which it should not)

    def _reset(self) -> None:
        """Abort the connection with a TCP RST: SO_LINGER 0, then close."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()  # the buffered reader holds a reference; without it close() would not close
        self.connection.close()


def _error_body(message: str, kind: str) -> bytes:
    return json.dumps(openai_error(message, kind)).encode("utf-8")
