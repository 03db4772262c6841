"""The judge client against hostile servers on loopback: a body without end, server faults of a 200
(empty `choices`, an error body, another model's answer), Retry-After in the worst case, and
credentials in a URL. Each server is a real HTTP server (`serve_scripted_judge`, `FaultProxy`)."""

import asyncio
import resource
import time

import pytest

from trl_rankreward.judging import LLMJudge
from trl_rankreward.judging.backends.base import DEFAULT_MAX_RESPONSE_BYTES, BackendError
from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend, same_model
from trl_rankreward.judging.calls import RetryPolicy
from trl_rankreward.judging.rendering import render
from trl_rankreward.judging.requests import CoarseRequest, JudgeFailure, Rubric
from trl_rankreward.testing import FaultProxy, serve_scripted_judge

REQUEST = CoarseRequest(query="q", rubrics=(Rubric("r"),), anchors=["a0", "a1"], candidate="c")
MESSAGES = render(REQUEST).messages  # the scripted judge answers prompts rendered with the default templates
MIB = 1024 * 1024


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB


def test_a_body_streamed_without_end_is_cut_at_the_bound_quickly_and_memory_stays_flat():
    # The proxy streams 64 kB chunks as fast as the client reads, for up to 60 s. The client must stop
    # at max_response_bytes (2 MiB), long before its 30 s deadline, holding at most the bound plus a
    # chunk: the peak RSS grows by far less than what 30 s of loopback streaming (GBs) would hold.
    with serve_scripted_judge() as upstream, FaultProxy(upstream) as proxy:
        proxy.inject("endless_body")
        backend = OpenAICompatibleBackend(proxy.url, upstream.model, timeout_s=30, max_response_bytes=2 * MIB)
        before, start = _peak_rss_mib(), time.monotonic()
        with pytest.raises(BackendError) as info:
            asyncio.run(backend.complete(MESSAGES))
        elapsed = time.monotonic() - start
        assert info.value.kind == "too_large" and info.value.retryable
        assert "max_response_bytes=2097152" in str(info.value) and proxy.url in str(info.value)
        assert elapsed < 5.0, elapsed
        assert _peak_rss_mib() - before < 64
        # the client hung up: the proxy stops sending within a moment (socket buffers hold a few MiB at most)
        time.sleep(0.3)
        sent = proxy.streamed_bytes
        time.sleep(0.3)
        assert proxy.streamed_bytes == sent and sent < 64 * MIB
        assert asyncio.run(backend.complete(MESSAGES)).text  # the fault is used up: the next answer is read


def test_a_body_over_the_bound_with_a_content_length_is_refused_unread():
    # An upstream answer is a few hundred bytes; a 100-byte bound refuses it by its Content-Length.
    with serve_scripted_judge() as upstream:
        backend = OpenAICompatibleBackend(upstream, upstream.model, max_response_bytes=100)
        with pytest.raises(BackendError, match=r"over max_response_bytes=100 bytes \(HTTP 200") as info:
            asyncio.run(backend.complete(MESSAGES))
        assert info.value.kind == "too_large"
    assert DEFAULT_MAX_RESPONSE_BYTES == 8 * MIB


@pytest.mark.parametrize("bound", [0, -1, True, 1.5])
def test_a_bad_bound_is_refused(bound):
    with pytest.raises(ValueError, match="max_response_bytes must be an integer >= 1"):
        OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m", check_on_start=False, max_response_bytes=bound)


def test_a_runaway_body_becomes_a_counted_failure_of_the_judge():
    # Three tries, each cut at the bound: a JudgeFailure of kind too_large, three calls in the ledger.
    with serve_scripted_judge() as upstream, FaultProxy(upstream) as proxy:
        proxy.inject("endless_body", count=3)
        backend = OpenAICompatibleBackend(proxy.url, upstream.model, timeout_s=30, max_response_bytes=MIB)
        judge = LLMJudge(backend, retry=RetryPolicy(max_attempts=3, backoff_s=0.01, jitter_s=0))
        verdict = asyncio.run(judge.judge(REQUEST))
    assert isinstance(verdict, JudgeFailure) and verdict.kind == "too_large" and verdict.attempts == 3
    assert judge.ledger.failures == {"too_large": 3}


@pytest.mark.parametrize(
    "fault, kind, says",
    [
        ("empty_choices", "no_choices", "no choices"),
        ("error_200", "error_body", "answered HTTP 200 with an error instead of a chat completion: The server had"),
        ("wrong_model", "wrong_model", "answered with model 'other-model', not the configured 'scripted-judge'"),
    ],
)
def test_server_faults_of_a_200_have_their_own_kind_and_message(fault, kind, says):
    with serve_scripted_judge() as upstream, FaultProxy(upstream) as proxy:
        proxy.inject(fault)
        backend = OpenAICompatibleBackend(proxy.url, upstream.model)
        with pytest.raises(BackendError) as info:
            asyncio.run(backend.complete(MESSAGES))
        assert info.value.kind == kind and says in str(info.value) and info.value.retryable
        assert asyncio.run(backend.complete(MESSAGES)).text  # the next answer is fine again


def test_a_server_fault_is_retried_after_a_backoff_not_counted_as_an_invalid_answer():
    # empty choices, then a good answer: one no_choices failure and a verdict (never "invalid").
    with serve_scripted_judge() as upstream, FaultProxy(upstream) as proxy:
        proxy.inject("empty_choices")
        judge = LLMJudge(OpenAICompatibleBackend(proxy.url, upstream.model),
                         retry=RetryPolicy(backoff_s=0.01, jitter_s=0))  # fmt: skip
        verdict = asyncio.run(judge.judge(REQUEST))
    assert not isinstance(verdict, JudgeFailure) and judge.ledger.failures == {"no_choices": 1}


@pytest.mark.parametrize(
    "configured, answered, same",
    [
        ("m", "m", True),
        ("gpt-4o", "gpt-4o-2024-08-06", True),  # a dated snapshot of the name asked for
        ("Qwen/Qwen3-8B", "Qwen3-8B", True),  # the same last path part
        ("/models/Qwen3-8B", "Qwen/Qwen3-8B", True),
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-32B", False),
        ("gpt-4o", "gpt-4o-mini", True),  # a suffix cannot be told from a snapshot: accepted
        ("judge", "other-model", False),
    ],
)
def test_same_model(configured, answered, same):
    assert same_model(configured, answered) is same


def test_retry_after_waits_enter_the_worst_case_figure():
    # Two 429s with Retry-After: 0.2 s each, then a good answer: the request takes the two waits (>= 0.4 s).
    # The worst case bounds any request: 3 tries x 1 s + 2 waits of at most max_retry_after_s = 0.5 s.
    policy = RetryPolicy(max_attempts=3, backoff_s=0.01, jitter_s=0, max_retry_after_s=0.5)
    assert policy.worst_case_s(1.0) == 3 * 1.0 + 2 * 0.5
    with serve_scripted_judge() as upstream, FaultProxy(upstream) as proxy:
        proxy.inject("http_429", count=2, retry_after_s=0.2)
        judge = LLMJudge(OpenAICompatibleBackend(proxy.url, upstream.model, timeout_s=1.0), retry=policy)
        start = time.monotonic()
        verdict = asyncio.run(judge.judge(REQUEST))
        elapsed = time.monotonic() - start
    assert not isinstance(verdict, JudgeFailure) and 0.4 <= elapsed <= policy.worst_case_s(1.0)


def test_a_retry_after_longer_than_the_cap_waits_only_the_cap():
    # Retry-After: 30 with max_retry_after_s = 0.3: the one retry comes after 0.3 s, not 30 s.
    policy = RetryPolicy(max_attempts=2, backoff_s=0.01, jitter_s=0, max_retry_after_s=0.3)
    with serve_scripted_judge() as upstream, FaultProxy(upstream) as proxy:
        proxy.inject("http_429", retry_after_s=30)
        judge = LLMJudge(OpenAICompatibleBackend(proxy.url, upstream.model, timeout_s=1.0), retry=policy)
        start = time.monotonic()
        verdict = asyncio.run(judge.judge(REQUEST))
        elapsed = time.monotonic() - start
    assert not isinstance(verdict, JudgeFailure) and 0.3 <= elapsed < policy.worst_case_s(1.0) == 2 * 1.0 + 0.3


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:s3cr3t-pw@127.0.0.1:9/v1",
        "http://s3cr3t-pw@127.0.0.1:9",
        "https://alice:s3cr3t-pw@judge.example.com/v1/",
        "ftp://alice:s3cr3t-pw@127.0.0.1/v1",  # refused for its scheme, the password masked too
    ],
)
def test_credentials_in_a_url_are_refused_at_start_and_never_printed(url):
    with pytest.raises(ValueError) as info:
        OpenAICompatibleBackend(url, "m")
    message = str(info.value)
    assert "s3cr3t-pw" not in message and "alice" not in message and "s3cr3t-pw" not in repr(info.value)
    assert "***@" in message
    if url.startswith("http"):
        assert "credentials" in message and "api_key_env" in message


def test_the_api_key_is_never_replaced_by_a_urls_user_info(monkeypatch):
    # A URL without user-info keeps the key of api_key_env; with user-info it is refused before any request.
    monkeypatch.setenv("JUDGE_KEY", "k-123")
    with serve_scripted_judge() as upstream:
        backend = OpenAICompatibleBackend(upstream, upstream.model, api_key_env="JUDGE_KEY")
        assert asyncio.run(backend.complete(MESSAGES)).text and "k-123" not in repr(backend)
        port = upstream.split(":")[2].split("/")[0]
        with pytest.raises(ValueError, match="holds credentials"):
            OpenAICompatibleBackend(f"http://u:pw@127.0.0.1:{port}/v1", upstream.model, api_key_env="JUDGE_KEY")
