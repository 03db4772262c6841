"""RankBuffer training with judging workers (`judge_workers`) against the scripted judge server: the same
rewards, losses and buffers as judging on the main process, and a checkpoint resumes with or without them."""

import pytest

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.testing import serve_scripted_judge
from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer


def train(model_dir, dataset, output_dir, url, workers: int, steps: int, resume: bool = False):
    args = tiny_config(RankBufferGRPOConfig, output_dir, judge_base_urls=[url], judge_model=url.model, k0=3,
                       max_steps=steps, save_strategy="steps", save_steps=1, judge_workers=workers)  # fmt: skip
    trainer = tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args)
    trainer.train(resume_from_checkpoint=resume or None)
    logs = [e for e in trainer.state.log_history if "loss" in e]
    keys = ("loss", "reward", "judge/calls", "judge/calls_total", "buffer/count")
    return [{k: e.get(k) for k in keys} for e in logs], trainer.reward_method.export_buffers()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_workers_train_as_the_main_process_and_resume_either_way(tiny_model_dir, tiny_dataset, tmp_path):
    with serve_scripted_judge() as url:
        here = train(tiny_model_dir, tiny_dataset, tmp_path / "here", url, workers=0, steps=3)
        there = train(tiny_model_dir, tiny_dataset, tmp_path / "there", url, workers=2, steps=2)
        # a checkpoint written with workers resumes on the main process's loop, and the run ends as `here`
        resumed = train(tiny_model_dir, tiny_dataset, tmp_path / "there", url, workers=0, steps=3, resume=True)
    assert there[0] == here[0][:2]
    assert resumed[0] == here[0]  # the checkpoint's log history, then step 3
    assert resumed[1] == here[1] and len(here[1]) > 0
