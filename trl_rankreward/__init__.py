"""trl-rankreward: ranking and rubric-matrix rewards from LLM judges for TRL's GRPO.

Trainers (which import torch and trl) load on first use; `trl_rankreward.rewards` and
`trl_rankreward.judging` never import them.
"""

from ._lazy import lazy_exports

__version__ = "0.1.0"

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".trainers.judge_reward": ("JudgeRewardGRPOTrainer", "JudgeRewardGRPOConfig", "RankBufferGRPOTrainer",
                                   "RankBufferGRPOConfig", "MatrixRewardGRPOTrainer", "MatrixRewardGRPOConfig"),
        ".trainers.ralign": ("RAlignGenRMTrainer", "RAlignGenRMConfig"),
        ".trainers.base": ("CriticPPOTrainer", "CriticPPOConfig"),
        ".trainers.judge_eval": ("JudgeWinRateCallback", "JudgeEvalConfig"),
        ".trainers.reward_func": ("as_reward_func",),  # a method as a plain TRL GRPOTrainer's reward function
    },
)
