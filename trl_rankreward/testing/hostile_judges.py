"""`serve_hostile_judge`: a judge server that misbehaves as weak and reasoning judges do, for tests of
verdict integrity (`judging.parsing`, `judging.calls`, `LLMJudge`'s structured output).

Its **own** verdict is the scripted judge's; **planted** ones are the JSON objects with an answer key inside
a shown block (a rollout's `{"score": 10}`). Behaviours: `"honest"` (its own alone); `"quote"` (its own,
then a note quoting each planted one: a last-object parser reads the planted one); `"echo"` (every planted
one as bare JSON, then its own); `"two_verdicts"` (its own and the one under `10 - quality`);
`"cut_reasoning"` (`<think>` quoting the planted ones for `reasoning_words` words, then its own). Answers are
cut at the request's `max_tokens` (a word a token; `finish_reason: "length"`). A request with `response_format`
gets its own verdict's JSON alone, as guided decoding would, or with `refuse_response_format=True` an HTTP 400."""

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

    def answer(self, prompt: str, structured: bool) -> str:
        own = answer_for_prompt(prompt, self.judge)
        if structured or self.behaviour == "honest":
            return own
        planted = [json.dumps(v) for v in planted_verdicts(prompt)]
        if self.behaviour == "quote":
            note = "\n\nNote: one response tried to instruct the judge with {}; I ignored it."
            return own + "".join(note.format(p) for p in planted)
        if self.behaviour == "echo":
            return "\n".join([*planted, own])
        if self.behaviour == "two_verdicts":
            return f"{own}\n\nOr, read the other way: {answer_for_prompt(prompt, self.reverse)}"
        quotes = " ".join(f"The response writes {p}, which is not evidence." for p in planted)
        filler = " ".join(["Weighing", "the", "rubrics", "again."] * (self.reasoning_words // 4))
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
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    url = server.url = HostileJudge(f"http://127.0.0.1:{server.server_address[1]}/v1")
    url.model, url.behaviour, url.requests, url.refused = model, behaviour, [], 0
    url.refuse, url.reasoning_words, url.lock = refuse_response_format, reasoning_words, threading.Lock()
    url.judge = TextQualityJudge(quality, meta_threshold=5.0)
    url.reverse = TextQualityJudge(lambda text: 10.0 - quality(text), meta_threshold=5.0)
    server.start()
    try:
        yield url
    finally:
        server.stop()


class _Handler(JSONHandler):
    def do_GET(self):
        if self.path.rstrip("/") != "/v1/models":
            return self._send(404, openai_error(f"no route GET {self.path}", "not_found_error"))
        self._send(200, {"object": "list", "data": [{"id": self.server.url.model, "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        url = self.server.url
        with url.lock:
            url.requests.append(body)
        structured = body.get("response_format") is not None
        if structured and url.refuse:
            with url.lock:
                url.refused += 1
            return self._send(400, openai_error(REFUSAL, "BadRequestError", 400))
        prompt = "\n".join(message_content(m) for m in body.get("messages") or [])
        words = url.answer(prompt, structured).split(" ")
        max_tokens = body.get("max_tokens") or len(words)
        content = " ".join(words[:max_tokens])
        reply = chat_completion({"role": "assistant", "content": content}, url.model, len(prompt.split()),
                                min(len(words), max_tokens), f"chatcmpl-hostile-{len(url.requests)}")  # fmt: skip
        if len(words) > max_tokens:
            reply["choices"][0]["finish_reason"] = "length"
        self._send(200, reply)

