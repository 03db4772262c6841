"""HelpSteer3, RewardBench2 and PPE-Preference into the one pairwise schema."""

import pytest

from tests.data.upstream import write_jsonl
from trl_rankreward.data import SchemaError, load_source, prepare_helpsteer3, prepare_ppe, prepare_rewardbench2

PAIR_COLUMNS = {
    "prompt", "query_id", "response_a", "response_b", "label", "reviews",
    "golden_rationale", "subset", "source", "pair_id",
}  # fmt: skip


def helpsteer3_row(preference: int, i: int = 0) -> dict:
    return {
        "domain": "code",
        "language": "english",
        "context": [
            {"role": "user", "content": f"write code {i}"},
            {"role": "assistant", "content": "which language?"},
            {"role": "user", "content": "python"},
        ],
        "response1": f"r1-{i}",
        "response2": f"r2-{i}",
        "overall_preference": preference,
        "individual_preference": [
            {"score": preference, "reasoning": "@Response 1 runs; @Response 2 has a syntax error.", "feedback1": "",
             "feedback2": ""},
            {"score": -1, "reasoning": "  ", "feedback1": "", "feedback2": ""},
        ],
    }  # fmt: skip


def test_helpsteer3_sign_of_overall_preference_gives_the_label(tmp_path):
    rows = [helpsteer3_row(-2, 0), helpsteer3_row(3, 1), helpsteer3_row(0, 2)]
    dataset, report = prepare_helpsteer3(load_source(str(write_jsonl(tmp_path / "hs3.jsonl", rows))))
    assert set(dataset.column_names) == PAIR_COLUMNS
    # -2: response1 better -> A; 3: response2 better -> B; 0: tie, skipped
    assert dataset["label"] == ["A", "B"]
    assert report.skipped == {"tie": 1}
    row = dataset[0]
    assert (row["response_a"], row["response_b"]) == ("r1-0", "r2-0")
    assert row["prompt"][-1] == {"role": "user", "content": "python"} and len(row["prompt"]) == 3
    # the blank second reasoning is dropped; the first keeps its score
    assert row["reviews"] == [{"score": -2, "text": "@Response 1 runs; @Response 2 has a syntax error."}]
    assert row["subset"] == "code" and row["source"] == "helpsteer3" and row["golden_rationale"] == ""


def test_rewardbench2_pairs_every_chosen_with_every_rejected_and_balances_sides(tmp_path):
    rows = [
        {"id": str(i), "prompt": f"p{i}", "chosen": [f"good{i}"], "rejected": [f"bad{i}-{k}" for k in range(3)],
         "subset": "Factuality", "num_correct": 1}
        for i in range(20)
    ]  # fmt: skip
    dataset, _ = prepare_rewardbench2(load_source(str(write_jsonl(tmp_path / "rb2.jsonl", rows))), seed=42)
    assert len(dataset) == 60  # 20 prompts x 1 chosen x 3 rejected
    for row in dataset:
        preferred = row["response_a"] if row["label"] == "A" else row["response_b"]
        assert preferred.startswith("good")
    # a fair seeded coin over 60 pairs: both sides occur (probability of all one side is 2 * 2**-60)
    assert set(dataset["label"]) == {"A", "B"}
    again, _ = prepare_rewardbench2(load_source(str(tmp_path / "rb2.jsonl")), seed=42)
    assert again["label"] == dataset["label"] and again["pair_id"] == dataset["pair_id"]


def test_ppe_winner_maps_to_label_and_ties_are_skipped(tmp_path):
    rows = [
        {"question_id": "a", "prompt": "q", "response_1": "x", "response_2": "y", "winner": "model_b", "language": "English"},
        {"question_id": "b", "prompt": "q2", "response_1": "x", "response_2": "y", "winner": "model_a", "language": "German"},
        {"question_id": "c", "prompt": "q3", "response_1": "x", "response_2": "y", "winner": "tie (bothbad)", "language": "English"},
    ]  # fmt: skip
    dataset, report = prepare_ppe(load_source(str(write_jsonl(tmp_path / "ppe.jsonl", rows))))
    assert dataset["label"] == ["B", "A"]
    assert dataset["subset"] == ["English", "German"]
    assert report.skipped == {"winner 'tie (bothbad)'": 1}


def test_num_pairs_samples_with_the_seed(tmp_path):
    rows = [{"prompt": f"q{i}", "response_1": "x", "response_2": "y", "winner": "model_a"} for i in range(10)]
    source = load_source(str(write_jsonl(tmp_path / "ppe.jsonl", rows)))
    first, _ = prepare_ppe(source, num_pairs=4, seed=1)
    again, _ = prepare_ppe(source, num_pairs=4, seed=1)
    assert len(first) == 4 and first["pair_id"] == again["pair_id"]
    with pytest.raises(ValueError, match="Asked for 11 pairs but only 10"):
        prepare_ppe(source, num_pairs=11)


def test_missing_preference_column_is_named(tmp_path):
    path = write_jsonl(tmp_path / "hs3.jsonl", [{"context": [], "response1": "a", "response2": "b"}])
    with pytest.raises(SchemaError, match=r"\['overall_preference'\].*HelpSteer3"):
        prepare_helpsteer3(load_source(str(path)))
