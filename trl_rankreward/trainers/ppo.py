"""PPO with a learned critic on TRL's GRPOTrainer: `advantage_estimator="gae"`; its settings and trainer.

TRL 1.16 has no PPO trainer (its `PPOTrainer` and value-head models were removed), so the
package adds the critic to TRL's GRPO machinery instead of copying an old trainer (`ppo_critic`,
run by every trainer through `base.GRPOTrainerBase`: every config has the `CriticConfig` fields).

This module holds `CriticPPOConfig` / `CriticPPOTrainer`, PPO for plain TRL reward functions. No
groups are needed: `num_generations=1` is allowed with "gae" (`critic_config.grpo_post_init`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from .base import GRPOTrainerBase
from .critic_config import ADVANTAGE_ESTIMATORS, CriticConfig, critic_post_init
from .judge_eval_config import JudgeEvalConfig, check_judge_eval


@dataclass
class CriticPPOConfig(JudgeEvalConfig, CriticConfig, GRPOConfig):
    """`GRPOConfig` plus the critic (`CriticConfig`), with "gae" as the default: PPO for plain TRL reward functions."""

    advantage_estimator: str = field(
        default="gae",
        metadata={"help": "'gae': PPO with a learned critic; 'group': GRPO.", "choices": list(ADVANTAGE_ESTIMATORS)},
    )

    def __post_init__(self):
        critic_post_init(self)  # TRL's checks and the critic's
        check_judge_eval(self)


class CriticPPOTrainer(GRPOTrainerBase):
    """PPO with a learned critic for any TRL reward functions: `GRPOTrainer`'s arguments, a `CriticPPOConfig`.

    trainer = CriticPPOTrainer("Qwen/Qwen3-0.6B", reward_funcs=my_reward, args=CriticPPOConfig(
        output_dir="out", num_generations=1), train_dataset=dataset)
    """

    def __init__(self, model, reward_funcs, args: CriticPPOConfig | None = None, **kwargs):
        if not isinstance(args, CriticConfig):
            raise TypeError(f"CriticPPOTrainer needs args=CriticPPOConfig(...), got {type(args).__name__}")
        super().__init__(model, reward_funcs=reward_funcs, args=args, **kwargs)


__all__ = ["CriticPPOConfig", "CriticPPOTrainer"]
