"""The dataset check: every bad case fails up front with one message naming the rows and the fix."""

import re

import pytest
from datasets import Dataset, load_dataset

from tests.conftest import write_tiny_dataset
from trl_rankreward.rewards.options import DataNeeds
from trl_rankreward.rewards.registry import REWARD_METHODS, reward_method_class
from trl_rankreward.trainers.dataset_checks import DatasetError, check_group_size, check_training_dataset

#: rows must carry rubrics and references
BOTH = DataNeeds(rubrics=True, references=1)
RUBRICS = [{"text": "Names a colour", "weight": 2.0}, {"text": "Is short", "weight": 1.0}]


def good_row(i: int, **changes) -> dict:
    row = {
        "prompt": [{"role": "system", "content": "Think first."}, {"role": "user", "content": f"Question {i}?"}],
        "query_id": f"q{i}",
        "rubrics": RUBRICS,
        "references": [f"Best answer {i}.", "Worse answer."],
    }
    return {**row, **changes}


def rows_with(bad: dict[int, dict], n: int = 6) -> list[dict]:
    return [good_row(i, **bad.get(i, {})) for i in range(n)]


def error_of(dataset, needs=None, **kwargs) -> str:
    with pytest.raises(DatasetError) as info:
        check_training_dataset(dataset, needs, **kwargs)
    return str(info.value)


def needs_of(name: str, **options) -> DataNeeds:
    """What registered method `name` with these options asks of the data (its options' `data_needs()`)."""
    return reward_method_class(name).options_class(**options).data_needs()


def test_a_good_dataset_passes():
    rows = rows_with({})
    check_training_dataset(Dataset.from_list(rows), BOTH)
    check_training_dataset(rows, BOTH)
    plain = [{"prompt": "What is 2 + 2?"}, {"prompt": "Name a colour.", "rubrics": ["Is a colour"]}]
    check_training_dataset(plain)  # no query_id, rubrics as plain strings, no references: all optional


def test_the_projects_jsonl_layout_passes_every_methods_requirements(tmp_path):
    dataset = load_dataset("json", data_files=write_tiny_dataset(tmp_path / "data.jsonl"), split="train")
    for name in REWARD_METHODS:
        check_training_dataset(dataset, needs_of(name))


def test_missing_prompt_column_names_the_columns_and_the_rename():
    message = error_of(Dataset.from_list([{"question": "Hi?", "query_id": "q0"}]))
    assert "no 'prompt' column (its columns: 'question', 'query_id')" in message
    assert "dataset.rename_column('question', 'prompt')" in message


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("", "prompt is an empty string ''"),
        ("   ", "prompt is an empty string '   '"),
        ([], "prompt is an empty list of messages"),
        ([{"role": "user", "content": ""}], "prompt message 0 (user) has empty content"),
        ([{"role": "system", "content": "Be brief."}], "prompt has only system messages"),
        ([{"content": "Hi?"}], "prompt message 0 has role None"),
        (["Hi?"], "prompt message 0 is a str 'Hi?'"),
        ([{"role": "user", "content": [{"type": "text", "text": " "}]}], "has empty content (no text in its blocks)"),
        ([{"role": "user", "content": [{"type": "text", "text": None}]}], "content block 0 with text None"),
        (42, "prompt is an int 42; expected a string or a list of chat messages"),
    ],
)
def test_bad_prompts(prompt, expected):
    message = error_of([good_row(0), good_row(1, prompt=prompt)])
    assert "row 1 (query_id 'q1'): prompt " in message and expected in message
    assert "1 of 2 rows have problems" in message
    assert "prompt: give every row a non-empty prompt" in message


def test_chat_prompts_from_a_dataset_with_text_blocks_pass_and_empty_content_fails():
    blocks = [{"role": "user", "content": [{"type": "text", "text": f"Question {i}?"}]} for i in range(3)]
    rows = [good_row(i, prompt=[m]) for i, m in enumerate(blocks)]
    check_training_dataset(Dataset.from_list(rows))
    rows[2]["prompt"] = [{"role": "user", "content": [{"type": "text", "text": ""}]}]
    assert "row 2 (query_id 'q2'): prompt message 0 (user) has empty content" in error_of(Dataset.from_list(rows))


def test_rubrics_as_a_string_is_an_error_not_one_rubric_per_character():
    rows = [good_row(i, rubrics="be good") for i in range(3)]
    message = error_of(Dataset.from_list(rows))
    assert (
        "row 0 (query_id 'q0'): rubrics is a string 'be good'; expected a list of "
        '{"text": ..., "weight": ...}' in message
    )
    assert 'rubrics: make each row\'s rubrics a list of {"text": non-empty string' in message


@pytest.mark.parametrize(
    ("rubrics", "expected"),
    [
        ({"text": "be good", "weight": 1.0}, "rubrics is a dict"),
        ([{"text": "be good", "score": 1.0}], "rubric 0 has unknown keys ['score']; expected only 'text' and 'weight'"),
        ([{"text": "", "weight": 1.0}], "rubric 0 has text ''; expected a non-empty string"),
        ([{"weight": 1.0}], "rubric 0 has text None"),
        (["ok", ""], "rubric 1 is an empty string"),
        ([3], "rubric 0 is an int 3"),
        ([{"text": "x", "weight": 0}], "rubric 0 has weight 0; expected a finite number > 0"),
        ([{"text": "x", "weight": -1.5}], "rubric 0 has weight -1.5"),
        ([{"text": "x", "weight": float("nan")}], "rubric 0 has weight nan"),
        ([{"text": "x", "weight": float("inf")}], "rubric 0 has weight inf"),
        ([{"text": "x", "weight": "2"}], "rubric 0 has weight '2'"),
        ([{"text": "x", "weight": True}], "rubric 0 has weight True"),
        ([{"text": "x", "weight": None}], "rubric 0 has weight None"),
        (7, "rubrics is an int 7"),
    ],
)
def test_bad_rubrics(rubrics, expected):
    assert f"row 0 (query_id 'q0'): {expected}" in error_of([good_row(0, rubrics=rubrics)])


def test_a_rubric_without_weight_in_a_dataset_column_is_reported():
    # datasets fills a key missing from one row's struct with None, which Rubric.coerce cannot read
    rows = [good_row(0), good_row(1, rubrics=[{"text": "Is short"}])]
    assert "row 1 (query_id 'q1'): rubric 0 has weight None" in error_of(Dataset.from_list(rows))
    check_training_dataset([good_row(1, rubrics=[{"text": "Is short"}])])  # a plain dict without weight: 1.0


@pytest.mark.parametrize(
    ("references", "expected"),
    [
        ("Blue.", "references is a string 'Blue.'; expected a list of response strings"),
        (["Blue.", ""], "reference 1 is a str ''; expected a non-empty response string"),
        (["Blue.", None], "reference 1 is None"),
    ],
)
def test_bad_references(references, expected):
    assert f"row 0 (query_id 'q0'): {expected}" in error_of([good_row(0, references=references)])


def test_required_references_and_rubrics():
    rows = rows_with({1: {"references": []}, 2: {"references": None}, 3: {"rubrics": []}})
    message = error_of(Dataset.from_list(rows), BOTH)
    assert "3 of 6 rows have problems" in message
    assert "row 1 (query_id 'q1'): has no references" in message
    assert "row 2 (query_id 'q2'): has no references" in message
    assert "row 3 (query_id 'q3'): has no rubrics" in message
    assert (
        "use a method without them (e.g. rank_buffer with buffer_init='auto', its default, or 'bootstrap')" in message
    )
    check_training_dataset(Dataset.from_list(rows))  # optional without the flags


def test_required_columns_missing_are_reported_once():
    dataset = Dataset.from_list([{"prompt": f"Question {i}?"} for i in range(50)])
    message = error_of(dataset, BOTH)
    assert "no 'references' column (its columns: 'prompt')" in message
    assert "no 'rubrics' column (its columns: 'prompt')" in message
    assert not re.search(r"^  row ", message, flags=re.M)


def test_one_query_id_for_two_different_prompts_is_an_error():
    rows = [good_row(i, query_id="q0") for i in range(4)]
    message = error_of(Dataset.from_list(rows))
    assert "3 of 4 rows have problems" in message
    assert (
        "row 1 (query_id 'q0'): query_id 'q0' is also used by row 0 with a different query "
        "(row 0: 'Question 0?', row 1: 'Question 1?'); both would share one buffer" in message
    )
    assert "give each distinct query its own query_id" in message


def test_integer_and_string_ids_that_read_the_same_collide():
    rows = [{"prompt": "First?", "query_id": 3}, {"prompt": "Second?", "query_id": "3"}]
    assert "row 1 (query_id '3'): query_id '3' is also used by row 0" in error_of(rows)


def test_the_same_query_twice_with_the_same_text_is_fine():
    rows = [good_row(0), good_row(1), good_row(0), good_row(0, rubrics=[])]
    check_training_dataset(Dataset.from_list(rows))
    # the system message is not part of the query text the id stands for
    check_training_dataset([good_row(0), good_row(0, prompt=[{"role": "user", "content": "Question 0?"}])])


@pytest.mark.parametrize(("query_id", "expected"), [("", "query_id is an empty string ''"), (2.5, "a float 2.5")])
def test_bad_query_ids(query_id, expected):
    assert expected in error_of([good_row(0, query_id=query_id)])


def test_message_counts_all_bad_rows_lists_max_examples_and_one_fix_per_kind():
    bad = {i: {"rubrics": [{"text": "", "weight": 1.0}]} for i in range(2, 20, 2)}
    bad[7] = {"prompt": [{"role": "user", "content": ""}]}
    message = error_of(Dataset.from_list(rows_with(bad, n=20)), max_examples=3)
    assert "10 of 20 rows have problems (the first 3 listed):" in message
    assert re.findall(r"^  row (\d+)", message, flags=re.M) == ["2", "4", "6"]
    assert "  ... and 7 more" in message
    fixes = message.split("How to fix:\n")[1].splitlines()
    assert [line.split(":")[0] for line in fixes] == ["  - rubrics", "  - prompt"]


def test_one_row_with_several_problems_is_one_row_with_each_listed():
    message = error_of([good_row(0, prompt="", rubrics="x", references="y")])
    assert "1 of 1 rows have problems" in message
    line = next(line for line in message.splitlines() if line.startswith("  row 0"))
    assert "prompt is an empty string" in line and "rubrics is a string" in line and "references is a string" in line


def test_empty_dataset_and_wrong_inputs():
    assert "The dataset has no rows." in error_of([])
    assert "The dataset has no rows." in error_of(Dataset.from_list([good_row(0)]).select([]))
    with pytest.raises(TypeError, match="row 1 is a str"):
        check_training_dataset([good_row(0), "prompt"])
    with pytest.raises(TypeError, match="Expected a datasets.Dataset"):
        check_training_dataset(42)
    with pytest.raises(ValueError, match="max_examples must be a positive integer"):
        check_training_dataset([good_row(0)], max_examples=0)


def test_shuffled_and_formatted_datasets_are_read_as_plain_rows():
    bad = {4: {"rubrics": [{"text": "x", "weight": -1.0}]}}
    dataset = Dataset.from_list(rows_with(bad, n=10)).shuffle(seed=0).with_format("numpy")
    position = list(dataset["query_id"]).index("q4")
    assert position != 4
    assert f"row {position} (query_id 'q4'): rubric 0 has weight -1.0" in error_of(dataset)


def test_streamed_dataset_gets_the_column_checks_only():
    rows = [{"question": "Hi?"}]
    streamed = Dataset.from_list(rows).to_iterable_dataset()
    assert "no 'prompt' column" in error_of(streamed)
    check_training_dataset(Dataset.from_list([good_row(0, rubrics="bad")]).to_iterable_dataset())


def test_too_few_references():
    # a method that needs two references per row: the row with one is named, the others pass
    rows = rows_with({2: {"references": ["Only one."]}})
    message = error_of(rows, DataNeeds(references=2))
    assert "1 of 6 rows have problems" in message
    assert "row 2 (query_id 'q2'): has 1 references; the method needs 2" in message


def test_methods_declare_what_they_need():
    # each method's options say it (rewards/*.py `data_needs`); RankBuffer's depends on buffer_init
    assert needs_of("rank_buffer", buffer_init="references") == DataNeeds(references=1)
    assert needs_of("rank_buffer") == needs_of("rank_buffer", buffer_init="bootstrap", k0=2) == DataNeeds()  # auto
    # bootstrap fills the first buffer with k0 of the query's first group: G >= k0 (here 4, the default)
    bootstrap = needs_of("rank_buffer", buffer_init="bootstrap")
    assert (bootstrap.references, bootstrap.min_group_size) == (0, 4) and "k0=4" in bootstrap.group_size_why
    assert needs_of("pointwise") == DataNeeds(min_group_size=1)
    assert needs_of("gdpo") == needs_of("matrix", protocol="implicit") == DataNeeds(rubrics=True)
    assert needs_of("rrc_agr") == needs_of("genrm") == DataNeeds(references=1, min_group_size=1)
    assert needs_of("tournament") == needs_of("listwise_group") == DataNeeds()


def test_group_size():
    check_group_size("pointwise", needs_of("pointwise"), 1)
    check_group_size("rank_buffer", needs_of("rank_buffer"), 2)
    # the fix names the registered methods whose default options rank a group of one
    with pytest.raises(
        DatasetError, match=r"num_generations=1\. Fix: set num_generations >= 2 .*\(genrm, pointwise, rrc_agr\)"
    ):
        check_group_size("tournament", needs_of("tournament"), 1)
    with pytest.raises(DatasetError, match="num_generations must be a positive integer"):
        check_group_size("pointwise", needs_of("pointwise"), 0)


def test_own_data_page_rows_and_table_match_the_checks():
    # docs/own-data.md: its minimal file (prompt and query_id only) trains with RankBuffer's default and the
    # pointwise baseline, and is refused where rubrics or references are required; its full row passes all.
    import json

    from tests.trainers.test_examples import ROOT

    page = (ROOT / "docs" / "own-data.md").read_text(encoding="utf-8")
    minimal, full = (
        [json.loads(line) for line in block.splitlines()] for block in re.findall(r"```json\n(.*?)```", page, re.S)
    )
    for name in ("rank_buffer", "pointwise"):
        check_training_dataset(Dataset.from_list(minimal), needs_of(name))
    assert "has no 'rubrics' column" in error_of(Dataset.from_list(minimal), needs_of("matrix"))
    assert "has no 'references' column" in error_of(
        Dataset.from_list(minimal), needs_of("rank_buffer", buffer_init="references")
    )
    for name in REWARD_METHODS:
        check_training_dataset(Dataset.from_list(full), needs_of(name))
    # the page's table: "required" where a method's default options need the column, for every method
    table = page.split("## What each method needs", 1)[1].strip().split("\n\n", 1)[0].splitlines()[2:]
    seen = set()
    for line in table:
        names, _, rubrics, references = (c.strip() for c in line.strip("|").split("|"))
        for name in re.findall(r"`(\w+)`", re.sub(r"\(.*?\)", "", names)):  # not the trainers in brackets
            needs = needs_of(name)
            assert rubrics.startswith("required") == needs.rubrics, name
            assert references.startswith("required") == (needs.references > 0), name
            seen.add(name)
    assert seen == set(REWARD_METHODS)


def test_rows_that_passed_are_read_once_and_a_selection_of_them_too(monkeypatch):
    """The scripts check rows before the prompt lengths and the trainer checks again: the second check reads
    nothing (nor for the script's `select` of the rows, `checked_like`); other needs or new rows are read."""
    from trl_rankreward.trainers import dataset_checks

    data = Dataset.from_list(rows_with({}))
    check_training_dataset(data, BOTH)
    read = []
    real_rows = dataset_checks._rows
    monkeypatch.setattr(dataset_checks, "_rows", lambda d: read.append(len(d)) or real_rows(d))
    check_training_dataset(data, BOTH)
    kept = data.select([0, 2])
    dataset_checks.checked_like(kept, data)
    check_training_dataset(kept, BOTH)
    assert read == []
    check_training_dataset(data)  # other needs: read again
    check_training_dataset(data.select([1]), BOTH)  # a selection nobody vouched for
    assert read == [6, 1]
    bad = Dataset.from_list(rows_with({1: {"query_id": " "}}))
    for _ in range(2):  # a dataset that failed fails again
        with pytest.raises(DatasetError, match="row 1"):
            check_training_dataset(bad)
