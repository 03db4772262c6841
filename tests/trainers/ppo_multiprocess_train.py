"""Launched by test_ppo.py under `accelerate launch --num_processes 2 --cpu`: PPO (G=1) on two processes.

Usage: ppo_multiprocess_train.py MODEL_DIR OUTPUT_DIR
Each process writes OUTPUT_DIR/rank{i}.json: a checksum of its critic's and policy's weights
(DDP keeps the replicas equal) and the logged PPO statistics.
"""

import json
import os
import sys

from tests.trainers.test_ppo import low_token_share, ppo_config, prompts
from trl_rankreward.trainers.ppo import CriticPPOTrainer


def checksum(model) -> float:
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def main():
    model_dir, output_dir = sys.argv[1:3]
    args = ppo_config(output_dir, per_device_train_batch_size=4, max_steps=3, save_strategy="steps", save_steps=3)
    trainer = CriticPPOTrainer(model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    critic_before = checksum(trainer.critic)
    trainer.train()
    stats = {k: [e[k] for e in trainer.state.log_history if k in e] for k in ("ppo/value_loss", "ppo/advantage_std")}
    result = {"critic_before": critic_before, "critic": checksum(trainer.critic), "policy": checksum(trainer.model),
              **stats}  # fmt: skip
    with open(os.path.join(output_dir, f"rank{trainer.accelerator.process_index}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
