"""A resume checks every file it restores before the first step (docs/reliability.md, Checkpoints).

- `judge_usage.json` and `trainer_state.json` that are cut short or hold something else are refused,
  naming the file, before anything of the checkpoint is restored;
- `latest` skips a checkpoint whose files are incomplete (a truncated `trainer_state.json`, a missing or
  truncated reward-method state, a truncated `judge_usage.json`);
- the temporary files of a killed save are removed when the checkpoint is saved again;
- end to end: a bad buffer row stops the resume before the first step, naming the file and the query.
"""

import json
import os
import sqlite3

import pytest
from transformers import TrainerCallback

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.rewards.state_files import METHOD_STATE_NAME, CheckpointStateError
from trl_rankreward.testing import CountingMethod
from trl_rankreward.trainers.base import check_checkpoint
from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer
from trl_rankreward.trainers.reward_state import (
    JUDGE_USAGE_NAME,
    JudgeCircuitBreaker,
    RewardRunState,
    checked_judge_usage,
)

TRAINER_STATE = "trainer_state.json"


def run_state() -> RewardRunState:
    return RewardRunState(CountingMethod(), JudgeCircuitBreaker(), fresh_setting="resume_with_fresh_reward_state")


def saved(tmp_path, name="checkpoint-1"):
    state = run_state()
    state.method.seen = {"q0": 2}
    state.neutral_total = 3
    checkpoint = tmp_path / name
    checkpoint.mkdir()
    state.save(str(checkpoint))
    (checkpoint / TRAINER_STATE).write_text(json.dumps({"global_step": 1, "log_history": []}))
    return checkpoint


@pytest.mark.parametrize(
    "content, problem",
    [
        ('{"calls": 12, "prompt', "truncated or corrupt"),
        ("[1, 2]", "a JSON object was expected"),
        ('{"calls": "12"}', "field 'calls' holds '12'"),
        ('{"tokens": 12}', "unknown field 'tokens'"),
        ('{"failures": {"timeout": -1}}', "field 'failures'"),
        ('{"breaker": {"recent": [[1]]}}', "field 'breaker'"),
    ],
    ids=["cut", "not_object", "wrong_type", "unknown_field", "negative", "breaker"],
)
def test_a_bad_judge_usage_file_is_refused_before_anything_is_restored(tmp_path, content, problem):
    checkpoint = saved(tmp_path)
    usage = checkpoint / JUDGE_USAGE_NAME
    usage.write_text(content)
    fresh = run_state()
    with pytest.raises(CheckpointStateError, match=f"{usage}.*{problem}"):
        fresh.load(str(checkpoint))
    assert fresh.method.seen == {} and fresh.neutral_total == 0  # the method's state was not loaded either


def test_a_saved_judge_usage_file_passes_its_check(tmp_path):
    checkpoint = saved(tmp_path)
    assert checked_judge_usage(str(checkpoint / JUDGE_USAGE_NAME))["neutral_groups"] == 3
    fresh = run_state()
    fresh.load(str(checkpoint))
    assert fresh.method.seen == {"q0": 2} and fresh.neutral_total == 3


def test_a_bad_trainer_state_is_refused_naming_the_file(tmp_path):
    checkpoint = saved(tmp_path)
    check_checkpoint(str(checkpoint), (TRAINER_STATE, METHOD_STATE_NAME), (JUDGE_USAGE_NAME,))
    path = checkpoint / TRAINER_STATE
    for content, problem in (('{"global_step": 1, "log_hi', "truncated or corrupt"),
                             ('{"global_step": 1, "stray": 2}', "not TRL's trainer state"), ("7", "not TRL's")):  # fmt: skip
        path.write_text(content)
        with pytest.raises(CheckpointStateError, match=f"{path}.*{problem}"):
            check_checkpoint(str(checkpoint), (TRAINER_STATE,))
    os.remove(path)
    with pytest.raises(CheckpointStateError, match=f"{path} is missing"):
        check_checkpoint(str(checkpoint), (TRAINER_STATE,))


@pytest.mark.parametrize(
    "damage",
    [
        lambda c: (c / TRAINER_STATE).write_text('{"global_step": 2, "log_hist'),
        lambda c: os.remove(c / METHOD_STATE_NAME),
        lambda c: (c / METHOD_STATE_NAME).write_bytes((c / METHOD_STATE_NAME).read_bytes()[:20]),
        lambda c: (c / JUDGE_USAGE_NAME).write_text('{"calls": 1'),
    ],
    ids=["trainer_state_cut", "method_state_missing", "method_state_cut", "judge_usage_cut"],
)
def test_latest_skips_a_checkpoint_with_an_incomplete_file(tmp_path, damage, monkeypatch):
    from trl_rankreward.trainers import base

    warnings = []
    monkeypatch.setattr(base.logger, "warning", warnings.append)
    saved(tmp_path, "checkpoint-1")
    damage(saved(tmp_path, "checkpoint-2"))
    assert RankBufferGRPOTrainer.latest_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-1")
    assert len(warnings) == 1 and str(tmp_path / "checkpoint-2") in warnings[0]


def test_a_checkpoint_saved_again_carries_no_write_debris(tmp_path):
    checkpoint = saved(tmp_path)
    (checkpoint / "judge_usage.json.739.tmp").write_text('{"calls"')  # a save of this checkpoint, killed
    run_state().save(str(checkpoint))  # the resumed run reaches the same step and saves it again
    assert sorted(os.listdir(checkpoint)) == sorted([JUDGE_USAGE_NAME, METHOD_STATE_NAME, TRAINER_STATE])


class CountSteps(TrainerCallback):
    def __init__(self):
        self.steps = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1


@pytest.mark.slow
def test_a_resume_refuses_a_bad_buffer_row_before_the_first_step(tiny_model_dir, tiny_dataset, tmp_path):
    def trainer(max_steps):
        args = tiny_config(RankBufferGRPOConfig, tmp_path, k0=2, max_steps=max_steps, save_strategy="steps",
                           save_steps=1)  # fmt: skip
        judge = SimulatedJudge(lambda query_id, text: float(len(set(text))))
        return tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args, judge=judge)

    trainer(2).train()
    checkpoint = tmp_path / "checkpoint-2"
    snapshot = checkpoint / "anchors" / "buffers.sqlite"
    with sqlite3.connect(snapshot) as db:
        query_id, state = db.execute("SELECT query_id, state FROM buffers ORDER BY query_id LIMIT 1").fetchone()
        db.execute("UPDATE buffers SET state = ? WHERE query_id = ?", (state[:-9], query_id))
    db.close()
    resumed, steps = trainer(3), CountSteps()
    resumed.add_callback(steps)
    with pytest.raises(CheckpointStateError, match=f"{snapshot}, the entry of query '{query_id}' is corrupt: not valid JSON"):
        resumed.train(resume_from_checkpoint=str(checkpoint))
    assert steps.steps == 0
    with sqlite3.connect(tmp_path / "anchors.sqlite") as live:  # the live store took nothing from the snapshot
        assert live.execute("SELECT COUNT(*) FROM buffers WHERE state = ?", (state[:-9],)).fetchone()[0] == 0
    live.close()

    # `latest` passes over checkpoint-2 (its trainer state cut short) and the debris of its killed save goes
    (checkpoint / "trainer_state.json").write_text('{"global_step": 2, "log_hist')
    (checkpoint / "judge_usage.json.739.tmp").write_text('{"calls"')
    resumed, steps = trainer(2), CountSteps()
    resumed.add_callback(steps)
    resumed.train(resume_from_checkpoint=True)
    assert steps.steps == 1 and resumed.state.global_step == 2  # from checkpoint-1, step 2 trained and saved again
    assert not [n for n in os.listdir(checkpoint) if n.endswith(".tmp")]
    assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == 2
