"""`MatrixRewardGRPOTrainer`: GRPO with MatrixReward rewards (MatrixReward paper, Algorithm 1).

The trainer only maps `MatrixRewardGRPOConfig` to a `MatrixReward`; the judge, gathering
whole groups, logging (`matrix/alpha`, `matrix/beta`, `matrix/fallbacks`, rubric weights,
column spread, judge calls and tokens), the failure policy and checkpoints are
`JudgeRewardGRPOTrainer`'s. MatrixReward keeps no state across steps, so a resume needs
nothing beyond TRL's own checkpoint.

Example (CPU; the paper's setup is examples/configs/matrixreward_qwen3_8b.yaml):

    args = MatrixRewardGRPOConfig(output_dir="out", num_generations=8, protocol="explicit")
    trainer = MatrixRewardGRPOTrainer("path/to/policy", args=args, train_dataset=dataset)
    trainer.train()
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..rewards.base import GroupRewardMethod
from ..rewards.matrix_math import AGGREGATIONS, DISTANCES, EXTRACTORS, FUSIONS, IDEALS
from ..rewards.matrix_reward import PROTOCOLS
from .judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer

#: the MatrixReward options that are config fields, with the constructor's keyword of the same name
MATRIX_OPTIONS = (
    "protocol",
    "both_orders",
    "extractor",
    "fusion",
    "mixture_alpha",
    "ideals",
    "distance",
    "aggregation",
    "svd_variance",
)


@dataclass
class MatrixRewardGRPOConfig(JudgeRewardGRPOConfig):
    """`JudgeRewardGRPOConfig` with MatrixReward's options; `reward_method` is always "matrix".

    Defaults are the paper's method (Sec. 3); the other choices are its ablations
    (Sec. 4.2-4.5, App. F). Options that would be silently ignored by the chosen setting
    (e.g. `mixture_alpha` without `fusion="additive"`) are rejected.
    """

    reward_method: str = field(default="matrix", metadata={"help": "Fixed to 'matrix' for this trainer."})
    lambda_fmt: float = field(
        default=1.0,
        metadata={
            "help": "Weight of the format reward in r = r_qual + lambda_fmt * f (Eq. 8); 1.0 is the value of the "
            "paper's worked example (App. E)."
        },
    )
    protocol: str = field(
        default="explicit",
        metadata={
            "help": "'explicit': one judge request per pair and rubric, K*C(G,2) per group (Sec. 3.1); 'implicit': "
            "all K verdicts in one request per pair, C(G,2) per group; 'pointwise': K*G independent 0-10 scores, "
            "M = score/10 (the 'pointwise + MatrixReward' variant, Sec. 4.2).",
            "choices": list(PROTOCOLS),
        },
    )
    both_orders: bool = field(
        default=False,
        metadata={
            "help": "Judge every pair in both display orders and average the aligned outcomes (doubles the "
            "requests; pairwise protocols only)."
        },
    )
    extractor: str = field(
        default="critic",
        metadata={
            "help": "Matrix-derived rubric weights: 'critic' (Eq. 3), 'entropy' or 'svd' (Sec. 4.3, App. F).",
            "choices": list(EXTRACTORS),
        },
    )
    fusion: str = field(
        default="game",
        metadata={
            "help": "Combining matrix weights a with the rubric prior p: 'game' (Eq. 4-5), 'prior_only' (w = p), "
            "'additive' (w = (1 - mixture_alpha) p + mixture_alpha a) or 'multiplicative' (w ~ a p) (Sec. 4.5).",
            "choices": list(FUSIONS),
        },
    )
    mixture_alpha: float = field(
        default=0.5,
        metadata={"help": "Coefficient of fusion='additive', in [0, 1] (the paper tries 0.1 to 0.5, Table 4)."},
    )
    ideals: str = field(
        default="observed",
        metadata={
            "help": "TOPSIS ideals: 'observed' column max/min (Sec. 3.3) or 'theoretical' weighted upper bound "
            "and zero (Sec. 4.4).",
            "choices": list(IDEALS),
        },
    )
    distance: str = field(
        default="euclidean",
        metadata={
            "help": "TOPSIS distance: 'euclidean' (Eq. 7) or 'mahalanobis' (Sec. 4.4).",
            "choices": list(DISTANCES),
        },
    )
    aggregation: str = field(
        default="topsis",
        metadata={
            "help": "'topsis' closeness (Eq. 7) or 'weighted_sum' of the win rates (Sec. 4.4).",
            "choices": list(AGGREGATIONS),
        },
    )
    svd_variance: float = field(
        default=0.85,
        metadata={"help": "Variance share kept by extractor='svd', in (0, 1] (App. F: 0.85)."},
    )

    def __post_init__(self):
        super().__post_init__()
        self._check_own_method("matrix", "MatrixReward", MATRIX_OPTIONS)
        self._check_choices("protocol", "extractor", "fusion", "ideals", "distance", "aggregation")
        if not 0.0 <= self.mixture_alpha <= 1.0:
            raise ValueError(f"mixture_alpha must be in [0, 1], got {self.mixture_alpha}")
        if not 0.0 < self.svd_variance <= 1.0:
            raise ValueError(f"svd_variance must be in (0, 1], got {self.svd_variance}")
        self._check_unused_options()

    def _check_unused_options(self) -> None:
        """An option changed from its default that the chosen setting ignores is a mistake: name both fields."""
        if self.both_orders and self.protocol == "pointwise":
            raise ValueError(
                "both_orders=True judges pairs in both display orders, but protocol='pointwise' shows one answer per "
                "request; use protocol='explicit' or 'implicit', or set both_orders=False"
            )
        default = {f.name: f.default for f in fields(MatrixRewardGRPOConfig) if f.name in MATRIX_OPTIONS}
        ignored = (
            ("mixture_alpha", "fusion", self.fusion != "additive", "fusion='additive'"),
            ("svd_variance", "extractor", self.extractor != "svd", "extractor='svd'"),
            ("extractor", "fusion", self.fusion == "prior_only", "a fusion other than 'prior_only' (w = p)"),
            ("ideals", "aggregation", self.aggregation != "topsis", "aggregation='topsis'"),
            ("distance", "aggregation", self.aggregation != "topsis", "aggregation='topsis'"),
        )
        for option, by, unused, needs in ignored:
            value = getattr(self, option)
            if unused and value != default[option]:
                raise ValueError(
                    f"{option}={value!r} has no effect with {by}={getattr(self, by)!r}; it needs {needs}. Set "
                    f"{by} accordingly or leave {option} at its default {default[option]!r}"
                )


class MatrixRewardGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `MatrixReward`; everything else as `JudgeRewardGRPOTrainer`."""

    @classmethod
    def _config_class(cls) -> type:
        return MatrixRewardGRPOConfig

    def _build_reward_method(self, judge) -> GroupRewardMethod:
        from ..rewards.matrix_reward import MatrixReward

        args = self.args
        return MatrixReward(
            judge,
            **{name: getattr(args, name) for name in MATRIX_OPTIONS},
            **self._common_method_kwargs(),
        )
