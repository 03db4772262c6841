import json

import pytest

from tests.data.upstream import nectar_row, write_jsonl
from trl_rankreward.data import load_source, prepare_nectar


@pytest.fixture
def nectar_dataset(tmp_path):
    """Six prepared Nectar queries (seven ranked references each)."""
    path = write_jsonl(tmp_path / "nectar.jsonl", [nectar_row(i) for i in range(6)])
    dataset, _ = prepare_nectar(load_source(str(path)), num_queries=None)
    return dataset


def valid_rubrics(n: int = 3, top: int = 5) -> str:
    """A generator answer that passes `parse_rubrics`: `n` rubrics weighted top, top - 1, ..."""
    return json.dumps({"rubrics": [{"text": f"Criterion {k}", "weight": top - k} for k in range(n)]})
