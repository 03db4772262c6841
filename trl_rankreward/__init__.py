"""trl-rankreward: ranking and rubric-matrix rewards from LLM judges for TRL's GRPO.

Trainers (which import torch and trl) load on first use; `trl_rankreward.rewards` and
`trl_rankreward.judging` never import them.
"""

from ._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "JudgeRewardGRPOTrainer": ".trainers.judge_reward",
    "JudgeRewardGRPOConfig": ".trainers.judge_reward",
    "RankBufferGRPOTrainer": ".trainers.rank_buffer",
    "RankBufferGRPOConfig": ".trainers.rank_buffer",
    "MatrixRewardGRPOTrainer": ".trainers.matrix_reward",
    "MatrixRewardGRPOConfig": ".trainers.matrix_reward",
    "RAlignGenRMTrainer": ".trainers.ralign",
    "RAlignGenRMConfig": ".trainers.ralign",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
