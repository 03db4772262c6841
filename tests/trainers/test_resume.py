"""`train(resume_from_checkpoint=True)` resumes every trainer from its newest complete checkpoint (`base`)."""

import pytest
from transformers import TrainerCallback

from tests.trainers.helpers import load_rows, tiny_config
from tests.trainers.test_ppo import low_token_share, ppo_config, prompts
from tests.trainers.test_ralign import _pairs
from trl_rankreward import (
    CriticPPOTrainer,
    JudgeRewardGRPOConfig,
    JudgeRewardGRPOTrainer,
    RAlignGenRMConfig,
    RAlignGenRMTrainer,
)
from trl_rankreward.testing import CountingMethod

SAVE_EVERY_STEP = dict(save_strategy="steps", save_steps=1)


def judge_reward(model_dir, dataset_path, output_dir, max_steps):
    args = tiny_config(JudgeRewardGRPOConfig, output_dir, max_steps=max_steps, **SAVE_EVERY_STEP)
    return JudgeRewardGRPOTrainer(model_dir, args=args, train_dataset=load_rows(dataset_path),
                                  reward_method=CountingMethod())  # fmt: skip


def ralign(model_dir, dataset_path, output_dir, max_steps):
    args = tiny_config(RAlignGenRMConfig, output_dir, reward_mode="outcome", per_device_train_batch_size=4,
                       num_generations=1, max_steps=max_steps, **SAVE_EVERY_STEP)  # fmt: skip
    return RAlignGenRMTrainer(model_dir, args=args, train_dataset=_pairs())


def critic_ppo(model_dir, dataset_path, output_dir, max_steps):
    args = ppo_config(output_dir, max_steps=max_steps, **SAVE_EVERY_STEP)
    return CriticPPOTrainer(model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())


class CountSteps(TrainerCallback):
    def __init__(self):
        self.steps = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1


@pytest.mark.parametrize("build", [judge_reward, ralign, critic_ppo], ids=lambda b: b.__name__)
def test_resume_true_continues_from_the_newest_complete_checkpoint(build, tiny_model_dir, tiny_dataset, tmp_path):
    build(tiny_model_dir, tiny_dataset, tmp_path, max_steps=2).train()
    (tmp_path / "checkpoint-3").mkdir()  # a save killed midway: no trainer_state.json (nor any other file)
    trainer = build(tiny_model_dir, tiny_dataset, tmp_path, max_steps=3)
    assert trainer.latest_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-2")
    loaded, counter = [], CountSteps()
    load = trainer._load_optimizer_and_scheduler
    trainer._load_optimizer_and_scheduler = lambda checkpoint: (loaded.append(checkpoint), load(checkpoint))[1]
    trainer.add_callback(counter)
    trainer.train(resume_from_checkpoint=True)
    # checkpoint-2 was loaded (checkpoint-3 skipped), and only step 3 was left to train
    assert loaded == [str(tmp_path / "checkpoint-2")]
    assert counter.steps == 1 and trainer.state.global_step == 3
