"""Nectar and UltraFeedback preparation on local upstream-schema files."""

import pytest

from tests.data.upstream import nectar_row, ultrafeedback_row, write_jsonl
from trl_rankreward.data import SchemaError, load_source, prepare_nectar, prepare_ultrafeedback
from trl_rankreward.judging.requests import text_id


@pytest.fixture
def nectar_file(tmp_path):
    rows = [nectar_row(i) for i in range(20)]
    rows.append(nectar_row(99, num_answers=6))  # ineligible: six answers
    rows.append(nectar_row(3))  # duplicate prompt of row 3
    rows.append(nectar_row(50, multi_turn=True))
    return write_jsonl(tmp_path / "nectar.jsonl", rows)


def test_nectar_columns_and_best_first_order(nectar_file):
    dataset, report = prepare_nectar(load_source(str(nectar_file)), num_queries=None, seed=42)
    # 23 rows: 1 has six answers, 1 repeats a prompt -> 21 kept
    assert len(dataset) == 21
    assert report.skipped == {"6 answers (need 7)": 1, "duplicate prompt": 1}
    assert set(dataset.column_names) == {"prompt", "query_id", "rubrics", "references", "reference_models", "source"}
    row = next(r for r in dataset if r["prompt"][-1]["content"] == "question 4")
    # upstream ranks were listed 3,1,7,5,2,6,4; best first is rank 1..7
    assert row["references"] == [f"q4 rank {r}" for r in range(1, 8)]
    assert row["reference_models"] == [f"model-{r}" for r in range(1, 8)]
    assert row["prompt"] == [{"role": "user", "content": "question 4"}]
    assert row["query_id"] == text_id("question 4")  # single turn: the hash of the user message
    assert row["rubrics"] == []


def test_nectar_multi_turn_prompt_is_conversational(nectar_file):
    dataset, _ = prepare_nectar(load_source(str(nectar_file)), num_queries=None, seed=0)
    row = next(r for r in dataset if r["prompt"][-1]["content"] == "question 50")
    assert row["prompt"] == [
        {"role": "user", "content": "hello 50"},
        {"role": "assistant", "content": "hi there"},
        {"role": "user", "content": "question 50"},
    ]
    assert row["query_id"] == text_id("User: hello 50\n\nAssistant: hi there\n\nUser: question 50")


def test_nectar_sampling_is_seeded_and_stable(nectar_file, tmp_path):
    source = load_source(str(nectar_file))
    first, _ = prepare_nectar(source, num_queries=5, seed=42)
    again, _ = prepare_nectar(load_source(str(nectar_file)), num_queries=5, seed=42)
    other, _ = prepare_nectar(source, num_queries=5, seed=7)
    assert first["query_id"] == again["query_id"]
    assert first["query_id"] != other["query_id"]  # 5 of 21 drawn: another seed picks another sample
    parquet = tmp_path / "nectar.parquet"
    source.to_parquet(str(parquet))
    from_parquet, _ = prepare_nectar(load_source(str(parquet)), num_queries=5, seed=42)
    assert from_parquet["query_id"] == first["query_id"]


def test_nectar_asking_for_too_many_queries_says_how_many_exist(nectar_file):
    with pytest.raises(ValueError, match="Asked for 100 queries but only 21"):
        prepare_nectar(load_source(str(nectar_file)), num_queries=100)


def test_nectar_missing_column_names_it_and_the_schema(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "\n\nHuman: x\n\nAssistant:", "responses": []}])
    with pytest.raises(SchemaError, match=r"lacks column\(s\) \['answers'\].*berkeley-nest/Nectar"):
        prepare_nectar(load_source(str(path)))


def test_nectar_answer_without_a_field_is_a_schema_error_naming_the_column(tmp_path):
    row = nectar_row(0)
    del row["answers"][2]["rank"]
    expected = r"berkeley-nest/Nectar: an entry of 'answers' lacks \['rank'\]; expected list of \{answer: str"
    with pytest.raises(SchemaError, match=expected):
        prepare_nectar(load_source(str(write_jsonl(tmp_path / "nectar.jsonl", [row]))), num_queries=None)


def test_ultrafeedback_sorted_by_score_with_stable_ties(tmp_path):
    path = write_jsonl(tmp_path / "uf.jsonl", [ultrafeedback_row(i) for i in range(6)])
    dataset, report = prepare_ultrafeedback(load_source(str(path)), num_queries=4, seed=42)
    assert len(dataset) == 4 and report.kept == 4
    row = dataset[0]
    i = row["prompt"][0]["content"].split()[-1]
    # scores (6, 9, 6, 3) by upstream index -> descending 9 (k=1), 6 (k=0), 6 (k=2, tie keeps order), 3 (k=3)
    assert row["reference_scores"] == [9.0, 6.0, 6.0, 3.0]
    assert row["references"] == [f"u{i} response {k} score {s}" for k, s in [(1, 9.0), (0, 6.0), (2, 6.0), (3, 3.0)]]
    assert row["reference_models"] == ["m1", "m0", "m2", "m3"]
    assert row["source"] == "ultrafeedback"


def test_ultrafeedback_skips_rows_without_four_scored_completions(tmp_path):
    rows = [ultrafeedback_row(0), ultrafeedback_row(1, scores=(5.0, 4.0, 3.0)), ultrafeedback_row(2)]
    rows[2]["completions"][0]["overall_score"] = "N/A"
    dataset, report = prepare_ultrafeedback(
        load_source(str(write_jsonl(tmp_path / "uf.jsonl", rows))), num_queries=None
    )
    assert len(dataset) == 1
    assert report.skipped == {"3 completions (need 4)": 1, "overall_score not a number": 1}


def test_ultrafeedback_missing_completion_field_is_a_schema_error(tmp_path):
    row = ultrafeedback_row(0)
    del row["completions"][1]["overall_score"]
    with pytest.raises(SchemaError, match="overall_score"):
        prepare_ultrafeedback(load_source(str(write_jsonl(tmp_path / "uf.jsonl", [row]))), num_queries=None)
