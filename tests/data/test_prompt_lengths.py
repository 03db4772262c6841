"""Prompt lengths before the model loads (`data.prompts`, the examples' `check_prompt_lengths`):
chat prompts counted through the chat template, long ones dropped and counted, or named when they cannot fit."""

from types import SimpleNamespace

import pytest
from datasets import Dataset
from transformers import AutoTokenizer

from trl_rankreward.data.prompts import check_prompts_fit, drop_long_prompts, prompt_lengths


def chat(words: int) -> list[dict]:
    return [{"role": "user", "content": " ".join(["colour"] * words)}]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_a_chat_prompt_counts_its_tokens_not_the_fields_of_an_encoding(tokenizer):
    # transformers 5's apply_chat_template(tokenize=True) returns a BatchEncoding: len() of it is 2 for any prompt
    short, long = prompt_lengths([chat(5), chat(500)], tokenizer)
    empty = prompt_lengths([chat(0)], tokenizer)[0]  # the template's own tokens
    rendered = tokenizer.apply_chat_template(chat(500), tokenize=False, add_generation_prompt=True)
    assert long == len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    assert empty < short < long and long - empty >= 500  # at least one token per word


def test_prompts_over_the_limit_are_dropped_and_counted(tokenizer):
    data = Dataset.from_list([{"prompt": chat(n), "query_id": f"q{n}"} for n in (5, 500, 8, 900)])
    lengths = prompt_lengths(data["prompt"], tokenizer)
    kept, dropped = drop_long_prompts(data, lengths, max_prompt_length=100)
    assert kept["query_id"] == ["q5", "q8"]
    assert [i for i, _ in dropped.rows] == [3, 1] and dropped.total == 4  # longest first
    assert dropped.describe(data["query_id"]).startswith("row 3 (query_id 'q900'): ")
    with pytest.raises(ValueError, match="Every prompt"):
        drop_long_prompts(data, lengths, max_prompt_length=3)


def test_a_prompt_that_cannot_fit_the_context_is_named():
    with pytest.raises(ValueError, match=r"1 of 3 prompts .* context of 2,048 tokens \(row 1 \(query_id 'b'\): 2,000"):
        check_prompts_fit([10, 2000, 1000], context_length=2048, max_completion_length=1024, query_ids=["a", "b", "c"])
    check_prompts_fit([10, 1024], context_length=2048, max_completion_length=1024)  # exactly fits


def test_the_example_scripts_check_before_the_model_loads(tiny_model_dir, tokenizer, capsys):
    from trl_rankreward.scripts.train import check_prompt_lengths

    data = Dataset.from_list([{"prompt": chat(n), "query_id": f"q{n}"} for n in (5, 600)])
    short, long = prompt_lengths(data["prompt"], tokenizer)
    assert long > 2048  # over the tiny model's context
    training = SimpleNamespace(chat_template_kwargs=None, max_completion_length=64, process_index=0)
    kept = check_prompt_lengths(data, tiny_model_dir, SimpleNamespace(max_prompt_length=long), training)
    assert kept["query_id"] == ["q5", "q600"]  # both within the limit
    kept = check_prompt_lengths(data, tiny_model_dir, SimpleNamespace(max_prompt_length=long - 1), training)
    assert kept["query_id"] == ["q5"] and "Dropped 1 of 2 prompts" in capsys.readouterr().err
    # no limit: the 600-word prompt cannot fit the tiny model's context of 2,048 tokens
    with pytest.raises(ValueError, match=f"query_id 'q600'\\): {long:,} tokens"):
        check_prompt_lengths(data, tiny_model_dir, SimpleNamespace(max_prompt_length=None), training)
