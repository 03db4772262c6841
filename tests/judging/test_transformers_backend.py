"""TransformersBackend: batching of concurrent requests and real token counts, with a tiny model."""

import asyncio
import gc

import pytest

from trl_rankreward.judging.backends.transformers_backend import TransformersBackend
from trl_rankreward.judging.calls import RetryPolicy
from trl_rankreward.judging.llm_judge import LLMJudge
from trl_rankreward.judging.requests import JudgeFailure, PointwiseRequest
from trl_rankreward.tiny import build_tiny_model


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    return TransformersBackend(build_tiny_model(tmp_path_factory.mktemp("tiny")), device="cpu", max_batch_size=2)


def test_concurrent_requests_are_batched_and_tokens_counted(backend):
    batches = []
    generate = backend._generate
    backend._generate = lambda batch: batches.append(len(batch)) or generate(batch)
    messages = [[{"role": "user", "content": "hello " * n}] for n in (1, 3, 5, 7, 9)]

    async def five():
        return await asyncio.gather(*[backend.complete(m, max_tokens=4) for m in messages])

    try:
        completions = asyncio.run(five())
    finally:
        del backend._generate
    assert batches == [2, 2, 1]  # 5 requests, at most 2 per batch
    gc.collect()
    assert len(backend._queues) == 0  # nothing keeps the finished event loop alive
    for m, c in zip(messages, completions, strict=True):
        # Prompt tokens are the unpadded chat-template length, despite left padding in the batch.
        expected = len(backend.tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=True)["input_ids"])
        assert c.prompt_tokens == expected
        assert 1 <= c.completion_tokens <= 4


def test_llm_judge_on_the_in_process_model_fails_cleanly(backend):
    judge = LLMJudge(backend, retry=RetryPolicy(max_attempts=2), max_tokens=4)
    verdict = asyncio.run(judge.judge(PointwiseRequest(query="q", response="r")))
    assert isinstance(verdict, JudgeFailure) and verdict.kind == "invalid"  # a random model writes no JSON
    assert (judge.ledger.calls, judge.ledger.failures) == (2, {"invalid": 2})
    assert judge.ledger.prompt_tokens > 0
