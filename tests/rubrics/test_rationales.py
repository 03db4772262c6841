"""Golden rationales: meta-review for reviewed pairs, label-conditioned otherwise; label check."""

import json

import pytest

from tests.data.upstream import write_jsonl
from trl_rankreward.data import attach_rationales, load_source, prepare_helpsteer3, prepare_ppe
from trl_rankreward.data.records import read_records
from trl_rankreward.rubrics import InvalidOutput, generate_rationales, parse_rationale
from trl_rankreward.testing import ScriptedBackend


def _answer(preferred: str) -> str:
    return json.dumps({"rationale": f"Response {preferred} fixes the bug.", "preferred": preferred})


def _label_of(messages) -> str:
    return messages[-1]["content"].split("preferred response is Response ", 1)[-1][0] if "preferred response" in (
        messages[-1]["content"]) else messages[-1]["content"].split("final preference is Response ", 1)[1][0]  # fmt: skip


@pytest.fixture
def pairs(tmp_path):
    hs3 = [
        {"context": [{"role": "user", "content": "fix it"}], "response1": "r1", "response2": "r2",
         "overall_preference": 2, "individual_preference": [{"score": 2, "reasoning": "@Response 2 compiles."}]}
    ]  # fmt: skip
    ppe = [{"prompt": "q", "response_1": "x", "response_2": "y", "winner": "model_a"}]
    reviewed, _ = prepare_helpsteer3(load_source(str(write_jsonl(tmp_path / "hs3.jsonl", hs3))))
    plain, _ = prepare_ppe(load_source(str(write_jsonl(tmp_path / "ppe.jsonl", ppe))))
    import datasets

    return datasets.concatenate_datasets([reviewed, plain])


def test_prompt_kind_follows_reviews_and_results_join(pairs, tmp_path):
    backend = ScriptedBackend(lambda messages, attempt: _answer(_label_of(messages)))
    out = tmp_path / "rationales.jsonl"
    summary = generate_rationales(pairs, backend, out)
    assert (summary.succeeded, summary.failed) == (2, 0)
    systems = {
        c["messages"][-1]["content"].count("<annotator_reviews>"): c["messages"][0]["content"] for c in backend.calls
    }
    assert systems[1].startswith("You are a meta-reviewer")  # HelpSteer3 row has reviews
    assert systems[0].startswith("You are an expert evaluator writing the reference judgment")
    reviewed_call = next(c for c in backend.calls if "<annotator_reviews>" in c["messages"][-1]["content"])
    assert "Review 1 (score 2):\n@Response 2 compiles." in reviewed_call["messages"][-1]["content"]
    joined = attach_rationales(pairs, out)
    assert joined["golden_rationale"] == ["Response B fixes the bug.", "Response A fixes the bug."]


def test_rationale_for_the_wrong_side_is_retried_then_reported(pairs, tmp_path):
    # always argues for the side opposite to the label -> invalid on every attempt
    backend = ScriptedBackend(lambda messages, attempt: _answer("A" if _label_of(messages) == "B" else "B"))
    summary = generate_rationales(pairs, backend, tmp_path / "r.jsonl", max_attempts=2)
    assert summary.failed == 2 and len(backend.calls) == 4
    errors = [f["errors"] for f in read_records(summary.failures_path)]
    assert all(e[0].startswith("invalid: The rationale prefers") for e in errors)


@pytest.mark.parametrize(
    "text, message",
    [('{"rationale": "", "preferred": "A"}', "non-empty"), ('{"rationale": "x", "preferred": "C"}', '"A" or "B"')],
)
def test_parse_rationale_rejects(text, message):
    with pytest.raises(InvalidOutput, match=message):
        parse_rationale(text, "A")
