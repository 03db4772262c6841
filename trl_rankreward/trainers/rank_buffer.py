"""`RankBufferGRPOTrainer`: GRPO with RankBuffer rewards (RankBuffer paper, Sections 3.1-3.5).

The trainer only maps `RankBufferGRPOConfig` to a `RankBufferReward`; gathering whole
groups, epochs, logging and checkpoints are `JudgeRewardGRPOTrainer`'s. The config's
RankBuffer fields are `RankBufferOptions`'s, inherited (one source of their defaults and
checks). Anchor texts live in a content-addressed SQLite file (`{output_dir}/anchors.sqlite`
by default) that holds the buffer structures too; every checkpoint holds a snapshot of it.

Example (CPU quickstart; the paper's setup is examples/configs/rankbuffer_qwen3_8b.yaml):

    args = RankBufferGRPOConfig(output_dir="out", num_generations=8, k0=4, inactivity_epochs=3)
    trainer = RankBufferGRPOTrainer("path/to/policy", args=args, train_dataset=dataset)
    trainer.train()
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..rewards.rank_buffer import RankBufferOptions
from .judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer


@dataclass
class RankBufferGRPOConfig(RankBufferOptions, JudgeRewardGRPOConfig):
    """`JudgeRewardGRPOConfig` with `RankBufferOptions`'s fields; `reward_method` is always "rank_buffer"."""

    reward_method: str = field(default="rank_buffer", metadata={"help": "Fixed to 'rank_buffer' for this trainer."})

    def __post_init__(self):
        JudgeRewardGRPOConfig.__post_init__(self)  # the one path: TRL's, the judges', RankBufferOptions' checks
        if self.buffer_init == "bootstrap" and self.k0 > self.num_generations:
            raise ValueError(
                f"buffer_init='bootstrap' takes k0={self.k0} anchors from the first group, but num_generations="
                f"{self.num_generations}; lower k0 or raise num_generations"
            )


class RankBufferGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `RankBufferReward`; everything else as `JudgeRewardGRPOTrainer`."""

    _config_class = RankBufferGRPOConfig
