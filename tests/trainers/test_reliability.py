"""A run never trains on nothing: RankBuffer training against a real HTTP judge (the scripted
OpenAI-compatible server of `trl_rankreward.testing`, behind a fault-injecting proxy).

- a valid judge: rewards from its verdicts, buffers built from them;
- a judge answering prose: the circuit breaker saves a checkpoint and stops the run with the
  failure quoted; nothing about any query changed; the checkpoint resumes;
- a judge down for one batch: that batch is neutral, the run goes on;
- a judge bug (not a judge failure) stops the step at once;
- resuming without the method state is an error, unless asked for fresh state.
"""

import json
import os
import shutil
from functools import partial

import pytest
from transformers import TrainerCallback

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.rewards.state_files import CheckpointStateError
from trl_rankreward.testing import FaultProxy, serve_scripted_judge
from trl_rankreward.trainers.base import latest_complete_checkpoint
from trl_rankreward.trainers.judge_reward import (
    METHOD_STATE_NAME,
    JudgeFailureError,
    RankBufferGRPOConfig,
    RankBufferGRPOTrainer,
)

config = partial(tiny_config, RankBufferGRPOConfig, k0=3, judge_timeout_s=5)


@pytest.fixture
def judge():
    with serve_scripted_judge() as url:
        yield url


def http_config(judge_url, output_dir, **overrides):
    return config(output_dir, judge_base_urls=[judge_url], judge_model="scripted-judge", **overrides)


def train(model_dir, dataset, args):
    trainer = tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args)
    trainer.train()
    return trainer


def neutral_counts(trainer):
    return [e["reward/neutral_groups"] for e in trainer.state.log_history if "reward/neutral_groups" in e]


def test_a_valid_http_judge_gives_rewards_and_builds_buffers(judge, tiny_model_dir, tiny_dataset, tmp_path):
    trainer = train(tiny_model_dir, tiny_dataset, http_config(judge, tmp_path / "out"))
    assert trainer.state.global_step == 3 and neutral_counts(trainer) == [0, 0, 0]
    logs = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert all(e["judge/parsed_calls"] > 0 and e["judge/failures"] == 0 for e in logs)
    assert judge.requests == sum(e["judge/calls"] for e in logs)  # every call went over HTTP
    method = trainer.reward_method
    built = [q for q in ("q0", "q1", "q2", "q3") if method.anchors(q)]
    assert len(built) >= 2  # 3 steps of 2 groups over 4 queries
    # The verdicts became rank rewards (not all-zero groups) and buffer maintenance inserted rollouts.
    assert any(e["rewards/rank_buffer/std"] > 0 for e in logs)
    sources = {a.source for q in built for a in method.anchors(q)}
    assert sources - {"references"}, sources


def test_a_judge_that_answers_prose_stops_the_run_with_a_checkpoint(judge, tiny_model_dir, tiny_dataset, tmp_path):
    judge.mode = "prose"
    args = http_config(judge, tmp_path / "out", max_steps=10, judge_max_attempts=2)
    trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args)
    with pytest.raises(JudgeFailureError) as info:
        trainer.train()
    message = str(info.value)
    # judge_stop_after_failed_batches=3: three batches with every group neutral, then stop at step 3 of 10.
    assert trainer.state.global_step == 3 and neutral_counts(trainer) == [2, 2, 2]
    assert "every group was neutral in 3 consecutive generation batches" in message
    assert "invalid answer" in message and "--resume_from_checkpoint" in message
    checkpoint = tmp_path / "out" / "checkpoint-3"
    assert str(checkpoint) in message and (checkpoint / METHOD_STATE_NAME).exists()
    # Nothing about any query changed: no buffer was ever built.
    assert json.loads((checkpoint / METHOD_STATE_NAME).read_text())["state"]["buffers_stored"]["count"] == 0

    # The judge is fixed: the same command resumes from the checkpoint and trains on.
    judge.mode = "valid"
    resumed = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset,
                           http_config(judge, tmp_path / "out", max_steps=5, judge_max_attempts=2))  # fmt: skip
    resumed.train(resume_from_checkpoint=True)
    assert resumed.state.global_step == 5 and neutral_counts(resumed)[-2:] == [0, 0]


class _DownDuring(TrainerCallback):
    """Takes the proxy down at the start of step `step` (0-based) and restores it at the next."""

    def __init__(self, proxy, step):
        self.proxy, self.step = proxy, step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            self.proxy.inject("down")
        elif state.global_step == self.step + 1:
            self.proxy.restore()


def test_a_judge_down_for_one_batch_is_a_transient_outage(judge, tiny_model_dir, tiny_dataset, tmp_path, monkeypatch):
    from trl_rankreward.trainers import reward_state

    warned = []
    monkeypatch.setattr(reward_state.logger, "warning", lambda message, *_, **__: warned.append(message))
    with FaultProxy(judge) as proxy:
        args = config(tmp_path / "out", max_steps=4, judge_base_urls=[proxy.url], judge_model="scripted-judge",
                      judge_max_attempts=2)  # fmt: skip
        trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args)
        trainer.add_callback(_DownDuring(proxy, step=1))
        trainer.train()  # must not raise: 1 failed batch < judge_stop_after_failed_batches
    assert trainer.state.global_step == 4 and neutral_counts(trainer) == [0, 2, 0, 0]
    failures = [e.get("judge/failures_transport", 0) for e in trainer.state.log_history if "judge/calls" in e]
    assert failures[1] > 0 and failures[2] == failures[3] == 0
    # the warning numbers the step as the console and the logs do: the second step (global_step 1 while it ran)
    assert [w for w in warned if "groups neutral at step" in w][0].startswith("trl-rankreward: 2 of 2 groups neutral at step 2 ")


def test_a_bug_in_a_judge_stops_the_step_instead_of_neutralizing_groups(tiny_model_dir, tiny_dataset, tmp_path):
    class BuggyJudge:
        async def judge(self, request):
            return {}["position"]  # a KeyError: a bug, not a judge failure

    trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, config(tmp_path / "out"),
                           judge=BuggyJudge())  # fmt: skip
    with pytest.raises(KeyError, match="position"):
        trainer.train()


def test_resuming_without_the_method_state_is_an_error_unless_asked(judge, tiny_model_dir, tiny_dataset, tmp_path):
    train(tiny_model_dir, tiny_dataset, http_config(judge, tmp_path / "out", max_steps=2, save_strategy="steps",
                                                    save_steps=2))  # fmt: skip
    checkpoint = tmp_path / "out" / "checkpoint-2"
    os.remove(checkpoint / METHOD_STATE_NAME)
    args = http_config(judge, tmp_path / "again", max_steps=3)
    with pytest.raises(
        CheckpointStateError, match="reward_method_state.json not found.*resume_with_fresh_reward_state"
    ):
        tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args).train(str(checkpoint))
    fresh = http_config(judge, tmp_path / "fresh", max_steps=3, resume_with_fresh_reward_state=True)
    trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, fresh)
    trainer.train(str(checkpoint))
    assert trainer.state.global_step == 3


def test_a_truncated_state_file_names_the_file(judge, tiny_model_dir, tiny_dataset, tmp_path):
    train(tiny_model_dir, tiny_dataset, http_config(judge, tmp_path / "out", max_steps=2, save_strategy="steps",
                                                    save_steps=2))  # fmt: skip
    state_file = tmp_path / "out" / "checkpoint-2" / METHOD_STATE_NAME
    state_file.write_bytes(state_file.read_bytes()[:50])
    trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, http_config(judge, tmp_path / "b"))
    with pytest.raises(CheckpointStateError, match=f"{state_file}.*truncated"):
        trainer.train(str(state_file.parent))


def test_the_latest_complete_checkpoint_skips_a_half_written_one(tmp_path):
    for step, files in ((2, ("trainer_state.json", METHOD_STATE_NAME)), (4, (METHOD_STATE_NAME,))):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        for name in files:
            (folder / name).write_text("{}")
    # checkpoint-4 lacks trainer_state.json, as a save killed midway leaves it
    assert latest_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-2")
    shutil.rmtree(tmp_path / "checkpoint-2")
    with pytest.raises(ValueError, match="holds no complete checkpoint"):
        latest_complete_checkpoint(str(tmp_path))
