"""The GenRM's prompts fitted to its context window, against real loopback servers: the scripted judge
replica (vLLM's window and its HTTP 400) for our layout and the benchmark, the scripted chat server for
the authors' layout and for the byte-for-byte check that a pair which fits is sent as without a window."""

import asyncio
import json

from trl_rankreward.evaluation.genrm_eval import evaluate_genrm
from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend
from trl_rankreward.judging.requests import JudgeFailure, PairwiseRequest
from trl_rankreward.rewards.genrm_reward import GenRMJudge
from trl_rankreward.rewards.genrm_verdict import MIN_GENRM_ANSWER_TOKENS, genrm_messages
from trl_rankreward.rewards.ralign_release import RAlignRelease, ReleaseMetaJudge
from trl_rankreward.rewards.ralign_reward import GenRMSample
from trl_rankreward.testing.chat_servers import Reply, serve_chat_script
from trl_rankreward.testing.fakes import write_fake_release
from trl_rankreward.testing.judge_replica import replica_prompt_tokens, serve_judge_replica

QUERY = "Which answer explains the topic better?"


class Recorded(OpenAICompatibleBackend):
    """The real HTTP backend, keeping what it was asked to send."""

    async def complete(self, messages, **decoding):
        self.sent = [*getattr(self, "sent", []), (messages, decoding)]
        return await super().complete(messages, **decoding)


def long_pair(words=1500, query=QUERY):
    # A: distinct words (the scripted judge's better text, cut or not); B: one word repeated
    a = " ".join(f"w{i}" for i in range(words))
    return PairwiseRequest(query=query, query_id="q0", a=a, b=" ".join(["same"] * words), display="ab")


def judge_messages(judge, request):
    return genrm_messages(request.query, request.a, request.b, judge.order_for(request))


def test_a_long_pair_is_cut_to_the_window_and_answered_not_refused():
    with serve_judge_replica(max_model_len=2500, tokenize=True) as replica:
        backend = Recorded(replica, replica.model)
        judge = GenRMJudge(backend)  # max_tokens GENRM_MAX_TOKENS (4096): alone more than the window
        request = long_pair()
        assert replica_prompt_tokens(judge_messages(judge, request)) + 4096 > 2500  # whole, it would be refused
        assert asyncio.run(judge.judge(request)) == "A"
        assert (replica.refused, replica.answered) == (0, 1)
        ((messages, decoding),) = backend.sent
        user = messages[-1]["content"]
        assert user.count("[... cut]") == 2 and QUERY in user  # both responses cut, the query whole
        # /tokenize counted the prompt: the answer gets the rest of the window, above the floor
        assert decoding["max_tokens"] == 2500 - replica_prompt_tokens(messages) >= MIN_GENRM_ANSWER_TOKENS
        snapshot = judge.ledger.snapshot()
        assert snapshot.truncated_requests == 1 and snapshot.truncated_chars > 0 and snapshot.failures == {}


def test_a_window_the_server_does_not_list_is_learned_from_its_refusal_and_the_pair_resent_cut():
    with serve_judge_replica(max_model_len=2500, tokenize=True) as replica:
        replica.max_model_len = None  # not listed at /v1/models ...
        judge = GenRMJudge(OpenAICompatibleBackend(replica, replica.model))
        replica.max_model_len = 2500  # ... but enforced
        assert asyncio.run(judge.judge(long_pair())) == "A"
        assert (replica.refused, replica.answered) == (1, 1)
        snapshot = judge.ledger.snapshot()
        assert snapshot.context_refusals == 1 and snapshot.truncated_requests == 1 and snapshot.failures == {"http": 1}


def test_a_pair_whose_window_leaves_too_few_answer_tokens_fails_as_too_long_unsent():
    # the window less the answer floor (1200 - 1024 = 176 tokens) is shorter than the GenRM prompt's template
    with serve_judge_replica(max_model_len=1200, tokenize=True) as replica:
        judge = GenRMJudge(OpenAICompatibleBackend(replica, replica.model))
        failure = asyncio.run(judge.judge(long_pair()))
        assert isinstance(failure, JudgeFailure) and failure.kind == "too_long"
        assert "window of 1200 tokens" in failure.message and "--max-model-len" in failure.message
        assert (replica.refused, replica.answered) == (0, 0)
        assert judge.ledger.snapshot().failures == {"too_long": 1} and judge.ledger.snapshot().calls == 0


def test_a_pair_that_fits_is_sent_byte_for_byte_as_without_a_window_in_both_layouts(tmp_path):
    release = RAlignRelease.load(str(write_fake_release(tmp_path / "release")))
    request = PairwiseRequest(query="2+2?", query_id="q1", a="4, since 2+2=4.", b="5.")
    with serve_chat_script(lambda messages: Reply("A is right. \\boxed{A}")) as server:
        for layout in (None, release):
            bodies = []
            for window in (None, 32768):  # a window far longer than the pair and the answer's 4096 tokens
                server.reset()
                backend = OpenAICompatibleBackend(server.url, "genrm", max_model_len=window)
                assert asyncio.run(GenRMJudge(backend, release=layout).judge(request)) in ("A", "B")
                bodies.append(json.dumps(server.requests, sort_keys=True))
            assert bodies[0] == bodies[1]


def test_the_authors_layout_is_cut_in_its_responses_only(tmp_path):
    release = RAlignRelease.load(str(write_fake_release(tmp_path / "release")))
    with serve_chat_script(lambda messages: Reply("\\boxed{A}")) as server:
        backend = Recorded(server.url, "genrm", max_model_len=2500)
        judge = GenRMJudge(backend, release=release)
        assert asyncio.run(judge.judge(long_pair())) == "A"
        ((messages, decoding),) = backend.sent
        assert messages[0]["content"] == release.genrm_system
        assert messages[1]["content"].count("[... cut]") == 2 and QUERY in messages[1]["content"]
        # no server count yet (no /tokenize, no usage seen): the answer gets the floor, not a guess of the rest
        assert decoding["max_tokens"] == MIN_GENRM_ANSWER_TOKENS
        assert judge.ledger.snapshot().truncated_requests == 1


def test_the_benchmark_fits_each_pair_and_counts_cuts_and_too_long():
    cut = long_pair()
    rows = [
        dict(prompt=QUERY, response_a=cut.a, response_b=cut.b, label="A", pair_id="long", source="s"),
        dict(prompt="Short?", response_a="yes, fully", response_b="no", label="A", pair_id="short", source="s"),
        # a prompt (never cut) longer than the window
        dict(prompt="why " * 3000, response_a="x", response_b="y", label="A", pair_id="hopeless", source="s"),
    ]
    with serve_judge_replica(max_model_len=2500, tokenize=True) as replica:
        report = asyncio.run(evaluate_genrm(rows, OpenAICompatibleBackend(replica, replica.model), progress=False))
        assert (replica.refused, replica.answered) == (0, 2)
    assert [r.status for r in report.records] == ["correct", "correct", "call_failed"]
    assert report.records[2].failure.startswith("too_long: PromptTooLong: GenRM request (pair_id='hopeless')")
    window = report.to_dict()["window"]
    assert window["truncated_requests"] == 1 and window["too_long"] == 1 and window["context_refusals"] == 0


def release_meta_request(release, words=1500):
    pair = long_pair(words)
    sample = GenRMSample(
        prompt=QUERY, response_a=pair.a, response_b=pair.b, label="A", order="ab",
        golden_rationale="A explains it. " * words, completion="<think>long</think>A is better. \\boxed{A}",
    )  # fmt: skip
    return release.meta_request(sample)


def test_the_authors_metarm_is_cut_in_responses_and_rationales_and_sent_whole_when_it_fits(tmp_path):
    release = RAlignRelease.load(str(write_fake_release(tmp_path / "release")))
    verdict = Reply("<genrm_analysis>Consistent.</genrm_analysis> <final_verdict>Correct</final_verdict>")
    with serve_chat_script(lambda messages: verdict) as server:
        backend = Recorded(server.url, "metarm", max_model_len=4000)
        judge = ReleaseMetaJudge(backend, max_tokens=16384)
        assert asyncio.run(judge.judge(release_meta_request(release))) is True
        ((messages, decoding),) = backend.sent
        content = messages[0]["content"]
        # both responses and the golden rationale are cut; the GenRM's short answer (thinking dropped) is whole
        assert content.count("[... cut]") == 3 and QUERY in content and "A is better. \\boxed{A}" in content
        assert decoding["max_tokens"] == MIN_GENRM_ANSWER_TOKENS  # no server count seen yet: the floor
        assert judge.ledger.snapshot().truncated_requests == 1
        # a request that fits is sent as it was built, whatever the window
        short = release_meta_request(release, words=5)
        server.reset()
        for window in (None, 32768):
            judge = ReleaseMetaJudge(OpenAICompatibleBackend(server.url, "metarm", max_model_len=window))
            assert asyncio.run(judge.judge(short)) is True
        first, second = server.requests
        assert first == second and first["messages"] == list(short.messages)
