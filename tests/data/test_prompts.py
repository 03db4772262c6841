"""`query_text`: the one text form of a prompt, shared by data preparation, rubric generation and the trainers."""

from trl_rankreward.data import prompts
from trl_rankreward.data.prompts import query_id, query_text
from trl_rankreward.judging.requests import text_id
from trl_rankreward.rubrics.generate import RANKBUFFER_RUBRIC_TEMPLATE, rubric_values

SYSTEM = {"role": "system", "content": "Think step by step, then answer."}


def test_plain_and_single_turn_prompts_are_the_query_as_is():
    assert query_text("What is 2 + 2?") == "What is 2 + 2?"
    assert query_text([{"role": "user", "content": "What is 2 + 2?"}]) == "What is 2 + 2?"
    assert query_text([SYSTEM, {"role": "user", "content": "What is 2 + 2?"}]) == "What is 2 + 2?"
    assert query_text(
        [{"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "4?"}]}]
    ) == ("What is 4?")


def test_multi_turn_prompts_are_a_role_transcript_without_system_messages():
    turns = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ]
    expected = "User: Hi\n\nAssistant: Hello\n\nUser: Bye"
    assert query_text(turns) == query_text([SYSTEM, *turns]) == expected
    assert query_id(turns) == query_id([SYSTEM, *turns]) == text_id(expected)


def test_one_function_everywhere():
    from trl_rankreward.rewards import genrm_verdict
    from trl_rankreward.rubrics import generate, rationales
    from trl_rankreward.trainers import dataset_checks
    from trl_rankreward.trainers import group_scoring as grouping

    for module in (grouping, dataset_checks, generate, rationales, genrm_verdict):
        assert module.query_text is prompts.query_text, module.__name__


def test_rubric_generation_sees_the_query_the_judge_sees():
    prompt = [SYSTEM, {"role": "user", "content": "Name a colour."}]
    row = {"prompt": prompt, "references": [f"answer {i}" for i in range(7)], "reference_models": ["m"] * 7}
    values = rubric_values(row, RANKBUFFER_RUBRIC_TEMPLATE)
    assert values["QUERY"] == values["query"] == query_text(prompt) == "Name a colour."
