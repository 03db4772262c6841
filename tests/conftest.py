"""Shared fixtures: a tiny random-weight chat model (built once per session) and a tiny dataset."""

import json

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from trl_rankreward.testing import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny_model")))


def write_tiny_dataset(path, n_queries: int = 4) -> str:
    """A JSON-lines dataset in our column layout: chat prompt, query_id, rubrics, 3 references (best first)."""
    with open(path, "w") as f:
        for i in range(n_queries):
            row = {
                "prompt": [{"role": "user", "content": f"Question {i}: name a colour."}],
                "query_id": f"q{i}",
                "rubrics": [{"text": "Names a colour", "weight": 2.0}, {"text": "Is short", "weight": 1.0}],
                "references": [f"Blue is a colour ({i}).", "Red.", "I do not know."],
            }
            f.write(json.dumps(row) + "\n")
    return str(path)


@pytest.fixture
def tiny_dataset(tmp_path):
    return write_tiny_dataset(tmp_path / "data.jsonl")
