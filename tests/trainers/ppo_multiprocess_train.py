"""Launched by test_ppo.py under `accelerate launch` with 2 CPU processes (DDP or DeepSpeed ZeRO-3): PPO at G=1.

Usage: ppo_multiprocess_train.py MODEL_DIR OUTPUT_DIR MAX_STEPS [RESUME_CHECKPOINT]
Checkpoints every 2 steps. Each process writes OUTPUT_DIR/rank{i}.json: a checksum of the
critic's and the policy's local parameters (equal replicas under DDP; shards under ZeRO-3),
the critic's local parameter count, and the logged rewards and PPO statistics.
"""

import json
import os
import sys

from tests.trainers.test_ppo import low_token_share, ppo_config, prompts
from trl_rankreward.scripts import end_process_group
from trl_rankreward.trainers.base import CriticPPOTrainer


def checksum(model) -> float:
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def main():
    model_dir, output_dir, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    resume = sys.argv[4] if len(sys.argv) > 4 else None
    args = ppo_config(output_dir, per_device_train_batch_size=4, max_steps=max_steps, save_strategy="steps",
                      save_steps=2)  # fmt: skip
    trainer = CriticPPOTrainer(model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    critic_before = checksum(trainer.critic)
    trainer.train(resume_from_checkpoint=resume)
    logged = {
        k: [e[k] for e in trainer.state.log_history if k in e]
        for k in ("reward", "ppo/value_loss", "ppo/advantage_std")
    }
    result = {"critic_before": critic_before, "critic": checksum(trainer.critic), "policy": checksum(trainer.model),
              "critic_local_numel": sum(p.numel() for p in trainer.critic.parameters()),
              "critic_engine": type(trainer._ppo.engine).__name__, **logged}  # fmt: skip
    with open(os.path.join(output_dir, f"rank{trainer.accelerator.process_index}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
    end_process_group()  # as the example scripts do, once the trainer is released
