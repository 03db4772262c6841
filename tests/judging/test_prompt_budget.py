"""PromptBudget: the token arithmetic by hand, the equal-share cut, the learned ratio, vLLM's refusals;
and LLMJudge against real loopback replicas with a 1,400-token-style window (shrink and retry once)."""

import asyncio

import pytest

from trl_rankreward.judging.backends.base import BackendError
from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend
from trl_rankreward.judging.llm_judge import LLMJudge
from trl_rankreward.judging.prompt_budget import (
    ContextOverflow,
    PromptBudget,
    PromptTooLong,
    answer_tokens,
    context_overflow,
    equal_share_chars,
    request_fitting,
)
from trl_rankreward.judging.rendering import JudgeTemplates
from trl_rankreward.judging.requests import (
    CoarseRequest,
    JudgeFailure,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
)
from trl_rankreward.testing.judge_replica import context_length_message, replica_prompt_tokens, serve_judge_replica


class Words:
    """One token per whitespace-separated word: counts a reader can check."""

    def count(self, text):
        return len(text.split())


# 'Q what? R <response id="response">\n<text>\n</response>': 5 words, the text's, then '</response>'.
# The budgets below believe the server counts as `Words` does until told otherwise (prior_ratio=1.0).
TEMPLATES = JudgeTemplates(pointwise="Q {QUERY} R {RESPONSE}")


def fit(budget, request, max_tokens=1024):
    return asyncio.run(budget.fit_chat(**request_fitting(request, TEMPLATES, seed=0, max_tokens=max_tokens)))


def test_answer_tokens_per_request_kind():
    t = JudgeTemplates()
    assert answer_tokens(PointwiseRequest(query="q", response="r"), t) == 32  # max(32, 2 * 12)
    # listwise of 5: 2 * (16 + 4 * 5) = 72
    assert answer_tokens(ListwiseRequest(query="q", candidates=["a", "b", "c", "d", "e"]), t) == 72
    # rubric-pairwise over 3 rubrics at once: 2 * (12 + 4 * 3) = 48
    assert answer_tokens(RubricPairwiseRequest(query="q", a="a", b="b", rubrics=["x", "y", "z"]), t) == 48
    # the meta prompt asks for discriminators first (its template names the GOLDEN RATIONALE): 2 * 128 + 384
    meta = MetaJudgeRequest(query="q", response_a="a", response_b="b", label="A", golden_rationale="g", rationale="r")
    assert answer_tokens(meta, t) == 640
    # a rationale before the pairwise verdict: 32 + 384
    assert answer_tokens(PairwiseRequest(query="q", a="a", b="b"), JudgeTemplates(pairwise_rationale=True)) == 416


def test_a_prompt_that_fits_is_sent_whole_with_max_tokens_what_the_window_leaves():
    budget = PromptBudget(100, counter=Words(), prior_ratio=1.0)
    request = PointwiseRequest(query="what?", response=" ".join(["abcd"] * 10))
    fitted = fit(budget, request)
    # local: 5 + 10 + 1 words + 4 per message = 20; estimate 20 * 1.0 * 1.1 + 16 = 38 <= 100 - 32 (answer) = 68
    assert fitted.local_tokens == 20 and fitted.rendered.cut_texts == 0
    assert fitted.max_tokens == 32  # nothing learned from the server yet: what a pointwise answer needs
    budget.observe(20, 20)  # the server counts as we do
    assert fit(budget, request).max_tokens == 100 - 38  # 62: the rest of the window (under the configured 1024)
    assert fit(budget, PointwiseRequest(query="what?", response="abcd"), max_tokens=10).max_tokens == 10


class NeverCalled:
    def count(self, text):
        raise AssertionError("a prompt whose bytes fit the window needs no count")


def test_a_prompt_whose_bytes_fit_is_not_counted():
    budget = PromptBudget(1000, counter=NeverCalled())
    fitted = fit(budget, PointwiseRequest(query="what?", response="abcd"))
    # 'Q what? R ' (10) + '<response id="response">' (24) + '\nabcd\n' (6) + '</response>' (11) = 51 bytes:
    # bound 51 + 8 (one message) + 64 (template) = 123 <= 1000 - 32
    assert fitted.max_tokens == 1000 - 123 and fitted.local_tokens == 0


def test_a_prompt_over_its_budget_is_cut_to_the_largest_share_that_fits():
    budget = PromptBudget(100, counter=Words(), prior_ratio=1.0)
    text = " ".join(["abcd"] * 100)  # 499 characters, 100 words
    fitted = fit(budget, PointwiseRequest(query="what?", response=text))
    # whole: local 5 + 100 + 1 + 4 = 110, estimate 110 * 1.1 + 16 = 137 > budget 100 - 32 = 68. The text
    # is 100 * 1.1 = 110 estimated tokens over 499 characters; the rest is 137 - 110 = 27, so the text may
    # have 68 - 27 = 41, a cut mark 6 * 1.1 = 6.6 of them: 110 * L / 499 <= 34.4 -> L = 156 characters
    # ("abcd " x 31 and "a"), then the mark's 2 words "[... cut]"; 499 - 156 = 343 characters cut.
    # Local 5 + 34 + 1 + 4 = 44, estimate ceil(44 * 1.1) + 16 = 65 <= 68; max_tokens: the answer's 32
    # (nothing learned yet; it would be 100 - 65 = 35 once the server's count is known).
    content = fitted.rendered.messages[0]["content"]
    assert "abcd a [... cut]\n</response>" in content
    assert content.count("abcd") == 31
    assert (fitted.rendered.cut_texts, fitted.rendered.cut_chars) == (1, 343)
    assert (fitted.local_tokens, fitted.max_tokens) == (44, 32)


def test_every_shown_text_gets_the_same_share_and_short_ones_stay_whole():
    # lengths 10, 100, 1000 characters of 2, 20, 200 tokens; 60 tokens available, marks of 5:
    # L = 100 keeps the first two whole (22) and costs the third 200 * 100 / 1000 + 5 = 25: 47 <= 60;
    # L = 165: 2 + 20 + 33 + 5 = 60 fits exactly, L = 166 costs 60.2.
    assert equal_share_chars([10, 100, 1000], [2, 20, 200], 60, 5) == 165
    assert equal_share_chars([10, 100], [2, 20], 5, 5) == -1  # even L = 0 costs two marks, 10 > 5


def test_a_request_that_cannot_fit_is_not_sent():
    budget = PromptBudget(100, counter=Words(), prior_ratio=1.0)
    with pytest.raises(PromptTooLong, match="does not fit the judge's window of 100 tokens"):
        fit(budget, PointwiseRequest(query=" ".join(["long"] * 200), response="short answer"))


def test_the_ratio_learns_from_the_server_and_the_exact_count_is_asked_near_the_budget():
    asked = []

    async def exact(messages):
        asked.append(messages)
        return 45

    budget = PromptBudget(100, counter=Words(), count_exact=exact)  # prior 1.5: replaced by what is seen
    request = PointwiseRequest(query="what?", response=" ".join(["abcd"] * 10))
    fitted = fit(budget, request)  # nothing learned yet: the server's count is asked
    # the server says 45 for our 20: ratio 2.25; sent whole (45 <= 68), max_tokens 100 - 45
    assert len(asked) == 1 and budget.ratio == 2.25 and fitted.max_tokens == 55
    # now the estimate ceil(20 * 2.25 * 1.1) + 16 = 50 + 16 = 66 exceeds 0.75 * 68 = 51: asked again
    fit(budget, request)
    assert len(asked) == 2
    # a short prompt: local 5 + 1 + 1 + 4 = 11, estimate ceil(11 * 2.475) + 16 = 28 + 16 = 44 <= 51: not asked
    assert fit(budget, PointwiseRequest(query="what?", response="abcd")).max_tokens == 100 - 44
    assert len(asked) == 2
    budget.observe(10, 100)
    assert budget.ratio == 4.0  # capped: a server whose usage is off cannot shrink every prompt to nothing


def test_coarse_requests_cut_anchors_and_candidate_alike_and_keep_the_verdict_ids():
    budget = PromptBudget(400, counter=Words(), prior_ratio=1.0)
    anchors = [" ".join([f"a{i}"] * 80) for i in range(4)]
    request = CoarseRequest(query="q?", anchors=anchors, candidate=" ".join(["c"] * 80))
    fitted = fit(budget, request)
    content = fitted.rendered.messages[0]["content"]
    assert fitted.rendered.cut_texts == 5  # four anchors and the candidate, each the same share
    assert all(f'<response id="A{i}">' in content for i in range(4)) and content.count("[... cut]") == 5
    assert fitted.local_tokens + 16 <= 400 - 32


def test_vllm_refusals_are_read_in_both_wordings_and_nothing_else_is():
    new = BackendError(context_length_message(1400, 1500, 64), kind="http", status=400)
    assert context_overflow(new) == ContextOverflow(1400, 1500)
    old = BackendError(
        "This model's maximum context length is 4096 tokens. However, you requested 4200 tokens (3176 in the "
        "messages, 1024 in the completion). Please reduce the length of the messages or completion.",
        kind="http",
        status=400,
    )
    assert context_overflow(old) == ContextOverflow(4096, 3176)
    assert context_overflow(BackendError("bad model", kind="http", status=400)) is None
    assert context_overflow(BackendError("This model's maximum context length is 9 tokens", status=500)) is None


class Undercount:
    """A local counter that counts a third of the replica's tokens: every estimate is far too low until
    the ratio is learned."""

    def count(self, text):
        return replica_prompt_tokens([{"content": text}]) // 3


def coarse(n_anchors=6, words=60):
    anchors = [" ".join(f"anchor{i} word{j}" for j in range(words)) for i in range(n_anchors)]
    return CoarseRequest(query="Which is best?", query_id="q0", anchors=anchors, candidate="a candidate answer here")


def test_a_refused_prompt_is_shrunk_and_sent_once_more_over_http():
    with serve_judge_replica(max_model_len=700, tokenize=False) as replica:
        backend = OpenAICompatibleBackend(replica, replica.model)
        assert backend.context_window() == 700  # listed at /v1/models
        judge = LLMJudge(backend, token_counter=Undercount())
        verdict = asyncio.run(judge.judge(coarse()))
        assert isinstance(verdict, int) and 0 <= verdict <= 6
        # the first send (cut to what the prior ratio promised) was refused with vLLM's 400, which names the
        # prompt's tokens: the ratio is learned,
        # the second, cut to fit, was answered
        assert (replica.refused, replica.answered) == (1, 1)
        snapshot = judge.ledger.snapshot()
        assert snapshot.context_refusals == 1 and snapshot.failures == {"http": 1}
        assert snapshot.truncated_requests == 2 and snapshot.truncated_chars > 0  # both sends were cut
        asyncio.run(judge.judge(coarse()))  # learned: no further refusal
        assert replica.refused == 1


def test_with_tokenize_nothing_is_refused_and_unknown_windows_are_learned_from_a_refusal():
    with serve_judge_replica(max_model_len=700, tokenize=True) as replica:
        judge = LLMJudge(OpenAICompatibleBackend(replica, replica.model), token_counter=Undercount())

        async def three():
            return await asyncio.gather(*(judge.judge(coarse()) for _ in range(3)))

        verdicts = asyncio.run(three())
        assert all(isinstance(v, int) for v in verdicts)
        assert replica.refused == 0 and replica.tokenize_calls >= 3 and replica.answered == 3
    # a server that lists no window and has no /tokenize: its first refusal starts the budget
    with serve_judge_replica(max_model_len=700, tokenize=False) as replica:
        replica.max_model_len = None  # not listed at /v1/models ...
        backend = OpenAICompatibleBackend(replica, replica.model)
        replica.max_model_len = 700  # ... but enforced
        judge = LLMJudge(backend, max_tokens=64)
        assert judge.budget is None
        assert isinstance(asyncio.run(judge.judge(coarse())), int)
        assert judge.budget.window == 700 and replica.refused == 1 and replica.answered == 1


def test_a_request_that_cannot_fit_the_window_a_refusal_reveals_fails_as_too_long_unsent():
    with serve_judge_replica(max_model_len=700, tokenize=False) as replica:
        judge = LLMJudge(OpenAICompatibleBackend(replica, replica.model), token_counter=Undercount())
        replica.max_model_len = 60  # the server enforces less than it listed; the coarse template alone is longer
        failure = asyncio.run(judge.judge(coarse()))
        assert isinstance(failure, JudgeFailure) and failure.kind == "too_long"
        assert (replica.refused, replica.answered) == (1, 0)  # refused once, then never sent again
        snapshot = judge.ledger.snapshot()
        assert snapshot.failures == {"http": 1, "too_long": 1} and snapshot.calls == 1


def test_a_cut_keeps_the_display_order_of_the_whole_texts():
    from trl_rankreward.judging.rendering import render

    request = ListwiseRequest(query="q?", query_id="q1", candidates=[f"text {i} " * 30 for i in range(5)])
    whole, cut = render(request), render(request, limit_chars=20)
    assert cut.display == whole.display and cut.cut_texts == 5
    assert cut.cut_chars == sum(len(t) - 20 for t in request.candidates)  # each 210 characters, 190 cut


def test_an_exact_count_below_the_learned_ratio_sizes_the_cut_by_its_own_ratio():
    async def words(messages):  # the server counts as `Words` does
        return sum(len(m["content"].split()) + 4 for m in messages)

    budget = PromptBudget(200, counter=Words(), count_exact=words, prior_ratio=1.0)
    budget.observe(10, 30)  # an earlier prompt of other text counted 3 server tokens per local one
    fitted = fit(budget, PointwiseRequest(query="what?", response=" ".join(["abcd"] * 300)), max_tokens=32)
    # whole: 300 + 10 = 310 tokens counted exactly (ratio 1), over the budget 200 - 32 = 168. The texts cost
    # 310/310 = 1 per local token (not the learned 3 * 1.1): 300 * L / 1499 + 6 * 3.3 <= 168 - 10 -> L = 690
    # (the old split, 3.3 per text token, left the rest negative and missed the budget in all four rounds)
    assert fitted.rendered.cut_chars == 1499 - 690
    assert fitted.local_tokens == 138 + 2 + 10 <= 168  # 138 "abcd", the mark's two words, the rest
