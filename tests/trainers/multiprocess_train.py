"""Launched by test_multiprocess.py under `accelerate launch --num_processes 2 --cpu`.

Usage: multiprocess_train.py MODEL_DIR DATASET OUTPUT_DIR
Per-device batch 2 with G=4: every group is split across the two processes. The fake
method logs each group it scores to OUTPUT_DIR/groups.jsonl; each process writes the
rewards TRL hands it (its slice of the gathered column) to OUTPUT_DIR/rank{i}.json.
"""

import json
import os
import sys

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.scripts import end_process_group
from trl_rankreward.testing import CountingMethod
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer


class RecordingTrainer(JudgeRewardGRPOTrainer):
    """Keeps the gathered reward column this process received at every step."""

    received: list

    def _calculate_rewards(self, *args, **kwargs):
        rewards = super()._calculate_rewards(*args, **kwargs)
        self.received.append(rewards[:, 0].tolist())
        return rewards




def main():
    model_dir, dataset_path, output_dir = sys.argv[1:4]
    args = tiny_config(JudgeRewardGRPOConfig, output_dir, per_device_train_batch_size=2, max_steps=2)
    method = CountingMethod(log_path=os.path.join(output_dir, "groups.jsonl"))
    trainer = tiny_trainer(RecordingTrainer, model_dir, dataset_path, args, reward_method=method)
    trainer.received = []
    trainer.train()
    rank = trainer.accelerator.process_index
    logged = [e for e in trainer.state.log_history if "judge/calls" in e]
    with open(os.path.join(output_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"received": trainer.received, "judge_calls": [e["judge/calls"] for e in logged]}, f)
    return rank


def native_thread_names() -> list[str]:
    """The names of this process's OS threads (Linux), e.g. gloo's `gloo_tcp_loop` and `pt_gloo_runloop`."""
    tasks = f"/proc/{os.getpid()}/task"
    if not os.path.isdir(tasks):
        return []
    names = []
    for task in sorted(os.listdir(tasks)):
        with open(os.path.join(tasks, task, "comm")) as f:
            names.append(f.read().strip())
    return names


if __name__ == "__main__":
    rank = main()
    end_process_group()  # as the example scripts do, once the trainer is released
    with open(os.path.join(sys.argv[3], f"threads{rank}.txt"), "w") as f:
        f.write("\n".join(native_thread_names()))
