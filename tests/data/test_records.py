"""Joining rubric / rationale JSONL files into prepared datasets, and saving them."""

import datasets
import pytest

from tests.data.upstream import nectar_row, write_jsonl
from trl_rankreward.data import attach_rubrics, load_source, prepare_nectar, save_dataset


@pytest.fixture
def nectar(tmp_path):
    path = write_jsonl(tmp_path / "nectar.jsonl", [nectar_row(i) for i in range(3)])
    dataset, _ = prepare_nectar(load_source(str(path)), num_queries=None)
    return dataset


def test_attach_rubrics_by_query_id_and_missing_policies(nectar, tmp_path):
    ids = nectar["query_id"]
    rubrics = [{"text": "Is correct", "weight": 5.0}, {"text": "Is clear", "weight": 2.0}]
    path = write_jsonl(tmp_path / "rubrics.jsonl", [{"query_id": ids[0], "rubrics": rubrics}])
    with pytest.raises(ValueError, match="2 of 3 rows have no rubrics"):
        attach_rubrics(nectar, path)
    dropped = attach_rubrics(nectar, path, missing="drop")
    assert dropped["query_id"] == [ids[0]] and dropped[0]["rubrics"] == rubrics
    kept = attach_rubrics(nectar, path, missing="keep")
    assert [len(r) for r in kept["rubrics"]] == [2, 0, 0]


def test_save_to_disk_round_trips_and_load_source_reads_it(nectar, tmp_path):
    save_dataset(nectar, str(tmp_path / "out"))
    back = load_source(str(tmp_path / "out"))
    assert back["references"] == nectar["references"] and back.features == nectar.features
    assert isinstance(back, datasets.Dataset)
    with pytest.raises(ValueError, match="Nowhere to write"):
        save_dataset(nectar, None, None)
