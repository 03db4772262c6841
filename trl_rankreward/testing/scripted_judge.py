"""`serve_scripted_judge`: an OpenAI-compatible judge server on loopback whose verdicts a test can predict.

It takes the texts back out of a default-template prompt's `<response id=...>` / `<rationale id=...>` blocks
and answers the verdict `judging.quality_judge.QualityJudge` gives under `quality(text)` (default: the number
of distinct lower-cased words), or under `judge=` (e.g. a noisy `SimulatedJudge`, which gets the prompt
without its blocks as `query` and `query_id`); the blocks tell the request kind (`_answer_for_prompt`).
GenRM prompts (ours and the R-Align authors' layout) get a rationale ending in `\\boxed{A}` or `\\boxed{B}`
(A on a tie), the authors' MetaRM prompt their tags, generation prompts a valid answer. `usage` counts words.
`serve_hostile_judge` serves one that misbehaves as weak and reasoning judges do, for tests of verdict integrity
(`judging.parsing`, `judging.calls`, `LLMJudge`'s structured output)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..judging.parsing import asks_rationale_first, json_objects
from ..judging.prompt_budget import ApproxCounter
from ..judging.quality_judge import QualityJudge, answer_json
from ..judging.rendering import NUMBER_WORDS, Rendered
from ..judging.requests import (
    BufferSelectRequest,
    CoarseRequest,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
)


class LoopbackServer(ThreadingHTTPServer):
    """The stand-in servers' HTTP server, with a backlog a trainer's burst of connections does not overflow."""

    request_queue_size = 256

    def start(self) -> LoopbackServer:
        """Serve in a daemon thread, which checks for `stop()` every 50 ms."""
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)


MODES = ("valid", "prose")
PROSE_ANSWER = (
    "Thank you for sharing these responses! Each of them has its strengths, and I enjoyed reading them. "
    "Overall they address the question reasonably well. Let me know if you would like a closer look at any of them."
)
_BLOCK = re.compile(r'<(response|rationale) id="([^"]*)">\n(.*?)\n</\1>', re.DOTALL)
_ANCHOR_ID_LINE = re.compile(r"^\[A\d+\]$", re.MULTILINE)
_RUBRIC_LINE = re.compile(r"\d+\.\[weight=[^\]]*\] ([^\n]*)")
_SIZE = re.compile(r"exactly (\w+) selected IDs")
_GENRM_SECTION = re.compile(r"\[Response ([AB])\]\n(.*?)\n\[End of Response \1\]", re.DOTALL)
_RELEASE_SECTION = re.compile(
    r"<\|The Start of Assistant ([AB])'s Answer with User\|>\n\n(.*?)\n\n<\|The End of Assistant \1's Answer with User\|>",
    re.DOTALL,
)
_ASKS_RUBRICS = re.compile(r'\{\s*"rubrics"\s*:')
_PREFERRED = re.compile(r"(?:preferred response is|final preference is) Response ([AB])\b")
#: the rubrics it writes for a rubric-generation prompt: three, weights 3, 2, 1 (valid for both papers' templates)
_RUBRICS = ("Answers the question that was asked", "States facts correctly", "Is clear and concise")
_GOLDEN = re.compile(r"<golden_judge>\n?(.*?)\n?</golden_judge>", re.DOTALL)
_GENRM_OUTPUT = re.compile(r"<genrm_output>\n?(.*?)\n?</genrm_output>", re.DOTALL)


def distinct_words(text: str) -> float:
    """The default quality: how many distinct lower-cased whitespace-separated words `text` has."""
    return float(len(set(text.lower().split())))


class TextQualityJudge(QualityJudge):
    """`QualityJudge` (every verdict rule lives there) scoring each text by `quality(text)` alone."""

    def __init__(self, quality: Callable[[str], float], meta_threshold: float):
        super().__init__(token_counter=ApproxCounter(), meta_threshold=meta_threshold)
        self.quality = quality

    async def qualities(self, request, texts, rubric_index=None, *, display=()):
        return [float(self.quality(text)) for text in texts]


def answer_for_prompt(prompt: str, judge: QualityJudge) -> str:
    """The answer to a judge prompt: a GenRM's boxed verdict or the authors' MetaRM tags, else JSON."""
    for layout in (_GENRM_SECTION, _RELEASE_SECTION):
        sections = dict(layout.findall(prompt))
        if set(sections) == {"A", "B"}:
            context = layout.sub("", prompt)
            golden, rationale = _GOLDEN.search(context), _GENRM_OUTPUT.search(context)
            if golden and rationale:
                return _release_meta_answer(context, sections, golden.group(1), rationale.group(1), judge)
            request = PairwiseRequest(query=context, query_id=context, a=sections["A"], b=sections["B"])
            winner = "B" if asyncio.run(judge.judge(request)) == "B" else "A"
            return f"Response {winner} is better on the decisive criteria.\n\\boxed{{{winner}}}"
    verdict = json.dumps(_answer_for_prompt(prompt, judge))
    if asks_rationale_first(Rendered([{"role": "user", "content": prompt}])):
        return f"RATIONALE\nThe comparison, rubric by rubric.\n\nVERDICT\n{verdict}"
    return verdict


def _release_meta_answer(context: str, sections: dict, golden: str, rationale: str, judge: QualityJudge) -> str:
    request = MetaJudgeRequest(
        query=context, query_id=context, response_a=sections["A"], response_b=sections["B"], label="A",
        golden_rationale=golden, rationale=rationale,
    )  # fmt: skip
    verdict = "Correct" if asyncio.run(judge.judge(request)) else "Incorrect"
    return (
        "<golden_key_points>\nThe facts the golden judgment names.\n</golden_key_points>\n"
        f"<genrm_analysis>\nThe GenRM's rationale is judged {verdict.lower()}.\n</genrm_analysis>\n"
        f"<final_verdict>\n{verdict}\n</final_verdict>"
    )


def _answer_for_prompt(prompt: str, judge: QualityJudge) -> dict:
    """The JSON answer to a default-template judge prompt; ValueError if no kind fits."""
    blocks = {ident: text for _, ident, text in _BLOCK.findall(prompt)}
    outside = _BLOCK.sub("", prompt)
    about = {"query": outside, "query_id": outside}  # what the request is about (module docstring)

    def numbered(prefix: str) -> list[str]:
        texts = []
        while f"{prefix}{len(texts)}" in blocks:
            texts.append(blocks[f"{prefix}{len(texts)}"])
        return texts

    if "golden" in blocks:  # the verdict reads the rationale only, so the label is not parsed
        request = MetaJudgeRequest(
            **about, response_a=blocks["A"], response_b=blocks["B"], label="A",
            golden_rationale=blocks["golden"], rationale=blocks["reward_model"],
        )  # fmt: skip
    elif "candidate" in blocks and "A0" not in blocks:  # the order-only control: position = quality in 0..K
        k = len(_ANCHOR_ID_LINE.findall(outside))
        candidate = PointwiseRequest(**about, response=blocks["candidate"])
        (quality,) = asyncio.run(judge.qualities(candidate, [blocks["candidate"]]))
        return {"position": min(k, max(0, int(quality)))}
    elif "candidate" in blocks:
        request = CoarseRequest(**about, anchors=numbered("A"), candidate=blocks["candidate"])
    elif "response" in blocks:
        request = PointwiseRequest(**about, response=blocks["response"])
    elif '"keep_anchor_ids"' in outside:
        size = _SIZE.search(outside)
        if size is None:
            raise ValueError("buffer-select prompt does not say 'exactly <n> selected IDs'")
        word = size.group(1)
        request = BufferSelectRequest(
            **about, anchors=numbered("A"), rollouts=numbered("R"),
            size=int(word) if word.isdigit() else NUMBER_WORDS.index(word),
        )  # fmt: skip
    elif "R0" in blocks:
        request = ListwiseRequest(**about, candidates=numbered("R"))
    elif "A" in blocks and "B" in blocks and '"winners"' in outside:
        rubrics = _RUBRIC_LINE.findall(prompt[prompt.rfind("</response>") :])
        request = RubricPairwiseRequest(**about, a=blocks["A"], b=blocks["B"], rubrics=rubrics)
    elif "A" in blocks and "B" in blocks:  # holistic, or one rubric: both answer {"winner": ...}
        request = PairwiseRequest(**about, a=blocks["A"], b=blocks["B"])
    elif _ASKS_RUBRICS.search(outside):
        return {"rubrics": [{"text": text, "weight": 3 - k} for k, text in enumerate(_RUBRICS)]}
    elif '{"rationale"' in outside and _PREFERRED.search(outside):
        preferred = _PREFERRED.search(outside).group(1)
        return {"rationale": f"Response {preferred} answers the question; the other does not.", "preferred": preferred}
    else:
        raise ValueError(
            f"cannot tell which judge request this prompt is (response blocks: {sorted(blocks)}); "
            "the scripted judge reads prompts rendered with the default templates"
        )
    return answer_json(request, asyncio.run(judge.judge(request)))


class ScriptedJudge(str):
    """The server's base URL with its live settings: `mode` ("valid": JSON verdicts; "prose": a paragraph, no JSON),
    `latency_s` before each answer, `requests` (chat requests answered, errors included), `model`."""

    models: tuple[str, ...]
    latency_s: float
    requests: int

    @property
    def model(self) -> str:
        return self.models[0]

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in MODES:
            raise ValueError(f"scripted judge mode must be one of {MODES}, got {value!r}")
        self._mode = value


@contextlib.contextmanager
def serve_scripted_judge(
    *,
    model: str | Sequence[str] = "scripted-judge",
    quality: Callable[[str], float] = distinct_words,
    mode: str = "valid",
    latency_s: float = 0.0,
    meta_threshold: float = 5.0,
    judge: QualityJudge | None = None,
) -> Iterator[ScriptedJudge]:
    """Serve on a free loopback port; yield the base URL (a `ScriptedJudge`); stop on exit.

    `model`: the name(s) served (others get HTTP 404 `model_not_found`); a meta request is consistent when
    `quality(rationale) >= meta_threshold`; `judge` answers one request at a time, so seeded noise needs no lock."""
    models = (model,) if isinstance(model, str) else tuple(model)
    if not models or not all(isinstance(m, str) and m for m in models):
        raise ValueError(f"model must be a non-empty name or a list of them, got {model!r}")
    if not callable(quality):
        raise TypeError(f"quality must be a callable (text) -> float, got {type(quality).__name__}")
    if latency_s < 0:
        raise ValueError(f"latency_s must be >= 0, got {latency_s!r}")
    if judge is not None and not isinstance(judge, QualityJudge):
        raise TypeError(f"judge must be a QualityJudge (e.g. evaluation.SimulatedJudge), got {type(judge).__name__}")
    ScriptedJudge().mode = mode  # a bad mode is refused before a port is taken
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    url = ScriptedJudge(f"http://127.0.0.1:{server.server_address[1]}/v1")
    url.models, url.mode, url.latency_s, url.requests = models, mode, float(latency_s), 0
    server.judge, server.lock, server.verdict_lock = url, threading.Lock(), threading.Lock()
    server.verdicts = judge if judge is not None else TextQualityJudge(quality, meta_threshold)
    server.closed = threading.Event()
    server.start()
    try:
        yield url
    finally:
        server.closed.set()
        server.stop()


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.0 handler (one request per connection) that answers JSON."""

    def log_message(self, format, *args):  # tests read results, not access logs
        pass

    def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def chat_completion(message: dict, model: str, prompt_tokens: int, completion_tokens: int, ident: str) -> dict:
    """An OpenAI chat completion body with the one choice `message` and its `usage`."""
    return {
        "id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }  # fmt: skip


def openai_error(message: str, kind: str, code: int | str | None = None) -> dict:
    """An OpenAI error body, as the `openai` client reads it."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(JSONHandler):
    def do_GET(self):
        if self.path.rstrip("/") != "/v1/models":
            return self._error(404, f"no route GET {self.path}; try GET /v1/models", "not_found_error")
        models = self.server.judge.models
        self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"} for m in models]})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._error(404, f"no route POST {self.path}; try POST /v1/chat/completions", "not_found_error")
        judge = self.server.judge
        with self.server.lock:
            judge.requests += 1
            number = judge.requests
        if judge.latency_s:
            self.server.closed.wait(judge.latency_s)
        try:
            payload = json.loads(body)
            model, messages = payload.get("model"), payload["messages"]
            prompt = "\n".join(message_content(m) for m in messages)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            message = f"expected a JSON body with 'model' and 'messages' ({exc!r})"
            return self._error(400, message, "invalid_request_error")
        if model not in judge.models:
            message = f"The model {model!r} does not exist; this server serves {list(judge.models)}"
            return self._error(404, message, "invalid_request_error", code="model_not_found")
        if judge.mode == "prose":
            content = PROSE_ANSWER
        else:
            try:
                with self.server.verdict_lock:
                    content = answer_for_prompt(prompt, self.server.verdicts)
            except ValueError as exc:
                return self._error(400, f"scripted judge: {exc}", "invalid_request_error")
        reply, ident = {"role": "assistant", "content": content}, f"chatcmpl-scripted-{number}"
        self._send(200, chat_completion(reply, model, len(prompt.split()), len(content.split()), ident))

    def _error(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        self._send(status, openai_error(message, kind, code))


def message_content(message: dict) -> str:
    """A chat message's text: a string, or the text parts of a list of content parts."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part.get("type") == "text")


BEHAVIOURS = ("honest", "quote", "echo", "two_verdicts", "cut_reasoning")
#: the keys of every request kind's JSON answer (`judging.parsing.ANSWER_JSON`)
ANSWER_KEYS = frozenset({"position", "order", "winner", "winners", "score", "consistent", "keep_anchor_ids",
                         "add_rollout_ids"})  # fmt: skip
REFUSAL = "response_format is not supported by this server (no guided decoding backend)"


def planted_verdicts(prompt: str) -> list[dict]:
    """The verdict-shaped JSON objects inside the prompt's shown blocks, in order."""
    found = [obj for _, _, text in _BLOCK.findall(prompt) for obj in json_objects(text)]
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
    """Serve `behaviour` (one of `BEHAVIOURS`) on a free loopback port; yield the URL; stop on exit.

    Its **own** verdict is the scripted judge's; **planted** ones are the JSON objects with an answer key inside
    a shown block (a rollout's `{"score": 10}`). Behaviours: `"honest"` (its own alone); `"quote"` (its own,
    then a note quoting each planted one: a last-object parser reads the planted one); `"echo"` (every planted
    one as bare JSON, then its own); `"two_verdicts"` (its own and the one under `10 - quality`);
    `"cut_reasoning"` (`<think>` quoting the planted ones for `reasoning_words` words, then its own). Answers are
    cut at the request's `max_tokens` (a word a token; `finish_reason: "length"`). A request with `response_format`
    gets its own verdict's JSON alone, as guided decoding would, or with `refuse_response_format=True` an HTTP 400."""
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"behaviour must be one of {BEHAVIOURS}, got {behaviour!r}")
    if reasoning_words < 0:
        raise ValueError(f"reasoning_words must be >= 0, got {reasoning_words}")
    server = LoopbackServer(("127.0.0.1", 0), _HostileHandler)
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


class _HostileHandler(JSONHandler):
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

