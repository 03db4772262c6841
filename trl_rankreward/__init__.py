"""trl-rankreward: ranking and rubric-matrix rewards from LLM judges for TRL's GRPO.

Trainers (which import torch and trl) load on first use; `trl_rankreward.rewards` and
`trl_rankreward.judging` never import them.
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:  # what IDEs and type checkers see; at runtime `__getattr__` imports on first use
    from .trainers.judge_reward import JudgeRewardGRPOConfig as JudgeRewardGRPOConfig
    from .trainers.judge_reward import JudgeRewardGRPOTrainer as JudgeRewardGRPOTrainer
    from .trainers.matrix_reward import MatrixRewardGRPOConfig as MatrixRewardGRPOConfig
    from .trainers.matrix_reward import MatrixRewardGRPOTrainer as MatrixRewardGRPOTrainer
    from .trainers.ppo import CriticPPOConfig as CriticPPOConfig
    from .trainers.ppo import CriticPPOTrainer as CriticPPOTrainer
    from .trainers.ralign import RAlignGenRMConfig as RAlignGenRMConfig
    from .trainers.ralign import RAlignGenRMTrainer as RAlignGenRMTrainer
    from .trainers.rank_buffer import RankBufferGRPOConfig as RankBufferGRPOConfig
    from .trainers.rank_buffer import RankBufferGRPOTrainer as RankBufferGRPOTrainer

_EXPORTS = {
    "JudgeRewardGRPOTrainer": ".trainers.judge_reward",
    "JudgeRewardGRPOConfig": ".trainers.judge_reward",
    "RankBufferGRPOTrainer": ".trainers.rank_buffer",
    "RankBufferGRPOConfig": ".trainers.rank_buffer",
    "MatrixRewardGRPOTrainer": ".trainers.matrix_reward",
    "MatrixRewardGRPOConfig": ".trainers.matrix_reward",
    "CriticPPOTrainer": ".trainers.ppo",
    "CriticPPOConfig": ".trainers.ppo",
    "RAlignGenRMTrainer": ".trainers.ralign",
    "RAlignGenRMConfig": ".trainers.ralign",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
