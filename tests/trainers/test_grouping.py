"""Rows -> whole groups, and the checks that catch a broken layout."""

import pytest

from trl_rankreward.data.prompts import query_id, query_text
from trl_rankreward.judging.calls import JudgeLedger
from trl_rankreward.trainers.group_scoring import (
    JudgeUsage,
    combined_snapshot,
    completion_text,
    reward_row,
    rows_to_groups,
)


def rows(*query_ids):
    return [reward_row({"query_id": q}, f"question {q}", f"answer {i}") for i, q in enumerate(query_ids)]


def test_consecutive_rows_form_groups():
    groups = rows_to_groups(rows("a", "a", "b", "b"), 2)
    assert [(g.query_id, g.completions) for g in groups] == [
        ("a", ("answer 0", "answer 1")),
        ("b", ("answer 2", "answer 3")),
    ]


def test_incomplete_or_mixed_groups_raise():
    with pytest.raises(ValueError, match="not a multiple of num_generations=2"):
        rows_to_groups(rows("a", "a", "b"), 2)
    with pytest.raises(ValueError, match="rollout 1 belongs to query 'b'"):
        rows_to_groups(rows("a", "b", "b", "a"), 2)


def test_chat_prompts_and_completions_become_text():
    prompt = [{"role": "system", "content": "Think first."}, {"role": "user", "content": "Hi?"}]
    assert query_text(prompt) == "Hi?"  # system instructions are for the policy, not the judge
    assert completion_text([{"role": "assistant", "content": "Hello"}]) == "Hello"
    assert reward_row({}, "same text", "x")["query_id"] == reward_row({}, "same text", "y")["query_id"]


def test_reward_row_uses_the_data_pipelines_query_text_and_id():
    # One text form of a prompt: the judge's query and the fallback id match what data preparation wrote.
    prompt = [
        {"role": "system", "content": "Think first."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
        {"role": "user", "content": "Bye"},
    ]
    row = reward_row({}, prompt, "x")
    assert row["query"] == query_text(prompt) == "User: Hi\n\nAssistant: Hello\n\nUser: Bye"
    assert row["query_id"] == query_id(prompt)


def test_judge_usage_steps_and_totals_continue_after_restore():
    judge = type("J", (), {"ledger": JudgeLedger()})()
    usage = JudgeUsage()
    for _ in range(3):
        judge.ledger.record(request_kind="coarse", parsed=True, prompt_tokens=10)
    judge.ledger.record(request_kind="coarse", parsed=False, failure="timeout")
    first = usage.step_metrics(combined_snapshot([judge]))
    assert (first["judge/calls"], first["judge/parsed_calls"], first["judge/failures_timeout"]) == (4, 3, 1)
    saved = usage.state_dict(combined_snapshot([judge]))

    # A resumed process: fresh ledger, totals restored; one more call gives step 1, total 5.
    judge2 = type("J", (), {"ledger": JudgeLedger()})()
    resumed = JudgeUsage()
    resumed.load_state_dict(saved, combined_snapshot([judge2]))
    judge2.ledger.record(request_kind="coarse", parsed=True, prompt_tokens=10)
    step = resumed.step_metrics(combined_snapshot([judge2]))
    assert (step["judge/calls"], step["judge/calls_total"], step["judge/prompt_tokens_total"]) == (1, 5, 40)
    assert step["judge/failures_timeout"] == 0 and step["judge/failures_timeout_total"] == 1  # kind kept as 0
