"""Skywork-80K, Code-Preference-Pairs and Math-Step-DPO (the RM-R1 mix) into the pairwise schema."""

import json

import datasets
import numpy as np
import pytest

from tests.data.upstream import code_pair_row, math_step_dpo_row, skywork_row, write_jsonl
from trl_rankreward.data import (
    SchemaError,
    load_source,
    prepare_code_preference_pairs,
    prepare_math_step_dpo,
    prepare_skywork,
)
from trl_rankreward.judging.requests import text_id

PAIR_COLUMNS = {
    "prompt", "query_id", "response_a", "response_b", "label", "reviews",
    "golden_rationale", "subset", "source", "pair_id",
}  # fmt: skip


def preferred(row: dict) -> str:
    return row["response_a"] if row["label"] == "A" else row["response_b"]


def other(row: dict) -> str:
    return row["response_b"] if row["label"] == "A" else row["response_a"]


def test_skywork_drops_magpie_ultra_and_maps_chosen_to_the_label(tmp_path):
    rows = [skywork_row(i) for i in range(20)]
    rows.append(skywork_row(20, source="magpie_ultra"))
    rows.append(skywork_row(21, multi_turn=True, source="helpsteer2"))
    dataset, report = prepare_skywork(load_source(str(write_jsonl(tmp_path / "sky.jsonl", rows))))
    # 22 rows, the magpie_ultra one dropped (RM-R1's cleaning) -> 21 pairs
    assert set(dataset.column_names) == PAIR_COLUMNS
    assert len(dataset) == 21 and report.read == 22
    assert report.skipped == {"source 'magpie_ultra' dropped": 1}
    for row in dataset:
        assert preferred(row).startswith("sky good") and other(row).startswith("sky bad")
        assert row["reviews"] == [] and row["golden_rationale"] == "" and row["source"] == "skywork"
    # a seeded coin per pair: over 21 pairs both sides occur (all one side has probability 2 * 2**-21)
    assert set(dataset["label"]) == {"A", "B"}
    single = dataset[0]
    assert single["prompt"] == [{"role": "user", "content": "sky question 0"}]
    assert single["query_id"] == text_id("sky question 0") and single["subset"] == "offsetbias"
    multi = next(r for r in dataset if r["subset"] == "helpsteer2")
    # the prompt is every turn before the last; the responses are the last assistant messages
    assert multi["prompt"] == [
        {"role": "user", "content": "hello 21"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "sky question 21"},
    ]
    assert preferred(multi) == "sky good 21"


def test_skywork_labels_are_seeded_and_drop_sources_can_be_emptied(tmp_path):
    path = write_jsonl(tmp_path / "sky.jsonl", [skywork_row(i, source="magpie_ultra") for i in range(6)])
    source = load_source(str(path))
    kept, _ = prepare_skywork(source, drop_sources=())
    again, _ = prepare_skywork(load_source(str(path)), drop_sources=())
    assert len(kept) == 6 and kept["label"] == again["label"] and kept["pair_id"] == again["pair_id"]
    assert set(kept["subset"]) == {"magpie_ultra"}
    with pytest.raises(ValueError, match="Asked for 1 pairs but only 0 are usable"):
        prepare_skywork(source, num_pairs=1)  # all six are magpie_ultra, dropped by default


def test_skywork_skips_pairs_that_are_not_comparable(tmp_path):
    differing = skywork_row(0)
    differing["rejected"][0]["content"] = "another question"
    same = skywork_row(1)
    same["rejected"][-1]["content"] = same["chosen"][-1]["content"]
    empty = skywork_row(2)
    empty["chosen"][-1]["content"] = "  "
    rows = [differing, same, empty, skywork_row(3), skywork_row(3)]
    dataset, report = prepare_skywork(load_source(str(write_jsonl(tmp_path / "sky.jsonl", rows))))
    assert len(dataset) == 1
    assert report.skipped == {
        "chosen and rejected differ before the last turn": 1,
        "identical responses": 1,
        "empty prompt or response": 1,
        "duplicate pair": 1,
    }


def test_skywork_bad_row_names_the_row_and_what_was_expected(tmp_path):
    bad = skywork_row(1)
    bad["chosen"] = None
    rows = [skywork_row(0), bad]
    with pytest.raises(SchemaError, match=r"Row 1 of the Skywork.*: chosen is None; expected a list of at least two"):
        prepare_skywork(load_source(str(write_jsonl(tmp_path / "sky.jsonl", rows))))
    ends_with_user = skywork_row(0)
    ends_with_user["rejected"][-1]["role"] = "user"
    path = write_jsonl(tmp_path / "sky2.jsonl", [ends_with_user])
    with pytest.raises(SchemaError, match=r"Row 0 .*last message of rejected has role 'user'.*Fix or remove"):
        prepare_skywork(load_source(str(path)))


def test_skywork_missing_column_is_named(tmp_path):
    path = write_jsonl(tmp_path / "sky.jsonl", [{"chosen": [], "source": "x"}])
    with pytest.raises(SchemaError, match=r"\['rejected'\].*Skywork-Reward-Preference-80K-v0.2"):
        prepare_skywork(load_source(str(path)))


def test_code_pairs_take_the_first_rows_of_datasets_shuffle(tmp_path):
    rows = [code_pair_row(i) for i in range(30)]
    parquet = tmp_path / "code.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    source = load_source(str(parquet))
    dataset, report = prepare_code_preference_pairs(source, num_pairs=8, seed=42)
    # RM-R1: load_dataset(...).shuffle(seed=42).select(range(8000)); here 8 of 30, same order
    expected = source.shuffle(seed=42, keep_in_memory=True)["input"][:8]
    assert [r["prompt"][0]["content"] for r in dataset] == expected
    assert report.read == 8 and report.kept == 8
    row = dataset[0]
    i = row["prompt"][0]["content"].split()[-1]
    assert row["prompt"] == [{"role": "user", "content": f"write function {i}"}]
    assert (preferred(row), other(row)) == (f"def good_{i}(): ...", f"def bad_{i}(: ...")
    assert row["source"] == "code-preference-pairs" and row["subset"] == ""


def test_code_pairs_skipped_row_is_replaced_by_the_next_in_shuffled_order(tmp_path):
    rows = [code_pair_row(i) for i in range(10)]
    order = [int(i) for i in np.random.default_rng(0).permutation(10)]  # Dataset.shuffle(seed=0)'s order
    rows[order[1]]["rejected"] = rows[order[1]]["accepted"]  # the second row walked is unusable
    path = write_jsonl(tmp_path / "code.jsonl", rows)
    dataset, report = prepare_code_preference_pairs(load_source(str(path)), num_pairs=3, seed=0)
    # walked: order[0] kept, order[1] skipped, order[2] and order[3] kept
    assert [r["prompt"][0]["content"] for r in dataset] == [f"write function {i}" for i in (order[0], *order[2:4])]
    assert report.read == 4 and report.skipped == {"identical responses": 1}


def test_code_pairs_bad_row_and_default_count(tmp_path):
    rows = [code_pair_row(0), {**code_pair_row(1), "accepted": None}]
    source = load_source(str(write_jsonl(tmp_path / "code.jsonl", rows)))
    with pytest.raises(SchemaError, match=r"Row 1 of the Vezora/Code-Preference-Pairs source: accepted is None"):
        prepare_code_preference_pairs(source, num_pairs=None)
    with pytest.raises(ValueError, match="Asked for 8000 pairs"):  # RM-R1's 8K by default
        prepare_code_preference_pairs(load_source(str(write_jsonl(tmp_path / "one.jsonl", rows[:1]))))


def test_math_step_dpo_joins_shared_steps_and_full_continuations(tmp_path):
    path = tmp_path / "math.json"  # a JSON array file, the third local format
    path.write_text(json.dumps([math_step_dpo_row(i) for i in range(1, 5)]), encoding="utf-8")
    dataset, report = prepare_math_step_dpo(load_source(str(path)))
    assert len(dataset) == 4 and report.skipped == {}
    row = next(r for r in dataset if r["prompt"][0]["content"] == "What is 3 + 3?")
    steps = "Let's think step by step.\nStep 1: Add the numbers.\n"
    # RM-R1: answer = initial_reason_steps + full_chosen (resp. full_rejected), joined as they are
    assert preferred(row) == steps + "Step 2: 3 + 3 = 6.\nThe answer is: 6"
    assert other(row) == steps + "Step 2: 3 + 3 = 7.\nThe answer is: 7"
    assert row["subset"] == "MATH" and row["source"] == "math-step-dpo" and row["golden_rationale"] == ""


def test_math_step_dpo_missing_column_and_bad_row(tmp_path):
    no_full = {k: v for k, v in math_step_dpo_row(1).items() if k != "full_rejected"}
    with pytest.raises(SchemaError, match=r"\['full_rejected'\].*xinlai/Math-Step-DPO-10K"):
        prepare_math_step_dpo(load_source(str(write_jsonl(tmp_path / "a.jsonl", [no_full]))))
    rows = [math_step_dpo_row(1), math_step_dpo_row(2), {**math_step_dpo_row(3), "full_chosen": None}]
    with pytest.raises(SchemaError, match=r"Row 2 .*: full_chosen is None; expected a string"):
        prepare_math_step_dpo(load_source(str(write_jsonl(tmp_path / "b.jsonl", rows))))
