"""`trl-rankreward data ...` end to end on local upstream files."""

import datasets
import pytest

from tests.data.upstream import (
    code_pair_row,
    math_step_dpo_row,
    nectar_row,
    skywork_row,
    ultrafeedback_row,
    write_jsonl,
)
from trl_rankreward.cli import main


def test_data_nectar_with_rubric_join_then_attach_rationales_error(tmp_path, capsys):
    source = write_jsonl(tmp_path / "nectar.jsonl", [nectar_row(i) for i in range(8)])
    out = tmp_path / "nectar"
    assert main(["data", "nectar", "--dataset_name", str(source), "--num_queries", "5", "--output_dir", str(out)]) == 0
    dataset = datasets.load_from_disk(str(out))
    assert len(dataset) == 5 and dataset[0]["rubrics"] == []
    assert "read 5 rows, kept 5" in capsys.readouterr().out

    rubrics = write_jsonl(
        tmp_path / "r.jsonl", [{"query_id": q, "rubrics": [{"text": "t", "weight": 2}]} for q in dataset["query_id"]]
    )
    joined = tmp_path / "joined"
    argv = ["data", "attach-rubrics", "--dataset_name", str(out), "--results_file", str(rubrics)]
    assert main([*argv, "--output_dir", str(joined)]) == 0
    assert datasets.load_from_disk(str(joined))["rubrics"] == [[{"text": "t", "weight": 2.0}]] * 5


def test_data_ultrafeedback_all_rows(tmp_path):
    source = write_jsonl(tmp_path / "uf.jsonl", [ultrafeedback_row(i) for i in range(3)])
    out = tmp_path / "uf"
    assert (
        main(["data", "ultrafeedback", "--dataset_name", str(source), "--num_queries", "all", "--output_dir", str(out)])
        == 0
    )
    assert len(datasets.load_from_disk(str(out))) == 3


def test_data_without_destination_fails_before_reading(tmp_path, capsys):
    assert main(["data", "nectar", "--dataset_name", str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("trl-rankreward data nectar: error: give --output_dir")


def test_bad_count_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "nectar", "--num_queries", "many", "--output_dir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("trl-rankreward data nectar: error: argument --num_queries: expected a positive integer")
    assert len(err.strip().splitlines()) == 1


def test_data_rmr1_sources_from_local_files(tmp_path, capsys):
    sky = write_jsonl(tmp_path / "sky.jsonl", [skywork_row(0), skywork_row(1, source="magpie_ultra")])
    out = tmp_path / "sky"
    assert main(["data", "skywork", "--dataset_name", str(sky), "--output_dir", str(out)]) == 0
    assert len(datasets.load_from_disk(str(out))) == 1  # magpie_ultra dropped by default
    assert "skipped: source 'magpie_ultra' dropped: 1" in capsys.readouterr().out
    assert (
        main(["data", "skywork", "--dataset_name", str(sky), "--drop_sources", "", "--output_dir", str(out) + "2"]) == 0
    )
    assert len(datasets.load_from_disk(str(out) + "2")) == 2

    code = write_jsonl(tmp_path / "code.jsonl", [code_pair_row(i) for i in range(5)])
    out = tmp_path / "code"
    assert (
        main(
            ["data", "code-preference-pairs", "--dataset_name", str(code), "--num_pairs", "3", "--output_dir", str(out)]
        )
        == 0
    )
    assert datasets.load_from_disk(str(out))["source"] == ["code-preference-pairs"] * 3

    math = write_jsonl(tmp_path / "math.jsonl", [math_step_dpo_row(i) for i in range(4)])
    out = tmp_path / "math"
    assert main(["data", "math-step-dpo", "--dataset_name", str(math), "--output_dir", str(out)]) == 0
    assert len(datasets.load_from_disk(str(out))) == 4


def test_data_bad_upstream_row_is_a_one_line_error(tmp_path, capsys):
    rows = [math_step_dpo_row(1), {**math_step_dpo_row(2), "full_rejected": None}]
    source = write_jsonl(tmp_path / "math.jsonl", rows)
    assert main(["data", "math-step-dpo", "--dataset_name", str(source), "--output_dir", str(tmp_path / "out")]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]  # the lines before are progress bars
    assert last.startswith(
        "trl-rankreward data math-step-dpo: error: SchemaError: Row 1 of the xinlai/Math-Step-DPO-10K source"
    )
    assert "full_rejected is None; expected a string" in last
