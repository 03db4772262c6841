"""Rubric and rationale generation fitted to the server's context window, against a real loopback server:
long references are cut and answered, a short job is sent byte for byte as without a window, and a
query longer than the window fails as too_long unsent, naming the flag."""

import json

import datasets

from tests.rubrics.conftest import valid_rubrics
from trl_rankreward.data.prompts import query_text
from trl_rankreward.data.records import read_records
from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend
from trl_rankreward.rubrics import generate_rationales, generate_rubrics
from trl_rankreward.testing.chat_servers import Reply, serve_chat_script


def _rows(nectar_dataset):
    rows = nectar_dataset.select(range(3)).to_list()
    rows[0]["references"] = [f"reference {i}: " + "detail " * 1200 for i in range(len(rows[0]["references"]))]
    rows[2]["prompt"] = [{"role": "user", "content": "why " * 12000}]  # the query is never cut
    return rows


def test_long_references_are_cut_to_the_window_and_a_hopeless_query_fails_as_too_long(nectar_dataset, tmp_path):
    rows = _rows(nectar_dataset)
    with serve_chat_script(lambda messages: Reply(valid_rubrics())) as server:
        bodies = {}
        for window in (None, 6000):
            server.reset()
            backend = OpenAICompatibleBackend(server.url, "genrm", max_model_len=window)
            out = tmp_path / f"rubrics-{window}.jsonl"
            summary = generate_rubrics(datasets.Dataset.from_list(rows[:2] if window is None else rows), backend, out)
            bodies[window] = {json.dumps(r["messages"]): r for r in server.requests}
            if window:
                assert (summary.succeeded, summary.failed, summary.truncated) == (2, 1, 1)
                assert len(server.requests) == 2  # the hopeless query was never sent
                assert "1 prompts were cut to fit the server's context window." in str(summary)
        (failure,) = read_records(summary.failures_path)
    assert failure["query_id"] == rows[2]["query_id"] and failure["attempts"] == 0
    (error,) = failure["errors"]
    assert error.startswith("too_long: ") and "window of 6000 tokens" in error and "--max_model_len" in error
    cut = [body for key, body in bodies[6000].items() if "[... cut]" in key]
    assert len(cut) == 1 and cut[0]["messages"][-1]["content"].count("[... cut]") == 7  # every reference
    assert f"Query:\n{query_text(rows[0]['prompt'])}\n" in cut[0]["messages"][-1]["content"]  # the query, whole
    assert cut[0]["max_tokens"] >= 512  # at least MIN_GENERATION_TOKENS, and no more than the window leaves
    # the short query fits: sent exactly as without a window
    short = [body for key, body in bodies[6000].items() if "[... cut]" not in key]
    assert short == [body for key, body in bodies[None].items() if query_text(rows[1]["prompt"]) in key]


def test_rationale_responses_are_cut_and_the_conversation_kept(tmp_path):
    pair = {"prompt": "Explain tides.", "pair_id": "p0", "label": "A",
            "response_a": "moon " * 3000, "response_b": "sun " * 3000}  # fmt: skip
    answer = json.dumps({"rationale": "A names the moon's pull.", "preferred": "A"})
    with serve_chat_script(lambda messages: Reply(answer)) as server:
        backend = OpenAICompatibleBackend(server.url, "genrm", max_model_len=3000)
        summary = generate_rationales(datasets.Dataset.from_list([pair]), backend, tmp_path / "rationales.jsonl")
        (body,) = server.requests
    assert (summary.succeeded, summary.truncated) == (1, 1)
    user = body["messages"][-1]["content"]
    assert user.count("[... cut]") == 2 and "Explain tides." in user
