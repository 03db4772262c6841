"""R-Align GenRM training on TRL's GRPOTrainer (R-Align, Sec. 4; docs/references.md).

The policy IS the generative reward model: on preference pairs with golden rationales it writes a rationale and
`\\boxed{A|B}`; the reward is R-Align's rationale-aware table (a MetaRM asked about label-correct answers) or,
with `reward_mode="outcome"`, GenRM-RLVR's. `r_align_release`: the authors' prompt, layout and MetaRM. The paper
optimizes with PPO (Sec. 5, App. D), so `advantage_estimator="gae"` is the default.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from trl import GRPOConfig

from ..evaluation.genrm_eval import GenRMCounts
from ..judging.server_settings import METARM, MetaRMFields
from ..rewards.genrm_reward import GenRMPairwiseReward
from ..rewards.ralign_release import RAlignRelease, build_meta_judge
from ..rewards.ralign_reward import OWN_PROTOCOL, REWARD_MODES, GenRMSample, RAlignReward, RAlignRewardValues
from ..user_errors import ConfigError
from .base import GRPOTrainerBase
from .group_scoring import combined_snapshot, completion_text
from .judge_eval import JudgeEvalConfig
from .model_card import describe_judge, redact_urls
from .ppo import ADVANTAGE_ESTIMATORS, CriticConfig, critic_card_settings

GENRM_COLUMNS = ("prompt", "pair_prompt", "display_order", "display_label")
PAIR_COLUMNS = ("prompt", "response_a", "response_b", "label", "golden_rationale")


@dataclass
class RAlignGenRMConfig(MetaRMFields, JudgeEvalConfig, CriticConfig, GRPOConfig):
    """GRPOConfig plus R-Align's reward, MetaRM (`MetaRMFields`, shared with `eval-genrm`) and PPO-critic settings
    (defaults in docs/ralign.md)."""

    advantage_estimator: str = field(
        default="gae",
        metadata={
            "help": "'gae': PPO with a learned critic, as the paper (Sec. 5); 'group': GRPO's group baseline.",
            "choices": list(ADVANTAGE_ESTIMATORS),
        },
    )
    reward_mode: str = field(
        default="ralign",
        metadata={"help": "'ralign': R_overall (label AND MetaRM-consistent rationale); 'outcome': GenRM-RLVR."},
    )
    reward_correct_and_consistent: float = field(
        default=RAlignRewardValues.correct_and_consistent,
        metadata={
            "help": "Reward of a correct label with a consistent rationale (every correct label in 'outcome' mode)."
        },
    )
    reward_correct_but_spurious: float = field(
        default=RAlignRewardValues.correct_but_spurious,
        metadata={"help": "Reward of a correct label whose rationale the MetaRM rejects."},
    )
    reward_wrong: float = field(default=RAlignRewardValues.wrong, metadata={"help": "Reward of a wrong label."})
    reward_invalid_format: float = field(
        default=RAlignRewardValues.invalid_format,
        metadata={"help": "Reward of an output without a single valid \\boxed{A|B} verdict."},
    )
    display_seed: int | None = field(
        default=None, metadata={"help": "Seed of the A/B display coin flip; None: use `seed`."}
    )
    r_align_release: str | None = field(
        default=None,
        metadata={
            "help": "Checkout of github.com/lyn22333/R-Align: train on the authors' GenRM prompt and layout "
            "(dataset order, first-box verdict) with their MetaRM prompt and parse, as `eval-genrm "
            "--r_align_release` evaluates (docs/ralign.md). None: our prompt and seeded display order."
        },
    )

    def check_config(self) -> None:
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {self.reward_mode!r}")
        self.reward_values()  # validates the table

    def reward_values(self) -> RAlignRewardValues:
        return RAlignRewardValues(
            correct_and_consistent=self.reward_correct_and_consistent,
            correct_but_spurious=self.reward_correct_but_spurious,
            wrong=self.reward_wrong,
            invalid_format=self.reward_invalid_format,
        )


def build_genrm_prompts(dataset, seed: int, protocol=OWN_PROTOCOL):
    """Add the GenRM columns (`GENRM_COLUMNS`, `prompt` replaced by the GenRM messages) to a pairwise dataset, as
    `protocol.genrm_row` writes them; the display order is a function of (seed, pair) only."""
    missing = [c for c in PAIR_COLUMNS if c not in dataset.column_names]
    if missing:
        raise ConfigError(
            f"R-Align needs the pairwise columns {list(PAIR_COLUMNS)}; the dataset lacks {missing}. "
            "Build it with `trl-rankreward data` (helpsteer3 / rewardbench2 / ppe) and fill golden rationales."
        )
    return dataset.map(lambda row: protocol.genrm_row(row, seed), desc="GenRM prompts")


class RAlignRewardFunction:
    """TRL reward function: R-Align rewards for a batch of GenRM completions, and their metrics."""

    __name__ = "ralign"

    def __init__(self, method: RAlignReward):
        self.method = method

    async def __call__(self, prompts, completions, *, response_a, response_b, label, golden_rationale, pair_prompt,
                       display_order, log_metric=None, trainer_state=None, **_):  # fmt: skip
        samples = [
            GenRMSample(p, a, b, lab, gold, completion_text(c), order)
            for p, a, b, lab, gold, c, order in zip(
                pair_prompt, response_a, response_b, label, golden_rationale, completions, display_order, strict=True
            )
        ]
        before = self.method.meta_calls
        step = trainer_state.global_step if trainer_state is not None else 0
        scores = await self.method.score(samples, step=step)
        if log_metric is not None:
            for name, value in step_metrics([s.status for s in scores], self.method.meta_calls - before).items():
                log_metric(name, value)
        return [s.reward for s in scores]


def step_metrics(statuses: list[str], meta_calls: int) -> dict[str, float]:
    """`ralign/...` metrics of one batch; a rate with an empty denominator is left out."""
    c = GenRMCounts.from_statuses(statuses)
    out = {
        "ralign/label_acc": c.l_acc,
        "ralign/format_invalid": c.parse_failures / c.samples if c.samples else None,
        "ralign/spurious_rate": c.s_corr,
        "ralign/meta_calls": float(meta_calls),
        "ralign/meta_failures": float(c.meta_failures),
    }
    return {k: float(v) for k, v in out.items() if v is not None}


class RAlignGenRMTrainer(GRPOTrainerBase):
    """Train a GenRM with R-Align's (or GenRM-RLVR's) reward on pairwise datasets. `meta_judge`: a judge, or a
    `(request) -> bool` hook (a `ReleaseMetaRequest` with `r_align_release`); None: built from `args.metarm_*`."""

    # the model it trains is the GenRM judge of the `genrm` reward method
    _tag_names = [*GRPOTrainerBase._tag_names, "r-align", GenRMPairwiseReward.name]
    _paper = {"title": "R-Align", "citation": RAlignReward.citation}

    def __init__(self, model, args: RAlignGenRMConfig, train_dataset=None, eval_dataset=None, *,
                 meta_judge=None, **kwargs):  # fmt: skip
        if not isinstance(args, RAlignGenRMConfig):
            raise TypeError(f"args must be a RAlignGenRMConfig, got {type(args).__name__}")
        if "reward_funcs" in kwargs:
            raise TypeError("RAlignGenRMTrainer builds its own reward function; configure it through args instead")
        if args.reward_mode == "ralign" and meta_judge is None and not args.metarm_base_urls:
            raise ConfigError(
                "reward_mode='ralign' needs a MetaRM: set metarm_base_urls and metarm_model "
                "(an OpenAI-compatible server), pass meta_judge=..., or use reward_mode='outcome'"
            )
        release = RAlignRelease.load(args.r_align_release) if args.r_align_release else None
        if args.reward_mode == "ralign" and meta_judge is None:
            meta_judge = build_meta_judge(METARM.settings(args), release)
        protocol = release or OWN_PROTOCOL
        self.ralign = RAlignReward(meta_judge, mode=args.reward_mode, values=args.reward_values(), protocol=protocol)
        seed = args.seed if args.display_seed is None else args.display_seed
        train_dataset = self._with_genrm_prompts(train_dataset, seed, protocol)
        eval_dataset = self._with_genrm_prompts(eval_dataset, seed, protocol)
        reward_funcs = [RAlignRewardFunction(self.ralign)]
        super().__init__(model, reward_funcs, args, train_dataset=train_dataset, eval_dataset=eval_dataset, **kwargs)

    def _card_section(self, dataset: str | None) -> dict:
        args, judge = self.args, self.ralign.meta_judge
        used = combined_snapshot([judge])  # zeros for a hook without a ledger
        usage = {"MetaRM calls": used.calls, "MetaRM prompt tokens": used.prompt_tokens,
                 "MetaRM completion tokens": used.completion_tokens, "training steps": self.state.global_step}  # fmt: skip
        settings = {
            "reward_mode": args.reward_mode,
            **asdict(args.reward_values()),
            "metarm_model": args.metarm_model,
            "r_align_release": "authors' prompts" if args.r_align_release else "ours",
            "num_generations": args.num_generations,
            "learning_rate": args.learning_rate,
            **critic_card_settings(args),
        }
        judge_text = redact_urls(describe_judge(judge), list(args.metarm_base_urls or []))
        return dict(method="ralign", settings=settings, judge=judge_text, dataset=dataset, usage=usage, method_state={})

    @staticmethod
    def _with_genrm_prompts(dataset, seed: int, protocol):
        if dataset is None or all(c in dataset.column_names for c in GENRM_COLUMNS):
            return dataset
        return build_genrm_prompts(dataset, seed, protocol)


__all__ = ["RAlignGenRMConfig", "RAlignGenRMTrainer", "RAlignRewardFunction", "build_genrm_prompts", "step_metrics"]
