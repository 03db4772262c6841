"""`serve_judge_replica`: the scripted judge's verdicts with a vLLM replica's limits, for pool and window tests.

- **capacity**: `slots` requests answered at once, each after `latency_s`; more wait (vLLM's `--max-num-seqs`);
- **a context window**: `max_model_len`, listed in `GET /v1/models` as vLLM does; prompt tokens plus
  `max_tokens` over it get vLLM's HTTP 400 wording; no `max_tokens` means the rest of the window; a longer
  answer is cut (`finish_reason: "length"`);
- **its own tokenizer** (`replica_prompt_tokens`), counting unlike the judge layer's counters, in `usage`
  and in vLLM's `POST /tokenize` (when `tokenize=True`, else HTTP 404);
- **death and return**: `url.stop()` kills it as a crash would, `url.start()` restarts it on the same port.

`python -m trl_rankreward.testing.judge_replica` serves one from a shell (`main`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import threading
from collections.abc import Callable, Iterator

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

_TOKEN = re.compile(r"\w{1,4}|[^\w\s]")
#: chat-template tokens per message (`<|im_start|>role\n ... <|im_end|>\n`) and for the generation prompt
TEMPLATE_TOKENS_PER_MESSAGE, GENERATION_PROMPT_TOKENS = 5, 3


def replica_prompt_tokens(messages: list[dict]) -> int:
    """Pieces of at most four word characters, each punctuation mark a token, plus a chat template's tokens."""
    tokens = sum(len(_TOKEN.findall(message_content(m))) + TEMPLATE_TOKENS_PER_MESSAGE for m in messages)
    return tokens + GENERATION_PROMPT_TOKENS


def context_length_message(window: int, prompt_tokens: int, max_tokens: int) -> str:
    """vLLM's refusal of a request over the window (its `VLLMValidationError` wording)."""
    return (
        f"This model's maximum context length is {window} tokens. However, you requested {max_tokens} output "
        f"tokens and your prompt contains at least {prompt_tokens} input tokens, for a total of at least "
        f"{prompt_tokens + max_tokens} tokens. Please reduce the length of the input prompt or the number of "
        f"requested output tokens. (parameter=input_tokens, value={prompt_tokens})"
    )


class JudgeReplica(str):
    """The replica's base URL, settings and counters (`answered`, `refused` over the window, `tokenize_calls`)."""

    model: str
    slots: int
    latency_s: float
    max_model_len: int | None
    tokenize: bool
    answered: int
    refused: int
    tokenize_calls: int

    def start(self) -> None:
        if self.server is None:
            self.down.clear()
            self.server = LoopbackServer(("127.0.0.1", self.port), _ReplicaHandler)
            self.server.replica = self
            self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.down.set()
            self.server.stop()
            self.server = None

    def count(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


@contextlib.contextmanager
def serve_judge_replica(
    *,
    slots: int = 16,
    latency_s: float = 0.0,
    max_model_len: int | None = None,
    tokenize: bool = True,
    model: str = "scripted-judge",
    quality: Callable[[str], float] = distinct_words,
    port: int = 0,
) -> Iterator[JudgeReplica]:
    """Serve one replica on loopback (`port` 0: a free one); yield its base URL (a `JudgeReplica`); stop on exit."""
    if slots < 1 or latency_s < 0 or (max_model_len is not None and max_model_len < 1):
        raise ValueError(
            f"Expected slots >= 1, latency_s >= 0, max_model_len >= 1 or None; got {slots}, {latency_s}, {max_model_len}"
        )
    server = LoopbackServer(("127.0.0.1", port), _ReplicaHandler)
    url = JudgeReplica(f"http://127.0.0.1:{server.server_address[1]}/v1")
    url.model, url.slots, url.latency_s = model, slots, latency_s
    url.max_model_len, url.tokenize = max_model_len, tokenize
    url.answered = url.refused = url.tokenize_calls = 0
    url.port, url.verdicts = server.server_address[1], TextQualityJudge(quality, meta_threshold=5.0)
    url.lock, url.down, url.free = threading.Lock(), threading.Event(), threading.BoundedSemaphore(slots)
    server.replica = url
    url.server = server.start()
    try:
        yield url
    finally:
        url.stop()


class _ReplicaHandler(JSONHandler):
    def do_GET(self):
        if self.path.rstrip("/") != "/v1/models":
            return self._send(404, {"detail": "Not Found"})
        url = self.server.replica
        entry = {"id": url.model, "object": "model", "owned_by": "vllm", "root": url.model}
        if url.max_model_len:
            entry["max_model_len"] = url.max_model_len
        self._send(200, {"object": "list", "data": [entry]})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, url = self.path.rstrip("/"), self.server.replica
        try:
            payload = json.loads(body)
            messages = payload["messages"]
            prompt_tokens = replica_prompt_tokens(messages)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return self._error(400, f"expected a JSON body with 'model' and 'messages' ({exc!r})")
        if path == "/tokenize" and url.tokenize:
            url.count("tokenize_calls")
            return self._send(200, {"count": prompt_tokens, "max_model_len": url.max_model_len, "tokens": []})
        if path != "/v1/chat/completions":
            return self._send(404, {"detail": "Not Found"})
        if payload.get("model") != url.model:
            return self._error(404, f"The model `{payload.get('model')}` does not exist.", code=404)
        window = url.max_model_len
        max_tokens = payload.get("max_tokens") or ((window - prompt_tokens) if window else 1024)
        if window and prompt_tokens + max_tokens > window:
            url.count("refused")
            return self._error(400, context_length_message(window, prompt_tokens, max_tokens), code=400)
        if not self._wait_for_answer():
            return  # the replica died: the connection closes without an answer
        try:
            content = answer_for_prompt("\n".join(message_content(m) for m in messages), url.verdicts)
        except ValueError as exc:
            return self._error(400, f"scripted judge replica: {exc}")
        finally:
            url.free.release()
        url.count("answered")
        pieces = list(_TOKEN.finditer(content))
        finish = "length" if len(pieces) > max_tokens else "stop"  # cut where vLLM would stop: at max_tokens
        if finish == "length":
            content = content[: pieces[max_tokens - 1].end()] if max_tokens > 0 else ""
        reply = {"role": "assistant", "content": content}
        body = chat_completion(reply, url.model, prompt_tokens, min(len(pieces), max_tokens), "chatcmpl-replica")
        body["choices"][0]["finish_reason"] = finish
        self._send(200, body)

    def _wait_for_answer(self) -> bool:
        """Take a slot and spend the latency in it; False (slot given back) if the replica dies meanwhile."""
        replica = self.server.replica
        while not replica.free.acquire(timeout=0.02):
            if replica.down.is_set():
                return False
        if replica.down.wait(replica.latency_s) or replica.down.is_set():
            replica.free.release()
            return False
        return True

    def _error(self, status: int, message: str, code: int | str | None = None) -> None:
        self._send(status, openai_error(message, "BadRequestError", code))


def main(argv: list[str] | None = None) -> None:
    """Serve one replica until interrupted (Ctrl-C or SIGTERM), printing its URL and, on exit, its counters."""
    parser = argparse.ArgumentParser(
        prog="python -m trl_rankreward.testing.judge_replica",
        description=(
            "An offline judge for runs without a GPU or a judge server: an OpenAI-compatible server on "
            "127.0.0.1 whose verdicts are scripted (a text's quality is its number of distinct words), with "
            "a vLLM replica's limits. It answers every prompt the package sends: the judge templates "
            "(coarse, pointwise, pairwise with or without a rationale first, rubric-pairwise, listwise, "
            "buffer-select, meta), the GenRM prompt, the R-Align authors' GenRM and MetaRM layouts "
            "(r_align_release), and the rubric and rationale generation prompts. It prints its base URL; "
            "point a config's judge_base_urls (or --genrm_base_urls / --metarm_base_urls, or the rubrics "
            "commands' --base_urls) at it and set the model to the name it serves (--model)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 to listen on; 0 picks a free one")
    parser.add_argument(
        "--model",
        default="scripted-judge",
        help="the model name it serves (GET /v1/models); requests for another get 404",
    )
    parser.add_argument("--slots", type=int, default=16, help="requests answered at once (vLLM's --max-num-seqs)")
    parser.add_argument("--latency-s", type=float, default=0.0, help="seconds each answer takes in its slot")
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="context window in tokens, listed at /v1/models; a longer request gets vLLM's HTTP 400",
    )
    parser.add_argument(
        "--no-tokenize",
        action="store_true",
        help="answer POST /tokenize with 404 (by default it counts tokens as vLLM does)",
    )
    args = parser.parse_args(argv)
    with serve_judge_replica(slots=args.slots, latency_s=args.latency_s, max_model_len=args.max_model_len,
                             tokenize=not args.no_tokenize, port=args.port, model=args.model) as url:  # fmt: skip
        print(url, flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        print(f"answered {url.answered}, refused as too long {url.refused}, /tokenize {url.tokenize_calls}", flush=True)


if __name__ == "__main__":
    main()
