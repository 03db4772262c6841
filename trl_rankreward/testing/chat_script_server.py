"""`serve_chat_script`: an OpenAI-compatible server whose answers a test scripts per request, with a request log.

For tests that compare two clients message for message (ours and the R-Align authors' scripts):
the test's `answer(messages) -> Reply` decides each answer from the messages alone, so any two
clients that send the same messages get the same answers. A `Reply` can carry
`reasoning_content` (present, absent, or JSON null), and can fail with HTTP 500 for the first
`fail_first` requests of the same messages (a large number: a server that never answers them);
a 500 carries `retry-after-ms` so that clients which honour it retry at once. Every request body
is kept in `requests`, in arrival order; `reset()` clears the log and the failure counters
between clients. stdlib only; the server runs in a daemon thread on a free loopback port.

    with serve_chat_script(answer) as server:
        backend = OpenAICompatibleBackend(server.url, "genrm")
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .scripted_judge import JSONHandler, LoopbackServer, chat_completion, openai_error

ABSENT = object()  # a Reply.reasoning that leaves the `reasoning_content` key out


@dataclass(frozen=True)
class Reply:
    """One scripted answer: its content, its `reasoning_content` (`ABSENT`: no such key; None: JSON
    null) and how many requests of the same messages fail with HTTP 500 before it is given."""

    content: str | None = ""
    reasoning: object = ABSENT
    fail_first: int = 0


def messages_key(messages) -> str:
    """The identity of a request: its messages as canonical JSON."""
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


class ChatScriptServer(LoopbackServer):
    def __init__(self, answer: Callable[[list[dict]], Reply], models: tuple[str, ...]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer, self.models = answer, models
        self.requests: list[dict] = []
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._seen.clear()

    def respond(self, body: dict) -> tuple[int, dict]:
        messages = body.get("messages") or []
        reply = self.answer(messages)
        with self._lock:
            self.requests.append(body)
            key = messages_key(messages)
            self._seen[key] += 1
            failing = self._seen[key] <= reply.fail_first
        if failing:
            return 500, openai_error("scripted server error", "server_error", 500)
        message: dict = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not ABSENT:
            message["reasoning_content"] = reply.reasoning
        words, answered = len(messages_key(messages).split()), len((reply.content or "").split())
        return 200, chat_completion(message, body.get("model", ""), words, answered, "chatcmpl-scripted")


class _Handler(JSONHandler):
    server: ChatScriptServer

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.server.models]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        status, payload = self.server.respond(body)
        self._send(status, payload, {"retry-after-ms": "5"} if status >= 500 else None)


@contextlib.contextmanager
def serve_chat_script(
    answer: Callable[[list[dict]], Reply], *, models: tuple[str, ...] = ("genrm", "metarm")
) -> Iterator[ChatScriptServer]:
    """Serve `answer` on loopback for the duration of the block (see the module docstring)."""
    server = ChatScriptServer(answer, models).start()
    try:
        yield server
    finally:
        server.stop()


__all__ = ["ABSENT", "ChatScriptServer", "Reply", "messages_key", "serve_chat_script"]
