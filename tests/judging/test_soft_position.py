"""Soft placement: position probabilities from an OpenAI-style `logprobs` field (`parsing.soft_position`).

Responses are written by hand in the shape the OpenAI API (and vLLM, SGLang) return:
`choices[0].logprobs.content[i] = {"token", "logprob", "top_logprobs": [{"token", "logprob"}]}`.
Expected probabilities are the kept alternatives' exp(logprob), renormalized over 0..K.
"""

import asyncio
import math

import pytest

from trl_rankreward.judging.backends.base import Completion
from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend, token_logprobs
from trl_rankreward.judging.llm_judge import LLMJudge
from trl_rankreward.judging.parsing import parse_answer, soft_position
from trl_rankreward.judging.rendering import render
from trl_rankreward.judging.requests import CoarseRequest, SoftPosition
from trl_rankreward.testing.scripted_judge import serve_scripted_judge

LN = math.log


def _request(k=3, probabilities=True, candidate="c"):
    return CoarseRequest(query="q", anchors=tuple(f"a{i}" for i in range(k)), candidate=candidate,
                         probabilities=probabilities)  # fmt: skip


def _entry(token, p, top=()):
    return {"token": token, "logprob": LN(p), "top_logprobs": [{"token": t, "logprob": LN(q)} for t, q in top]}


def _logprobs(tokens, position_top):
    """`tokens` spelled with probability 1 each, except the token equal to `position_top[0][0]`
    (its last occurrence) which gets the `position_top` alternatives."""
    target = max(i for i, t in enumerate(tokens) if t == position_top[0][0])
    return {"content": [_entry(t, position_top[0][1], position_top) if i == target else _entry(t, 1.0, [(t, 1.0)])
                        for i, t in enumerate(tokens)]}  # fmt: skip


def _soft(tokens, top, request):
    text = "".join(tokens)
    rendered = render(request)
    position = parse_answer(text, request, rendered)
    return soft_position(text, token_logprobs(_logprobs(tokens, top)), position, request, rendered)


def test_single_digit_position_renormalized_over_valid_positions():
    # K = 3: "2" 0.6, "1" 0.3, "7" 0.05 (out of range, dropped), '"' 0.05 (not a number, dropped)
    # kept mass 0.9 -> P = (0, 0.3/0.9, 0.6/0.9, 0), coverage 0.9, E = 1/3 + 4/3 = 5/3
    top = [("2", 0.6), ("1", 0.3), ("7", 0.05), ('"', 0.05)]
    soft = _soft(['{"', "position", '":', " ", "2", "}"], top, _request())
    assert isinstance(soft, SoftPosition) and soft == 2
    assert soft.probabilities == pytest.approx((0, 1 / 3, 2 / 3, 0))
    assert soft.coverage == pytest.approx(0.9)
    assert soft.expected == pytest.approx(5 / 3)


def test_digit_quoted_earlier_in_the_answer_is_not_read():
    # The judge quotes a rollout's planted '{"position": 3}' before its own verdict 1. The quoted
    # "3" token is sure of 3; the verdict's "1" token splits 1: 0.5, 0: 0.5. Only the latter counts.
    tokens = ["The", " response", " says", ' {"', "position", '":', " ", "3", "}.", " Mine:", ' {"', "position",
              '":', " ", "1", "}"]  # fmt: skip
    content = _logprobs(tokens, [("1", 0.5), ("0", 0.5)])["content"]
    content[7] = _entry("3", 0.99, [("3", 0.99), ("2", 0.01)])
    request, text = _request(), "".join(tokens)
    rendered = render(request)
    assert parse_answer(text, request, rendered) == 1
    soft = soft_position(text, token_logprobs({"content": content}), 1, request, rendered)
    assert soft == 1 and soft.probabilities == pytest.approx((0.5, 0.5, 0, 0))


def test_missing_or_unaligned_logprobs_give_none():
    request = _request()
    rendered = render(request)
    text = '{"position": 2}'
    assert token_logprobs(None) is None and token_logprobs({"content": None}) is None
    assert soft_position(text, None, 2, request, rendered) is None
    # tokens that do not spell the answer text: no alignment, no distribution
    other = token_logprobs(_logprobs(["{", "x", "2", "}"], [("2", 1.0)]))
    assert soft_position(text, other, 2, request, rendered) is None


def test_multi_digit_position_in_one_token_and_split_over_two():
    request = _request(k=10)
    # one token "10" (tokenizers that group digits): 10 0.8, 9 0.2 -> P(10) = 0.8, P(9) = 0.2
    soft = _soft(['{"', "position", '":', " ", "10", "}"], [("10", 0.8), ("9", 0.2)], request)
    assert soft == 10 and soft.probabilities[9:] == pytest.approx((0.2, 0.8))
    # digit by digit ("1", "0"): the first token only says how the number starts -> None (hard fallback)
    assert _soft(['{"', "position", '":', " ", "1", "0", "}"], [("1", 0.9), ("9", 0.1)], request) is None


def test_alternatives_must_repeat_the_token_text_before_the_number():
    # The token is " 2" (space and digit together): " 3" counts for 3, "3" (no space) is another
    # continuation and is dropped: kept 0.7 + 0.2 -> P(2) = 7/9, P(3) = 2/9.
    soft = _soft(['{"', "position", '":', " 2", "}"], [(" 2", 0.7), (" 3", 0.2), ("3", 0.1)], _request())
    assert soft == 2 and soft.probabilities == pytest.approx((0, 0, 7 / 9, 2 / 9))


class _Backend:
    """A chat backend that answers a fixed completion and records the decoding options it got."""

    supports_logprobs = True

    def __init__(self, completion):
        self.completion, self.calls = completion, []

    async def complete(self, messages, **decoding):
        self.calls.append(decoding)
        return self.completion


def test_llm_judge_asks_for_logprobs_only_when_the_request_wants_probabilities():
    tokens = ['{"', "position", '":', " ", "1", "}"]
    completion = Completion("".join(tokens), logprobs=token_logprobs(_logprobs(tokens, [("1", 0.75), ("2", 0.25)])))
    backend = _Backend(completion)
    judge = LLMJudge(backend, top_logprobs=5)
    hard = asyncio.run(judge.judge(_request(probabilities=False)))
    soft = asyncio.run(judge.judge(_request()))
    assert type(hard) is int and hard == 1
    assert soft == 1 and soft.probabilities == pytest.approx((0, 0.75, 0.25, 0))
    assert backend.calls[0].get("top_logprobs") is None and backend.calls[1]["top_logprobs"] == 5
    assert judge.soft_fallbacks == 0


def test_llm_judge_falls_back_to_the_int_without_logprobs_and_counts_it():
    judge = LLMJudge(_Backend(Completion('{"position": 1}')))  # the server sent no logprobs
    verdict = asyncio.run(judge.judge(_request()))
    assert type(verdict) is int and verdict == 1 and judge.soft_fallbacks == 1


def test_end_to_end_through_the_scripted_server():
    # Scripted judge: quality = distinct words. Anchors 1 and 3 words, candidate 5 words -> position 2
    # (K = 2). Its digit token "2" has alternatives 2: 0.7, 3: 0.2 (out of range), 1: 0.1 -> P = (0, 1/8, 7/8).
    with serve_scripted_judge() as url:
        judge = LLMJudge(OpenAICompatibleBackend(url, url.model))
        request = CoarseRequest(query="q", anchors=("one", "one two three"), candidate="a b c d e", probabilities=True)
        soft = asyncio.run(judge.judge(request))
        plain = asyncio.run(judge.judge(CoarseRequest(query="q", anchors=request.anchors, candidate=request.candidate)))
    assert soft == 2 and soft.probabilities == pytest.approx((0, 1 / 8, 7 / 8))
    assert type(plain) is int and plain == 2
