"""LLMJudge + OpenAICompatibleBackend against a real `transformers serve` with a tiny random model.

The random model answers garbage, cut at `max_tokens` or not, which exercises invalid-answer and
length-cut retries (a cut answer is asked again with twice the room), the ledger's token
counts (compared with the server's own `usage`) and failure values; a stopped server must
give counted transport failures quickly, not a hang.
"""

import asyncio
import json
import time
import urllib.request
from collections import Counter

import pytest

from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend
from trl_rankreward.judging.calls import RetryPolicy
from trl_rankreward.judging.llm_judge import LLMJudge
from trl_rankreward.judging.rendering import render_messages
from trl_rankreward.judging.requests import CoarseRequest, JudgeFailure, PointwiseRequest
from trl_rankreward.testing.chat_servers import serve_transformers
from trl_rankreward.tiny import build_tiny_model

pytestmark = pytest.mark.server

MAX_TOKENS = 8
RUBRICS = [{"text": "Correct", "weight": 5}, {"text": "Clear", "weight": 2}]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("judge_model"))


@pytest.fixture(scope="module")
def server(tiny_model):
    with serve_transformers(tiny_model) as url:
        yield url


def server_answer(server, messages, max_tokens: int) -> dict:
    """The server's own answer body (`usage`, `finish_reason`) for one greedy completion, over plain HTTP."""
    body = {"model": server.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
    request = urllib.request.Request(
        f"{server}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def expected_tries(server, messages) -> list[tuple[str, dict]]:
    """(failure kind, usage) of each of three tries, as the retry policy asks them: an answer cut at
    `max_tokens` is `length` and the next try gets twice the room (at most 4 x MAX_TOKENS, no window
    known); one that ended is garbage, `invalid`, asked again with the same room."""
    tries, max_tokens = [], MAX_TOKENS
    for _ in range(3):
        body = server_answer(server, messages, max_tokens)
        cut = body["choices"][0]["finish_reason"] == "length"
        tries.append(("length" if cut else "invalid", body["usage"]))
        max_tokens = min(2 * max_tokens, 4 * MAX_TOKENS) if cut else max_tokens
    return tries


def test_garbage_answers_fail_and_tokens_match_server_usage(server):
    backend = OpenAICompatibleBackend(server, server.model)
    judge = LLMJudge(backend, retry=RetryPolicy(max_attempts=3), max_tokens=MAX_TOKENS, structured_output=False)
    requests = [
        CoarseRequest(
            query="Name a colour.", rubrics=RUBRICS, anchors=["Red.", "Blue, like the sky."], candidate="Green"
        ),
        PointwiseRequest(query="Name a colour.", rubrics=RUBRICS, response="Green"),
    ]

    async def both():
        return await asyncio.gather(*[judge.judge(r) for r in requests])

    verdicts = asyncio.run(both())
    # Greedy decoding is deterministic, so each attempt is what one direct call with its max_tokens gives.
    tries = [expected_tries(server, render_messages(r)) for r in requests]
    for verdict, expected in zip(verdicts, tries):
        assert isinstance(verdict, JudgeFailure)
        assert (verdict.kind, verdict.attempts) == (expected[-1][0], 3)
    kinds = Counter(kind for expected in tries for kind, _ in expected)
    ledger = judge.ledger
    assert (ledger.calls, ledger.parsed, ledger.failures) == (6, 0, dict(kinds))  # 2 requests x 3 attempts
    usages = [usage for expected in tries for _, usage in expected]
    assert all(u["prompt_tokens"] > 0 and u["completion_tokens"] > 0 for u in usages)
    assert ledger.prompt_tokens == sum(u["prompt_tokens"] for u in usages)
    assert ledger.completion_tokens == sum(u["completion_tokens"] for u in usages)


def test_start_up_check_accepts_the_live_server(server):
    OpenAICompatibleBackend(server, server.model)  # must not raise


def test_server_stopped_mid_run_gives_counted_transport_failures(tiny_model):
    with serve_transformers(tiny_model) as srv:
        backend = OpenAICompatibleBackend(srv, srv.model, timeout_s=30)
        retry = RetryPolicy(max_attempts=2, backoff_s=0.05, jitter_s=0.0)
        judge = LLMJudge(backend, retry=retry, max_tokens=MAX_TOKENS)

        async def stop_mid_run():
            tasks = [asyncio.create_task(judge.judge(PointwiseRequest(query=f"q{i}", response="r"))) for i in range(6)]
            while judge.ledger.calls == 0:  # the server has answered at least once: we are mid-run
                await asyncio.sleep(0.01)
            await asyncio.to_thread(srv.stop)
            return await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)

        results = asyncio.run(stop_mid_run())
        assert all(isinstance(r, JudgeFailure) for r in results)  # garbage or dead server: never a verdict
        assert any(r.kind == "transport" for r in results)
        assert judge.ledger.failures.get("transport", 0) >= 1
        assert judge.ledger.calls == sum(judge.ledger.failures.values())

        # After the stop, new requests fail at once: 3 requests x 2 attempts, all transport.
        before = judge.ledger.snapshot()
        start = time.monotonic()

        async def three():
            return await asyncio.gather(*[judge.judge(PointwiseRequest(query="q", response=str(i))) for i in range(3)])

        after = asyncio.run(three())
        assert time.monotonic() - start < 10
        assert [r.kind for r in after] == ["transport"] * 3
        assert srv in after[0].message  # the message names the server
        delta = judge.ledger.snapshot() - before
        assert (delta.calls, delta.parsed, delta.failures) == (6, 0, {"transport": 6})


def test_serve_transformers_needs_a_model_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no config.json; build a model first"):
        with serve_transformers(tmp_path):
            pass
