"""`RankBufferGRPOTrainer`: GRPO with RankBuffer rewards (RankBuffer paper, Sections 3.1-3.5).

The trainer only maps `RankBufferGRPOConfig` to a `RankBufferReward`; gathering whole
groups, epochs, logging and checkpoints are `JudgeRewardGRPOTrainer`'s. Anchor texts live
in a content-addressed SQLite file (`{output_dir}/anchors.sqlite` by default) that holds the
buffer structures too; every checkpoint holds a snapshot of it.

Example (CPU quickstart; the paper's setup is examples/configs/rankbuffer_qwen3_8b.yaml):

    args = RankBufferGRPOConfig(output_dir="out", num_generations=8, k0=4, inactivity_epochs=3)
    trainer = RankBufferGRPOTrainer("path/to/policy", args=args, train_dataset=dataset)
    trainer.train()
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..rewards.base import GroupRewardMethod
from ..rewards.options import MethodOptions
from ..rewards.rank_buffer import INITS, MANAGERS, VARIANTS
from .judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer

#: the choices of the config fields are `RankBufferReward`'s own (tests/test_defaults_agree.py checks the defaults)
BUFFER_INITS = INITS
BUFFER_VARIANTS = VARIANTS
BUFFER_MANAGERS = tuple(manager for manager in MANAGERS if manager is not None)  # None: the field's default
ANCHOR_STORES = ("sqlite", "memory")


@dataclass
class RankBufferGRPOConfig(MethodOptions, JudgeRewardGRPOConfig):
    """`JudgeRewardGRPOConfig` with RankBuffer's options; `reward_method` is always "rank_buffer"."""

    reward_method: str = field(default="rank_buffer", metadata={"help": "Fixed to 'rank_buffer' for this trainer."})
    lambda_fmt: float = field(
        default=0.2, metadata={"help": "Weight of the format reward (the paper uses 0.2, Section 4.1)."}
    )
    k0: int = field(
        default=4,
        metadata={"help": "Initial buffer size K0 (paper: 2, 4 or 7; anchors are subsampled keeping both ends)."},
    )
    buffer_init: str = field(
        default="nectar",
        metadata={
            "help": "Buffer initialization: 'nectar' (K0 of the query's ranked `references`) or 'bootstrap' "
            "(listwise ranking of the first group).",
            "choices": list(BUFFER_INITS),
        },
    )
    inactivity_epochs: int = field(
        default=3, metadata={"help": "H: an anchor inactive for H epochs is pruned (Algorithm 2)."}
    )
    buffer_variant: str = field(
        default="dynamic",
        metadata={
            "help": "'dynamic' (Algorithm 2 maintenance), 'static' (frozen after the first epoch), 'coarse_only' "
            "(no fine ranking), 'order_only' (coarse prompt without anchor texts).",
            "choices": list(BUFFER_VARIANTS),
        },
    )
    buffer_manager: str | None = field(
        default=None,
        metadata={
            "help": "Replace Algorithm 2 with the judge choosing the buffer (Appendix G): 'llm' or 'llm_lookahead'.",
            "choices": list(BUFFER_MANAGERS),
        },
    )
    reshuffle_check: float = field(
        default=0.0,
        metadata={
            "help": "Fraction of listwise calls also asked under another display shuffle, to test whether the judge "
            "copies the displayed order (`rank/listwise_reshuffle_agreement`); extra judge calls, rewards unchanged."
        },
    )
    anchor_store: str = field(
        default="sqlite",
        metadata={
            "help": "'sqlite': anchor texts and buffer structures in an SQLite file, snapshotted into every "
            "checkpoint; 'memory': both inside every checkpoint's state file (small runs).",
            "choices": list(ANCHOR_STORES),
        },
    )
    anchor_store_path: str | None = field(
        default=None,
        metadata={
            "help": "SQLite anchor file; default {output_dir}/anchors.sqlite. A resume restores it from the "
            "checkpoint's own snapshot."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        self._check_choices("buffer_init", "buffer_variant", "anchor_store", "buffer_manager")
        if self.k0 < 2:
            raise ValueError(f"k0 must be >= 2 (the paper uses 2, 4, 7), got {self.k0}")
        if self.inactivity_epochs < 1:
            raise ValueError(f"inactivity_epochs must be >= 1, got {self.inactivity_epochs}")
        if self.buffer_init == "bootstrap" and self.k0 > self.num_generations:
            raise ValueError(
                f"buffer_init='bootstrap' takes k0={self.k0} anchors from the first group, but num_generations="
                f"{self.num_generations}; lower k0 or raise num_generations"
            )
        if self.buffer_manager is not None and self.buffer_variant == "static":
            raise ValueError(
                f"buffer_manager={self.buffer_manager!r} maintains the buffer but buffer_variant='static' freezes it; "
                "pick one"
            )
        if self.anchor_store_path is not None and self.anchor_store != "sqlite":
            raise ValueError(
                f"anchor_store_path={self.anchor_store_path!r} is for the SQLite store, but anchor_store="
                f"{self.anchor_store!r}; set anchor_store='sqlite' or drop anchor_store_path"
            )


class RankBufferGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `RankBufferReward`; everything else as `JudgeRewardGRPOTrainer`."""

    @classmethod
    def _config_class(cls) -> type:
        return RankBufferGRPOConfig

    def _build_reward_method(self, judge) -> GroupRewardMethod:
        from ..rewards.anchor_store import SQLiteAnchorStore
        from ..rewards.rank_buffer import RankBufferReward

        args = self.args
        store = None
        if args.anchor_store == "sqlite":
            store = SQLiteAnchorStore(args.anchor_store_path or os.path.join(args.output_dir, "anchors.sqlite"))
        return RankBufferReward(
            judge,
            k0=args.k0,
            init=args.buffer_init,
            inactivity_epochs=args.inactivity_epochs,
            variant=args.buffer_variant,
            manager=args.buffer_manager,
            reshuffle_check=args.reshuffle_check,
            **self._common_method_kwargs(),
            anchor_store=store,
            seed=args.judge_seed,
        )
