"""Launched by test_reward_func.py under `accelerate launch` with 2 CPU processes: a plain `trl.GRPOTrainer`.

Usage: reward_func_multiprocess_train.py MODEL_DIR DATASET OUTPUT_DIR
Per-device batch 2 with G=4: every group is split across the two processes. The method is
`as_reward_func(CountingMethod(...))`; it logs each group it scores to OUTPUT_DIR/groups.jsonl (main
process only, where it scores); each process writes what the reward function returned to it (its
slice) and the judge metrics it logged to OUTPUT_DIR/rank{i}.json.
"""

import json
import os
import sys

from trl import GRPOConfig, GRPOTrainer

from tests.trainers.helpers import load_rows, tiny_config
from trl_rankreward import as_reward_func
from trl_rankreward.scripts import end_process_group
from trl_rankreward.testing import CountingMethod


def main():
    model_dir, dataset_path, output_dir = sys.argv[1:4]
    args = tiny_config(GRPOConfig, output_dir, per_device_train_batch_size=2, max_steps=2)
    fn = as_reward_func(CountingMethod(log_path=os.path.join(output_dir, "groups.jsonl")), num_generations=4)
    returned = []

    def recording(**kwargs):
        rewards = fn(**kwargs)
        returned.append(rewards)
        return rewards

    recording.__name__ = fn.__name__
    trainer = GRPOTrainer(model_dir, reward_funcs=[recording], args=args, train_dataset=load_rows(dataset_path),
                          callbacks=[fn.callback])  # fmt: skip
    trainer.train()
    rank = trainer.accelerator.process_index
    logged = [e for e in trainer.state.log_history if "judge/calls" in e]
    with open(os.path.join(output_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"returned": returned, "judge_calls": [e["judge/calls"] for e in logged],
                   "judge_calls_total": [e.get("judge/calls_total") for e in logged]}, f)  # fmt: skip


if __name__ == "__main__":
    main()
    end_process_group()  # as the example scripts do, once the trainer is released
