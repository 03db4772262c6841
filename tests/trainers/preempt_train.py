"""Launched by test_preemption.py, alone or under `accelerate launch` (2 CPU processes): a short RankBuffer or PPO
run that a SIGTERM may stop.

Usage: preempt_train.py KIND MODEL_DIR DATASET OUTPUT_DIR MAX_STEPS    (KIND: rank_buffer | ppo)

Resumes from the newest complete checkpoint of OUTPUT_DIR when there is one. It saves no checkpoint of its own
(save_strategy "no"): the only ones are those a signal makes. Each process appends to OUTPUT_DIR/steps{rank}.jsonl
a line when training begins and one per step it trains (step, loss, rewards); a finished run's main process writes
OUTPUT_DIR/final.pt (the policy's weights; the critic's with ppo; the buffers with rank_buffer). The exit goes
through `run_script`, as the example scripts' does: 0 when finished, 75 when stopped by a signal.
"""

import json
import os
import sys

import torch
from transformers import TrainerCallback

from tests.trainers.helpers import tiny_config, tiny_trainer
from tests.trainers.test_ppo import low_token_share, ppo_config, prompts
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.scripts import run_script
from trl_rankreward.trainers.base import CriticPPOTrainer, checkpoint_steps
from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

GLOBAL_BATCH = 8


class StepLog(TrainerCallback):
    """Appends this process's training begin and every step's loss to `path` (flushed: a kill loses none)."""

    def __init__(self, path):
        self.path = path

    def _write(self, entry):
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def on_train_begin(self, args, state, control, **kwargs):
        self._write({"begin": state.global_step})

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self._write({"step": state.global_step, "loss": logs["loss"], "reward": logs.get("reward"), "grad_norm": logs.get("grad_norm")})


def build(kind, model_dir, dataset, output_dir, max_steps, processes):
    batch = dict(per_device_train_batch_size=GLOBAL_BATCH // processes, max_steps=max_steps)
    if kind == "ppo":
        args = ppo_config(output_dir, **batch)
        return CriticPPOTrainer(model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    args = tiny_config(RankBufferGRPOConfig, output_dir, k0=2, **batch)
    judge = SimulatedJudge(lambda query_id, text: float(len(set(text))))
    return tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args, judge=judge)


def main(argv):
    kind, model_dir, dataset, output_dir, max_steps = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    trainer = build(kind, model_dir, dataset, output_dir, max_steps, processes)
    trainer.add_callback(StepLog(os.path.join(output_dir, f"steps{trainer.accelerator.process_index}.jsonl")))
    trainer.train(resume_from_checkpoint=True if checkpoint_steps(output_dir) else None)
    if trainer.accelerator.is_main_process:
        final = {"policy": {k: v.detach().clone() for k, v in trainer.accelerator.unwrap_model(trainer.model)
                            .state_dict().items()}}  # fmt: skip
        if trainer.critic is not None:
            critic = trainer.accelerator.unwrap_model(trainer.critic)
            final["critic"] = {k: v.detach().clone() for k, v in critic.state_dict().items()}
        if kind == "rank_buffer":
            final["buffers"] = trainer.reward_method.export_buffers()
        torch.save(final, os.path.join(output_dir, "final.pt"))


class Positional:
    """`run_script`'s parser for this script: the positional arguments as they are."""

    def parse_args_and_config(self, argv):
        return (argv,)


if __name__ == "__main__":
    sys.exit(run_script(main, Positional, sys.argv[1:]))
