"""`MatrixRewardGRPOTrainer`: GRPO with MatrixReward rewards (MatrixReward paper, Algorithm 1).

`MatrixRewardGRPOConfig` is `JudgeRewardGRPOConfig` with `MatrixRewardOptions` as its own
fields (same names, defaults and checks); the judge, gathering whole groups, building the
method, logging (`matrix/alpha`, `matrix/beta`, `matrix/fallbacks`, rubric weights, column
spread, judge calls and tokens), the failure policy and checkpoints are
`JudgeRewardGRPOTrainer`'s. MatrixReward keeps no state across steps, so a resume needs
nothing beyond TRL's own checkpoint.

Example (CPU; the paper's setup is examples/configs/matrixreward_qwen3_8b.yaml):

    args = MatrixRewardGRPOConfig(output_dir="out", num_generations=8, protocol="explicit")
    trainer = MatrixRewardGRPOTrainer("path/to/policy", args=args, train_dataset=dataset)
    trainer.train()
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..rewards.matrix_reward import MatrixRewardOptions
from .judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer


@dataclass
class MatrixRewardGRPOConfig(MatrixRewardOptions, JudgeRewardGRPOConfig):
    """`JudgeRewardGRPOConfig` with MatrixReward's options (`MatrixRewardOptions`) as fields;
    `reward_method` is always "matrix".

    Defaults are the paper's method (Sec. 3); the other choices are its ablations
    (Sec. 4.2-4.5, App. F). Options that would be silently ignored by the chosen setting
    (e.g. `mixture_alpha` without `fusion="additive"`) are rejected.
    """

    reward_method: str = field(default="matrix", metadata={"help": "Fixed to 'matrix' for this trainer."})

    def __post_init__(self):
        JudgeRewardGRPOConfig.__post_init__(self)  # the one path: TRL's, the judges', MatrixRewardOptions' checks


class MatrixRewardGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `MatrixReward`; everything else as `JudgeRewardGRPOTrainer`."""

    _config_class = MatrixRewardGRPOConfig
