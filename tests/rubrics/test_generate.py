"""Rubric generation through the resumable runner, driven by a deterministic fake backend."""

import json

import pytest

from tests.rubrics.conftest import valid_rubrics
from trl_rankreward.data import attach_rubrics
from trl_rankreward.data.records import read_records
from trl_rankreward.judging.backends.base import BackendError
from trl_rankreward.rubrics import generate_rubrics
from trl_rankreward.testing import ScriptedBackend


def _query(messages) -> str:
    return messages[-1]["content"].split("Query:\n", 1)[1].split("\n", 1)[0]


def test_valid_answers_fill_every_query_with_the_papers_settings(nectar_dataset, tmp_path):
    backend = ScriptedBackend(lambda messages, attempt: valid_rubrics(), prompt_tokens=10)
    out = tmp_path / "rubrics.jsonl"
    summary = generate_rubrics(nectar_dataset, backend, out)
    assert (summary.total, summary.succeeded, summary.failed, summary.already_done) == (6, 6, 0, 0)
    assert {(c["temperature"], c["max_tokens"]) for c in backend.calls} == {(0.2, 1024)}  # RankBuffer App. D
    records = list(read_records(out))
    assert sorted(r["query_id"] for r in records) == sorted(nectar_dataset["query_id"])
    assert all(r["attempts"] == 1 for r in records)
    joined = attach_rubrics(nectar_dataset, out)
    assert joined[0]["rubrics"] == [{"text": "Criterion 0", "weight": 5.0}, {"text": "Criterion 1", "weight": 4.0},
                                    {"text": "Criterion 2", "weight": 3.0}]  # fmt: skip
    # tokens: 6 calls x 10 prompt tokens (the fake's count)
    assert summary.prompt_tokens == 60


def test_invalid_then_valid_is_retried_and_exhausted_queries_are_reported(nectar_dataset, tmp_path):
    hopeless = "question 2"

    def reply(messages, attempt):
        if _query(messages) == hopeless:
            return '{"rubrics": [{"text": "only one", "weight": 5}]}'  # always too few
        if attempt == 0:
            return "Sure! Rubrics: correctness (5)"  # no JSON
        if attempt == 1:
            return BackendError("connection reset", kind="transport")  # a backend error also uses an attempt
        return valid_rubrics()

    out = tmp_path / "rubrics.jsonl"
    summary = generate_rubrics(nectar_dataset, ScriptedBackend(reply), out, max_attempts=3)
    assert (summary.succeeded, summary.failed) == (5, 1)
    assert all(r["attempts"] == 3 for r in read_records(out))  # invalid, error, valid
    [failure] = list(read_records(summary.failures_path))
    assert failure["query_id"] == summary.failed_ids[0]
    assert failure["errors"] == ["invalid: Expected 3 to 5 rubrics, got 1"] * 3
    assert "only one" in failure["last_output"]
    assert "rerun to retry" in str(summary)

    # A rerun sends only the failed query; now it succeeds and the failures file empties.
    fixed = ScriptedBackend(lambda messages, attempt: valid_rubrics(4))
    again = generate_rubrics(nectar_dataset, fixed, out)
    assert len(fixed.calls) == 1 and _query(fixed.calls[0]["messages"]) == hopeless
    assert (again.already_done, again.succeeded, again.failed) == (5, 1, 0)
    ids = [r["query_id"] for r in read_records(out)]
    assert sorted(ids) == sorted(nectar_dataset["query_id"])  # each exactly once
    assert list(read_records(again.failures_path)) == []


def test_a_bug_in_the_backend_is_not_a_failed_job_but_an_error(nectar_dataset, tmp_path):
    # Only judge failures (BackendError, invalid answers) are retried and reported as failed ids;
    # a programming error stops the run instead of being written down as 6 failed queries.
    def reply(messages, attempt):
        return KeyError("bug in a custom backend")

    with pytest.raises(KeyError, match="bug in a custom backend"):
        generate_rubrics(nectar_dataset, ScriptedBackend(reply), tmp_path / "rubrics.jsonl")


def test_concurrency_is_bounded(nectar_dataset, tmp_path):
    backend = ScriptedBackend(lambda messages, attempt: valid_rubrics(), delay_s=0.02)
    generate_rubrics(nectar_dataset, backend, tmp_path / "r.jsonl", max_concurrency=2)
    # 6 jobs with a 20 ms await each: two run at once, never three
    assert backend.max_in_flight == 2


def test_partial_last_line_from_a_crash_is_repaired_and_redone(nectar_dataset, tmp_path):
    out = tmp_path / "rubrics.jsonl"
    first = nectar_dataset["query_id"][0]
    good = json.dumps({"query_id": first, "rubrics": [], "attempts": 1})
    out.write_text(good + "\n" + '{"query_id": "' + nectar_dataset["query_id"][1] + '", "rub')  # killed mid-write
    backend = ScriptedBackend(lambda messages, attempt: valid_rubrics())
    summary = generate_rubrics(nectar_dataset, backend, out)
    assert (summary.already_done, summary.succeeded) == (1, 5)
    lines = out.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line) for line in lines)
