"""Rubric generation against a real `transformers serve` with a random tiny model.

A random-weight model cannot write valid rubrics, so every query must end up reported as
failed after `max_attempts` tries, with the errors recorded, and nothing in the results.
"""

import pytest

from trl_rankreward.data.records import read_records
from trl_rankreward.judging import OpenAICompatibleBackend
from trl_rankreward.rubrics import generate_rubrics
from trl_rankreward.testing import build_tiny_model, serve_transformers


@pytest.mark.server
def test_random_model_answers_are_invalid_and_every_query_is_reported(nectar_dataset, tmp_path):
    dataset = nectar_dataset.select(range(2))
    with serve_transformers(build_tiny_model(tmp_path / "tiny")) as url:
        backend = OpenAICompatibleBackend(url, url.model, timeout_s=60)
        out = tmp_path / "rubrics.jsonl"
        summary = generate_rubrics(dataset, backend, out, max_attempts=2, max_tokens=8, max_concurrency=2)
    assert (summary.succeeded, summary.failed) == (0, 2)
    assert list(read_records(out)) == []
    failures = list(read_records(summary.failures_path))
    assert sorted(f["query_id"] for f in failures) == sorted(dataset["query_id"])
    for failure in failures:
        assert failure["attempts"] == 2 and len(failure["errors"]) == 2
        # 8 random tokens cannot hold a JSON object with 3-5 rubrics: each try is either cut at max_tokens
        # (`length`, never parsed) or finished without a valid answer (`invalid`); a transport error would say otherwise
        assert all(e.startswith(("invalid: ", "length: ")) for e in failure["errors"]), failure["errors"]
    assert summary.completion_tokens > 0  # the server's usage numbers were counted
