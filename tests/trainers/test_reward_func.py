"""`as_reward_func`: a group reward method as the reward function of a plain `trl.GRPOTrainer`.

Whole groups judged once across processes, state in checkpoints and restored on resume, failures as
None and the circuit breaker, and a call from inside a running event loop (a notebook's cell).
"""

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from tests.trainers.helpers import load_rows, tiny_config
from tests.trainers.test_multiprocess import launch_two_processes
from tests.trainers.test_rank_buffer import distinct_chars
from trl_rankreward import as_reward_func
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.judging.calls import JudgeLedger
from trl_rankreward.judging.requests import JudgeError
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.rewards.state_files import METHOD_STATE_NAME, CheckpointStateError
from trl_rankreward.testing import CountingMethod
from trl_rankreward.trainers.reward_state import JUDGE_USAGE_NAME, JudgeFailureError

ROOT = Path(__file__).resolve().parents[2]


def plain_trainer(model_dir, dataset_path, fn, output_dir, *callbacks, eval_dataset=None, **overrides):
    """A plain TRL GRPOTrainer (2 groups of G=4 per step) with `fn` as its one reward function."""
    args = tiny_config(GRPOConfig, output_dir, **overrides)
    return GRPOTrainer(model_dir, reward_funcs=[fn], args=args, train_dataset=load_rows(dataset_path),
                       eval_dataset=eval_dataset, callbacks=[fn.callback, *callbacks])  # fmt: skip


@pytest.mark.timeout(600)
def test_two_processes_judge_each_split_group_whole_once(tiny_model_dir, tiny_dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    launch_two_processes("reward_func_multiprocess_train.py", tiny_model_dir, tiny_dataset, str(out))

    groups = [json.loads(line) for line in (out / "groups.jsonl").read_text().splitlines()]
    # Global batch = 2 processes x 2 rollouts = one group of G=4 per step, half on each process. The method
    # ran on the main process only and saw each step's group once, with all 4 completions: without the
    # gathering it would have been handed 2 rollouts, not a whole group, and the run would have failed.
    assert [(g["step"], g["size"]) for g in groups] == [(0, 4), (1, 4)]
    rank0, rank1 = (json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1))
    # Each process got back its own 2 rewards per step (its half of the group)...
    assert [len(r) for r in rank0["returned"]] == [len(r) for r in rank1["returned"]] == [2, 2]
    # ...and both logged the same judge metrics (one group of 4 distinct-or-not answers per step), the
    # per-step numbers through TRL's log_metric, the totals from the callback.
    assert rank0["judge_calls"] == rank1["judge_calls"] and len(rank0["judge_calls"]) == 2
    assert rank0["judge_calls_total"] == rank1["judge_calls_total"]
    assert rank0["judge_calls_total"][1] == rank0["judge_calls"][0] + rank0["judge_calls"][1]


class RecordBuffers(TrainerCallback):
    """The method's buffers when training begins (after the reward callback restored them) and after each step."""

    def __init__(self, method):
        self.method, self.at_begin, self.after = method, None, {}

    def on_train_begin(self, args, state, control, **kwargs):
        self.at_begin = self.method.export_buffers()

    def on_step_end(self, args, state, control, **kwargs):
        self.after[state.global_step] = self.method.export_buffers()


def rank_buffer():
    # K0=2 of the tiny dataset's 3 references; anchors in memory, so the state file holds them all.
    return RankBufferReward(SimulatedJudge(distinct_chars), k0=2, anchor_store="memory")


def test_resume_restores_the_buffers_and_the_judge_totals(tiny_model_dir, tiny_dataset, tmp_path, caplog):
    method = rank_buffer()
    fn = as_reward_func(method, num_generations=4)
    full = RecordBuffers(method)
    first = plain_trainer(tiny_model_dir, tiny_dataset, fn, tmp_path / "out", full, max_steps=3,
                          save_strategy="steps", save_steps=1)  # fmt: skip
    first.train()
    checkpoint = tmp_path / "out" / "checkpoint-2"
    assert (checkpoint / METHOD_STATE_NAME).exists() and (checkpoint / JUDGE_USAGE_NAME).exists()
    assert full.after[2]  # two steps of 2 queries built buffers
    shutil.rmtree(tmp_path / "out" / "checkpoint-3")  # as if the run had been killed during step 3

    # A new process: a fresh method, restored from checkpoint-2 by the callback before step 3.
    method = rank_buffer()
    fn = as_reward_func(method, num_generations=4)
    resumed = RecordBuffers(method)
    trainer = plain_trainer(tiny_model_dir, tiny_dataset, fn, tmp_path / "out", resumed, max_steps=3)
    with caplog.at_level("WARNING"):
        trainer.train(resume_from_checkpoint=True)  # transformers picks checkpoint-2, the newest
    assert resumed.at_begin == full.after[2]  # every buffer, not just totals
    assert f"resumed from {checkpoint} at step 2" in caplog.text and "rank_buffer state:  buffer/count 4" in caplog.text
    # The judge totals continue: step 3's total is every call the first run paid for (its lost step 3 included,
    # from the journal in output_dir) plus the resumed step 3's calls.
    saved = json.loads((checkpoint / JUDGE_USAGE_NAME).read_text())
    paid = [e["judge/calls_total"] for e in first.state.log_history if "judge/calls_total" in e][-1]
    step3 = [e for e in trainer.state.log_history if e.get("step") == 3 and "judge/calls" in e][0]
    assert paid > saved["calls"] and step3["judge/calls_total"] == paid + step3["judge/calls"]
    assert f"({int(paid) - saved['calls']} of the calls after the checkpoint" in caplog.text


def test_a_checkpoint_without_the_buffers_is_an_error_not_a_silent_restart(tiny_model_dir, tiny_dataset, tmp_path):
    fn = as_reward_func(rank_buffer(), num_generations=4)
    plain_trainer(tiny_model_dir, tiny_dataset, fn, tmp_path / "out", max_steps=1, save_strategy="steps",
                  save_steps=1).train()  # fmt: skip
    (tmp_path / "out" / "checkpoint-1" / METHOD_STATE_NAME).unlink()  # e.g. written by a run without the callback
    fn = as_reward_func(rank_buffer(), num_generations=4)
    trainer = plain_trainer(tiny_model_dir, tiny_dataset, fn, tmp_path / "out", max_steps=2)
    with pytest.raises(CheckpointStateError, match="resume_with_fresh_state=True"):
        trainer.train(resume_from_checkpoint=True)


def test_inside_a_running_event_loop_as_in_a_notebook(tiny_model_dir, tiny_dataset, tmp_path):
    fn = as_reward_func(CountingMethod(), num_generations=4)
    completions = ["a", "bb", "ccc", "dddd"]

    async def cell():  # a notebook cell runs inside the kernel's event loop: asyncio.run would raise here
        asyncio.get_running_loop()
        first = fn(prompts=["Name a colour."] * 4, completions=completions, query_id=["q"] * 4)
        second = fn(prompts=["Name a colour."] * 4, completions=completions, query_id=["q"] * 4)
        return first, second

    first, second = asyncio.run(cell())
    # LengthJudge scores len(answer) % 11 = 1..4, CountingMethod rewards score / 10, plus 0.01 once the query
    # was seen before (lambda_fmt 0: no format bonus).
    assert first == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert second == pytest.approx([0.11, 0.21, 0.31, 0.41])

    async def training_cell():
        fn = as_reward_func(CountingMethod(), num_generations=4)
        trainer = plain_trainer(tiny_model_dir, tiny_dataset, fn, tmp_path / "out", max_steps=1)
        trainer.train()
        return trainer

    trainer = asyncio.run(training_cell())
    assert [e["judge/calls"] > 0 for e in trainer.state.log_history if "judge/calls" in e] == [True]


def test_evaluation_batches_are_judged_but_leave_the_state_unchanged(tiny_model_dir, tiny_dataset, tmp_path):
    log = tmp_path / "groups.jsonl"
    method = CountingMethod(log_path=str(log))
    fn = as_reward_func(method, num_generations=4)
    trainer = plain_trainer(tiny_model_dir, tiny_dataset, fn, tmp_path / "out", max_steps=2, eval_strategy="steps",
                            eval_steps=1, per_device_eval_batch_size=8, eval_dataset=load_rows(tiny_dataset))  # fmt: skip
    trainer.train()
    scored = [json.loads(line) for line in log.read_text().splitlines()]
    # 2 training steps x 2 groups, and 2 evaluations x 4 queries (every eval query once, G=4 each)
    assert len(scored) == 2 * 2 + 2 * 4 and all(g["size"] == 4 for g in scored)
    # Only the 4 training groups count in the method's state: evaluation ran inside frozen_state().
    assert sum(method.seen.values()) == 4


class DownJudge:
    """Every call fails as a transport error would, after all retries."""

    def __init__(self):
        self.ledger = JudgeLedger()

    async def judge(self, request):
        self.ledger.record(request_kind="pointwise", parsed=False, failure="transport")
        raise JudgeError("connection refused", kind="transport")


def test_judge_failures_are_none_and_the_breaker_stops_the_run(tiny_model_dir, tiny_dataset, tmp_path):
    direct = as_reward_func(CountingMethod(DownJudge()), num_generations=4)
    assert direct(prompts=["p"] * 4, completions=["a", "b", "c", "d"]) == [None] * 4  # unscorable, not 0

    fn = as_reward_func(CountingMethod(DownJudge()), num_generations=4, judge_stop_after_failed_batches=2)
    trainer = plain_trainer(tiny_model_dir, tiny_dataset, fn, tmp_path / "out", max_steps=5)
    with pytest.raises(JudgeFailureError, match="every group was neutral in 2 consecutive generation batches"):
        trainer.train()
    # It stopped at step 2 with a checkpoint to resume from, holding the breaker's state.
    assert trainer.state.global_step == 2
    usage = json.loads((tmp_path / "out" / "checkpoint-2" / JUDGE_USAGE_NAME).read_text())
    assert usage["neutral_groups"] == 4 and usage["breaker"]["failed_streak"] == 2  # 2 groups x 2 steps


def test_the_callback_is_required_and_the_group_size_checked(tiny_model_dir, tiny_dataset, tmp_path):
    fn = as_reward_func(CountingMethod(), num_generations=4)
    args = tiny_config(GRPOConfig, tmp_path / "out", max_steps=1)
    trainer = GRPOTrainer(tiny_model_dir, reward_funcs=[fn], args=args, train_dataset=load_rows(tiny_dataset))
    with pytest.raises(ValueError, match=r"pass callbacks=\[fn.callback\] to GRPOTrainer"):
        trainer.train()
    wrong = as_reward_func(CountingMethod(), num_generations=8)
    with pytest.raises(ValueError, match="num_generations=8.*the trainer's num_generations is 4"):
        plain_trainer(tiny_model_dir, tiny_dataset, wrong, tmp_path / "out2", max_steps=1)
