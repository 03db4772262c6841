"""Launched by test_judge_eval.py under `accelerate launch --num_processes 2 --cpu`.

Usage: judge_eval_multiprocess_train.py MODEL_DIR DATASET OUTPUT_DIR JUDGE_URL JUDGE_MODEL
Three evaluation prompts over two processes (shards of 2 and 1), evaluated at steps 1 and 2
against the starting policy's answers, judged by the scripted judge at JUDGE_URL. Each process
writes its logged evaluations and its baseline answers to OUTPUT_DIR/rank{i}.json.
"""

import json
import os
import sys

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.scripts import end_process_group
from trl_rankreward.testing import CountingMethod
from trl_rankreward.trainers.judge_eval import JudgeWinRateCallback
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer


def main():
    model_dir, dataset_path, output_dir, url, model = sys.argv[1:6]
    args = tiny_config(JudgeRewardGRPOConfig, output_dir, per_device_train_batch_size=2, max_steps=2,
                       eval_prompts=dataset_path, eval_num_prompts=3, eval_steps=1, eval_judge_base_urls=[url],
                       eval_judge_model=model)  # fmt: skip
    trainer = tiny_trainer(JudgeRewardGRPOTrainer, model_dir, dataset_path, args, reward_method=CountingMethod())
    trainer.train()
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, JudgeWinRateCallback)]
    evaluations = [e for e in trainer.state.log_history if "eval/prompts_judged" in e]
    with open(os.path.join(output_dir, f"rank{trainer.accelerator.process_index}.json"), "w") as f:
        json.dump({"evaluations": evaluations, "baselines": callback.baselines}, f)


if __name__ == "__main__":
    main()
    end_process_group()  # as the example scripts do, once the trainer is released
