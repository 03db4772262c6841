"""The R-Align authors' release protocol, rule by rule, with hand-written answers (no checkout needed).

The expected values are read off the rules of their scripts (github.com/lyn22333/R-Align), as
`rewards/ralign_release.py` states them; the prompts come from a fake release folder with text of
our own (`testing.fakes`).
"""

from __future__ import annotations

import asyncio

import pytest

from trl_rankreward.judging.backends.base import BackendError, Completion
from trl_rankreward.judging.calls import RetryPolicy
from trl_rankreward.judging.requests import JudgeFailure
from trl_rankreward.rewards.genrm_verdict import parse_verdict
from trl_rankreward.rewards.ralign_release import (
    RAlignRelease,
    ReleaseError,
    ReleaseMetaJudge,
    ReleaseMetaRequest,
    drop_thinking,
    first_boxed_verdict,
    joined_text,
    meta_verdict,
    pair_block,
)
from trl_rankreward.rewards.ralign_reward import GenRMSample, RAlignReward
from trl_rankreward.testing.fakes import FAKE_GENRM_SYSTEM, write_fake_release


@pytest.fixture
def release(tmp_path):
    return RAlignRelease.load(write_fake_release(tmp_path / "R-Align"))


# -- prompts: read from the scripts, never run ------------------------------------------------------


def test_prompts_are_read_from_the_scripts_without_running_them(release):
    # the fake scripts start with `raise SystemExit(...)`: loading them worked, so nothing ran
    assert release.genrm_system == FAKE_GENRM_SYSTEM
    assert "{context_and_responses}" in release.meta_template


def test_a_folder_without_the_scripts_or_the_constants_is_named_in_the_error(tmp_path):
    with pytest.raises(ReleaseError, match="is not a folder"):
        RAlignRelease.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReleaseError, match="generate_model_judgment.py does not exist"):
        RAlignRelease.load(tmp_path / "empty")
    folder = write_fake_release(tmp_path / "renamed")
    (folder / "metarm_judge.py").write_text("OTHER_PROMPT = 'x {context_and_responses}'\n")
    with pytest.raises(ReleaseError, match="assigns no module-level META_JUDGE_PROMPT_V1"):
        RAlignRelease.load(folder)
    (folder / "metarm_judge.py").write_text("META_JUDGE_PROMPT_V1 = 'only {context_and_responses}'\n")
    with pytest.raises(ReleaseError, match=r"has the fields \['context_and_responses'\]"):
        RAlignRelease.load(folder)


# -- layout ----------------------------------------------------------------------------------------


def test_single_turn_layout():
    expected = (
        "<|User Prompt|>\nWhat is 2+2?\n\n"
        "<|The Start of Assistant A's Answer with User|>\n\n4\n\n<|The End of Assistant A's Answer with User|>\n\n"
        "<|The Start of Assistant B's Answer with User|>\n\n5\n\n<|The End of Assistant B's Answer with User|>\n\n"
    )
    assert pair_block([{"role": "user", "content": "What is 2+2?"}], "4", "5") == expected


def test_no_turn_at_all_is_an_empty_user_prompt():
    assert pair_block([], "a", "b").startswith("<|User Prompt|>\n\n<|The Start of Assistant A's")


def test_earlier_turns_are_the_dialogue_context_and_other_roles_are_capitalized():
    turns = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye?"},
    ]
    block = pair_block(turns, "a", "b")
    assert block.startswith(
        "<|Dialogue Context|>\nSystem: Be brief.\nUser: Hi\nAssistant: Hello\n\n<|End of Dialogue Context|>\n\n"
        "<|User Prompt|>\nBye?\n\n"
    )


def test_genrm_request_is_system_then_pair_in_dataset_order(release):
    row = {"prompt": [{"role": "user", "content": "q"}], "response_a": "first", "response_b": "second", "label": "B"}
    shown = release.genrm_row(row, seed=123)
    assert shown["display_order"] == "ab" and shown["display_label"] == "B"  # no swap, whatever the seed
    assert shown["prompt"] == [
        {"role": "system", "content": FAKE_GENRM_SYSTEM},
        {"role": "user", "content": pair_block([{"role": "user", "content": "q"}], "first", "second")},
    ]


# -- answer text and GenRM verdict -----------------------------------------------------------------


def test_reasoning_content_is_joined_before_the_content():
    assert joined_text("answer", "thoughts") == "thoughts\n\n</think>\n\nanswer"
    assert joined_text("answer", None) == "\n\n</think>\n\nanswer"


def test_the_first_box_decides_not_the_last():
    text = "\\boxed{A} first, then \\boxed{B}"
    assert first_boxed_verdict(text) == "A"
    assert parse_verdict(text) is None  # our own rule refuses a hedge: the protocols differ here


def test_a_box_in_the_reasoning_comes_first():
    assert first_boxed_verdict(joined_text("so \\boxed{A}", "leaning \\boxed{B}")) == "B"
    assert first_boxed_verdict("<think>\\boxed{B}</think> \\boxed{A}") == "B"  # thinking is not removed


def test_bare_boxed_is_the_fallback_and_a_backslashed_box_wins_over_it():
    assert first_boxed_verdict("final: boxed{B}") == "B"
    assert first_boxed_verdict("boxed{B} ... \\boxed{A}") == "A"


@pytest.mark.parametrize("text", ["no verdict", "\\boxed{ A }", "\\boxed{AB}", "\\boxed{C}", "", None])
def test_no_exact_box_is_invalid(text):
    assert first_boxed_verdict(text) is None


# -- thinking --------------------------------------------------------------------------------------


def test_thinking_is_what_precedes_the_last_close_tag():
    assert drop_thinking("<think>x</think>\n\n  golden  ") == "golden"
    assert drop_thinking("a</think>b</think> c ") == "c"
    assert drop_thinking("  plain ") == "plain"
    assert drop_thinking(None) == ""


def test_meta_prompt_has_both_explanations_without_thinking(release):
    (message,) = release.meta_messages(
        [{"role": "user", "content": "q"}], "ra", "rb", "<think>g-notes</think>golden", "r\n\n</think>\n\nmodel says"
    )
    assert message["role"] == "user"
    assert message["content"] == release.meta_template.format(
        context_and_responses=pair_block([{"role": "user", "content": "q"}], "ra", "rb"),
        golden_explanation="golden",
        genrm_explanation="model says",
    )
    assert "g-notes" not in message["content"] and "r\n\n</think>" not in message["content"]


# -- MetaRM verdict --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("<genrm_analysis>ok</genrm_analysis>\n<final_verdict>\nCorrect\n</final_verdict>", True),
        ("<genrm_analysis>no</genrm_analysis><final_verdict>Incorrect</final_verdict>", False),
        ("<genrm_analysis>ok<final_verdict>  CORRECT ", True),  # closing tags may be missing
        ("<genrm_analysis>ok</genrm_analysis><final_verdict>**Correct**</final_verdict>", False),  # not "correct"
        (
            "<genrm_analysis>ok</genrm_analysis><final_verdict>Correct<final_verdict>Incorrect",
            True,
        ),  # up to the next tag
        ("<final_verdict>Correct</final_verdict>", None),  # no <genrm_analysis>: a parse failure
        ("<genrm_analysis>ok</genrm_analysis> Correct", None),  # no <final_verdict>
        ("The rationale is Correct.", None),
    ],
)
def test_meta_verdict_needs_both_tags(answer, verdict):
    assert meta_verdict(answer) is verdict


def test_meta_tags_in_the_reasoning_come_first():
    tagged = "<genrm_analysis>a</genrm_analysis><final_verdict>{}</final_verdict>"
    assert meta_verdict(joined_text(tagged.format("Correct"), tagged.format("Incorrect"))) is False


# -- asking: once per answer, only label-correct answers meta-judged -------------------------------


class CountingBackend:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    async def complete(self, messages, **decoding):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_meta_answer_without_tags_is_a_failure_and_not_asked_again():
    backend = CountingBackend([Completion("Correct, I think.")])
    judge = ReleaseMetaJudge(backend, retry=RetryPolicy(max_attempts=3))
    verdict = asyncio.run(judge.judge(ReleaseMetaRequest(({"role": "user", "content": "x"},))))
    assert isinstance(verdict, JudgeFailure) and verdict.kind == "invalid"
    assert backend.calls == 1


def test_a_server_error_is_retried():
    tagged = "<genrm_analysis>a</genrm_analysis><final_verdict>Correct</final_verdict>"
    backend = CountingBackend(
        [BackendError("HTTP 500", kind="http", status=500, retry_after_s=0.0), Completion(tagged)]
    )
    judge = ReleaseMetaJudge(backend, retry=RetryPolicy(max_attempts=3))
    assert asyncio.run(judge.judge(ReleaseMetaRequest(({"role": "user", "content": "x"},)))) is True
    assert backend.calls == 2


class RecordingMeta:
    def __init__(self):
        self.requests = []

    async def judge(self, request):
        self.requests.append(request)
        return True


def test_only_label_correct_answers_are_meta_judged_with_the_release_request(release):
    meta = RecordingMeta()
    method = RAlignReward(meta, protocol=release)
    turns = [{"role": "user", "content": "q"}]
    samples = [
        GenRMSample(turns, "ra", "rb", "A", "golden", "\\boxed{A} then \\boxed{B}", "ab", key="right-by-first-box"),
        GenRMSample(turns, "ra", "rb", "A", "golden", "\\boxed{B}", "ab", key="wrong"),
        GenRMSample(turns, "ra", "rb", "A", "golden", "no box", "ab", key="invalid"),
    ]
    scores = asyncio.run(method.score(samples))
    assert [s.status for s in scores] == ["consistent", "wrong", "invalid"]
    (request,) = meta.requests
    assert isinstance(request, ReleaseMetaRequest) and request.query_id == "right-by-first-box"
    assert list(request.messages) == release.meta_messages(turns, "ra", "rb", "golden", "\\boxed{A} then \\boxed{B}")
