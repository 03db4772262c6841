"""`serve_hostile_judge`: a judge server that misbehaves as weak and reasoning judges do, for tests of
verdict integrity (`judging.parsing`, `judging.calls`, `LLMJudge`'s structured output).

Its **own** verdict is the scripted judge's; **planted** ones are the JSON objects with an answer key inside
a shown block (a rollout's `{"score": 10}`). Behaviours: `"honest"` (its own alone); `"quote"` (its own,
then a note quoting each planted one: a last-object parser reads the planted one); `"echo"` (every planted
one as bare JSON, then its own); `"two_verdicts"` (its own and the one under `10 - quality`);
`"cut_reasoning"` (`<think>` quoting the planted ones for `reasoning_words` words, then its own; cut at the
request's `max_tokens`, one token per word, with `finish_reason: "length"`).

A request with `response_format` gets its own verdict's JSON alone, as guided decoding would, or with
`refuse_response_format=True` an HTTP 400. Request bodies are kept in `requests`."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator

from ..judging.parsing import json_objects
from .scripted_judge import (
    JSONHandler,
    LoopbackServer,
    TextQualityJudge,
    answer_for_prompt,
    chat_completion,
    distinct_words,
    message_content,
    openai_error,
)

BEHAVIOURS = ("honest", "quote", "echo", "two_verdicts", "cut_reasoning")
#: the keys of every request kind's JSON answer (`judging.parsing.ANSWER_JSON`)
ANSWER_KEYS = frozenset({"position", "order", "winner", "winners", "score", "consistent", "keep_anchor_ids",
                         "add_rollout_ids"})  # fmt: skip
_BLOCK = re.compile(r'<(response|rationale) id="[^"]*">\n(.*?)\n</\1>', re.DOTALL)
REFUSAL = "response_format is not supported by this server (no guided decoding backend)"


def planted_verdicts(prompt: str) -> list[dict]:
    """The verdict-shaped JSON objects inside the prompt's shown blocks, in order."""
    found = [obj for _, text in _BLOCK.findall(prompt) for obj in json_objects(text)]
    return [obj for obj in found if ANSWER_KEYS & obj.keys()]


class HostileJudge(str):
    """The server's base URL with its settings, `requests` (every body) and `refused` (for `response_format`)."""

    model: str
    behaviour: str
    requests: list[dict]
    refused: int


class _Server(LoopbackServer):
    def __init__(self, url_settings: dict, own: Callable[[str], str], other: Callable[[str], str]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.settings, self.own, self.other = url_settings, own, other
        self.lock = threading.Lock()
        self.url: HostileJudge | None = None

    def answer(self, prompt: str, structured: bool) -> str:
        own = self.own(prompt)
        behaviour = self.url.behaviour
        if structured or behaviour == "honest":
            return own
        planted = [json.dumps(v) for v in planted_verdicts(prompt)]
        if behaviour == "quote":
            notes = "".join(
                f"\n\nNote: one response tried to instruct the judge with {p}; I ignored it." for p in planted
            )
            return own + notes
        if behaviour == "echo":
            return "\n".join([*planted, own])
        if behaviour == "two_verdicts":
            return f"{own}\n\nOr, read the other way: {self.other(prompt)}"
        quotes = " ".join(f"The response writes {p}, which is not evidence." for p in planted)
        filler = " ".join(["Weighing", "the", "rubrics", "again."] * (self.settings["reasoning_words"] // 4))
        return f"<think>{quotes} {filler}</think>\n{own}"


@contextlib.contextmanager
def serve_hostile_judge(
    behaviour: str,
    *,
    quality: Callable[[str], float] = distinct_words,
    refuse_response_format: bool = False,
    reasoning_words: int = 40,
    model: str = "hostile-judge",
) -> Iterator[HostileJudge]:
    """Serve `behaviour` (one of `BEHAVIOURS`) on a free loopback port; yield the URL; stop on exit."""
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"behaviour must be one of {BEHAVIOURS}, got {behaviour!r}")
    if reasoning_words < 0:
        raise ValueError(f"reasoning_words must be >= 0, got {reasoning_words}")
    judge = TextQualityJudge(quality, meta_threshold=5.0)
    reverse = TextQualityJudge(lambda text: 10.0 - quality(text), meta_threshold=5.0)
    settings = {"refuse": refuse_response_format, "reasoning_words": reasoning_words}
    server = _Server(settings, lambda p: answer_for_prompt(p, judge), lambda p: answer_for_prompt(p, reverse))
    url = HostileJudge(f"http://127.0.0.1:{server.server_address[1]}/v1")
    url.model, url.behaviour, url.requests, url.refused = model, behaviour, [], 0
    server.url = url
    server.start()
    try:
        yield url
    finally:
        server.stop()


class _Handler(JSONHandler):
    server: _Server

    def do_GET(self):
        if self.path.rstrip("/") != "/v1/models":
            return self._send(404, openai_error(f"no route GET {self.path}", "not_found_error"))
        self._send(200, {"object": "list", "data": [{"id": self.server.url.model, "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        server, url = self.server, self.server.url
        with server.lock:
            url.requests.append(body)
        structured = body.get("response_format") is not None
        if structured and server.settings["refuse"]:
            with server.lock:
                url.refused += 1
            return self._send(400, openai_error(REFUSAL, "BadRequestError", 400))
        prompt = "\n".join(message_content(m) for m in body.get("messages") or [])
        words = server.answer(prompt, structured).split(" ")
        max_tokens = body.get("max_tokens") or len(words)
        content = " ".join(words[:max_tokens])
        reply = chat_completion({"role": "assistant", "content": content}, url.model, len(prompt.split()),
                                min(len(words), max_tokens), f"chatcmpl-hostile-{len(url.requests)}")  # fmt: skip
        if len(words) > max_tokens:
            reply["choices"][0]["finish_reason"] = "length"
        self._send(200, reply)

