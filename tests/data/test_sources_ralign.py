"""R-Align-BMK / R-Align-RL-Data rows read as published: fields mapped, thinking removed, errors located."""

from __future__ import annotations

import json

import pytest

from tests.evaluation.ralign_bmk_fixtures import bmk_row, write_bmk_files
from trl_rankreward.cli import main
from trl_rankreward.data.prompts import query_id
from trl_rankreward.data.sources import RAlignRowError, load_source


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_published_row_becomes_a_pairwise_row(tmp_path):
    raw = {
        "id": "hs3-7",
        "conversations": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Name a prime."},
        ],
        "response_A": "4",
        "response_B": "7",
        "gt_label": " B ",
        "gt_judgment": "<think>check 4 = 2*2</think>\n\nB is right: 7 is prime, 4 is not.",
        "source": {"subset": "math"},
    }
    (row,) = load_source(str(_write(tmp_path / "helpsteer3_aug.jsonl", [raw]))).to_list()
    assert row == {
        "prompt": raw["conversations"],  # every turn kept: the earlier ones are the dialogue context
        "query_id": query_id(raw["conversations"]),
        "response_a": "4",
        "response_b": "7",
        "label": "B",  # spaces stripped, as the authors compare it
        "reviews": [],
        "golden_rationale": "B is right: 7 is prime, 4 is not.",  # after the last </think>, stripped
        "subset": "math",
        "source": "helpsteer3_aug",  # the file's name: the benchmark of the authors' table
        "pair_id": "hs3-7",
    }


def test_a_folder_of_files_gives_one_source_per_file_in_file_order(tmp_path):
    write_bmk_files(tmp_path / "data")
    rows = load_source(str(tmp_path / "data"))
    assert len(rows) == 96
    assert rows["source"][:48] == ["helpsteer3_aug"] * 48 and rows["source"][48:] == ["reward_bench2_aug"] * 48
    assert rows["pair_id"][:2] == ["helpsteer3_aug-0", "helpsteer3_aug-1"]


@pytest.mark.parametrize("missing", ["id", "conversations", "response_A", "response_B", "gt_label", "gt_judgment"])
def test_a_row_lacking_a_field_names_file_line_and_field(tmp_path, missing):
    rows = [bmk_row("ppe_aug", 0), bmk_row("ppe_aug", 1)]
    del rows[1][missing]
    path = _write(tmp_path / "ppe_aug.jsonl", rows)
    with pytest.raises(RAlignRowError) as caught:
        load_source(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}, line 2: the row lacks the field {missing!r}")
    assert "\n" not in message


def test_a_label_other_than_a_or_b_is_an_error(tmp_path):
    row = {**bmk_row("x", 0), "gt_label": "tie"}
    with pytest.raises(RAlignRowError, match=r"line 1: 'gt_label' must be \"A\" or \"B\", got 'tie'"):
        load_source(str(_write(tmp_path / "x.jsonl", [row])))


def test_eval_genrm_reports_the_missing_field_in_one_line(tmp_path, capsys):
    rows = [bmk_row("hs", 0)]
    del rows[0]["gt_judgment"]
    path = _write(tmp_path / "hs.jsonl", rows)
    status = main(["eval-genrm", "--dataset_name", str(path), "--genrm_base_urls", "http://127.0.0.1:9/v1",
                   "--genrm_model", "m", "--no_metarm", "--output_file", str(tmp_path / "o.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1
    assert f"{path}, line 1: the row lacks the field 'gt_judgment'" in err


def test_data_r_align_writes_the_pairwise_set(tmp_path):
    write_bmk_files(tmp_path / "data")
    out = tmp_path / "prepared"
    assert main(["data", "r-align", "--dataset_name", str(tmp_path / "data"), "--num_pairs", "10",
                 "--output_dir", str(out)]) == 0  # fmt: skip
    prepared = load_source(str(out))
    assert len(prepared) == 10 and set(prepared["source"]) <= {"helpsteer3_aug", "reward_bench2_aug"}


def test_the_hub_repositories_are_read_file_by_file(tmp_path, monkeypatch):
    from trl_rankreward.data import sources

    write_bmk_files(tmp_path / "snapshot" / "data")
    asked = []

    def download(repo_id):  # stands in for huggingface_hub.snapshot_download (no network in tests)
        asked.append(repo_id)
        return tmp_path / "snapshot"

    monkeypatch.setattr(sources, "download_ralign_repo", download)
    rows = load_source("lyn22333/R-Align-BMK")
    assert asked == ["lyn22333/R-Align-BMK"]
    assert sorted(set(rows["source"])) == ["helpsteer3_aug", "reward_bench2_aug"] and len(rows) == 96


def test_a_null_gt_judgment_is_an_empty_rationale_as_in_the_authors_scripts(tmp_path):
    (row,) = load_source(str(_write(tmp_path / "x.jsonl", [{**bmk_row("x", 1), "gt_judgment": None}]))).to_list()
    assert row["golden_rationale"] == ""
