"""`CriticConfig`: the PPO-with-critic fields every config of the package has (every trainer can run
PPO, `trainers.ppo`), and `critic_post_init`, the critic's checks around TRL's `GRPOConfig.__post_init__`.

The critic has an optimizer of its own (the run's Adam betas, epsilon and weight decay) and no value-loss
weight: Adam's update does not change when its loss is scaled, so `critic_learning_rate` is the knob (9e-6,
as OpenRLHF's PPO examples).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field

from trl import GRPOConfig

ADVANTAGE_ESTIMATORS = ("group", "gae")
#: how TRL 1.16's `GRPOConfig.__post_init__` words its group-size rule (the error a G=1 "gae" config gets from it)
TRL_GROUP_SIZE_RULE = "GRPO requires at least 2 generations per prompt"


@dataclass
class CriticConfig:
    """Mixed in before `GRPOConfig`; the trainers' base (`base.GRPOTrainerBase`) builds the critic when
    `advantage_estimator="gae"`."""

    advantage_estimator: str = field(
        default="group",
        metadata={
            "help": "'group': GRPO's group-relative advantages (TRL). 'gae': PPO with a learned critic "
            "(per-token GAE; works with num_generations=1).",
            "choices": list(ADVANTAGE_ESTIMATORS),
        },
    )
    critic_model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Causal LM whose backbone initializes the critic (Hub id or folder). None: the policy's own "
            "checkpoint (or a copy of an in-memory policy)."
        },
    )
    critic_learning_rate: float = field(
        default=9e-6, metadata={"help": "AdamW learning rate of the critic (constant; no warm-up or decay)."}
    )
    gamma: float = field(default=1.0, metadata={"help": "GAE discount factor over completion tokens."})
    lam: float = field(
        default=1.0,
        metadata={
            "help": "GAE lambda. 1.0 (verl's and OpenRLHF's default): every token's advantage is the reward-to-go "
            "minus its value, so the final reward reaches the first token at once. Below 1 the reward reaches token "
            "t of an L-token completion scaled by about lam^(L-1-t) until the critic fits (0.95^100 < 1%)."
        },
    )
    cliprange_value: float = field(
        default=0.2, metadata={"help": "Clip range of the value update around the rollout-time values."}
    )
    whiten_advantages: bool = field(
        default=True, metadata={"help": "Normalize the GAE advantages to mean 0, std 1 over the batch."}
    )
    kl_in_reward_coef: float = field(
        default=0.0,
        metadata={
            "help": "Per-token KL penalty to the reference model folded into the reward (classic RLHF PPO, e.g. "
            "0.05); independent of TRL's KL-in-loss `beta`."
        },
    )


def critic_post_init(config) -> None:
    """The critic's checks, with TRL's `GRPOConfig.__post_init__` (`grpo_post_init`) in between: a config's
    `__post_init__` calls this first."""
    if config.advantage_estimator not in ADVANTAGE_ESTIMATORS:
        raise ValueError(
            f"advantage_estimator must be one of {list(ADVANTAGE_ESTIMATORS)}, got {config.advantage_estimator!r}"
        )
    # FSDP asked for by the config or by `accelerate launch` (before TrainingArguments reads it)
    fsdp = bool(config.fsdp) or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
    if config.advantage_estimator == "gae" and fsdp:
        raise ValueError(
            "advantage_estimator='gae' trains the critic on one device, with DDP or with DeepSpeed (ZeRO-3 "
            "shards it); FSDP is not supported for the critic. Launch with DeepSpeed (accelerate_configs/"
            "zero3.yaml) or DDP, or use advantage_estimator='group' (GRPO)."
        )
    grpo_post_init(config)
    for name in ("gamma", "lam"):
        if not 0.0 <= getattr(config, name) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {getattr(config, name)}")
    for name in ("critic_learning_rate", "cliprange_value"):
        if not getattr(config, name) > 0:
            raise ValueError(f"{name} must be > 0, got {getattr(config, name)}")
    path = config.critic_model_name_or_path
    if path and path.startswith((".", "/", "~")) and not os.path.isdir(os.path.expanduser(path)):
        raise ValueError(
            f"critic_model_name_or_path={path!r} does not exist (expected a local model folder or a Hub id like "
            "owner/name)"
        )
    if config.kl_in_reward_coef < 0:
        raise ValueError(f"kl_in_reward_coef must be >= 0, got {config.kl_in_reward_coef}")
    if config.advantage_estimator == "group" and config.kl_in_reward_coef:
        raise ValueError(
            f"kl_in_reward_coef={config.kl_in_reward_coef} needs advantage_estimator='gae' (the penalty is a "
            "per-token reward); with 'group' use TRL's beta (KL in the loss)"
        )


def grpo_post_init(config) -> None:
    """`GRPOConfig.__post_init__`, with its group-size rule lifted for PPO at `num_generations=1`.

    TRL's rule "at least 2 generations per prompt" serves the group baseline, which the critic
    replaces; TRL's trainer itself runs at G=1 (its sampler, generation and batch checks take any
    G that divides the batch, and 1 always does). The rule is the last group check of TRL's
    post-init, so for a "gae" config at G=1 its error is caught, and the checks TRL would have
    run after it (`_grpo_checks_after_group_size`) run here. Every other config, and every other
    error, is TRL's as it stands.
    """
    try:
        GRPOConfig.__post_init__(config)
    except ValueError as error:
        single = config.advantage_estimator == "gae" and config.num_generations == 1
        if not (single and str(error).startswith(TRL_GROUP_SIZE_RULE)):
            raise
        _grpo_checks_after_group_size(config)


def _grpo_checks_after_group_size(args: GRPOConfig) -> None:
    """What TRL 1.16's `GRPOConfig.__post_init__` checks after its group-size rule (trl/trainer/grpo_config.py):
    the vLLM importance-sampling bounds, with the deprecated `vllm_importance_sampling_cap` moved to `_clip_max`."""
    if args.vllm_importance_sampling_cap is not None:
        warnings.warn(
            "vllm_importance_sampling_cap is deprecated in TRL (removal planned for 2.0); its value is used as "
            "vllm_importance_sampling_clip_max, which is the setting to use instead",
            FutureWarning,
            stacklevel=4,
        )
        args.vllm_importance_sampling_clip_max = args.vllm_importance_sampling_cap
    low, high = args.vllm_importance_sampling_clip_min, args.vllm_importance_sampling_clip_max
    if low is not None and high is not None and low >= high:
        raise ValueError(
            f"vllm_importance_sampling_clip_min={low} is not below vllm_importance_sampling_clip_max={high}; "
            "the lower bound must be the smaller"
        )
    truncate = args.vllm_importance_sampling_mode in ("token_truncate", "sequence_truncate")
    if args.vllm_importance_sampling_correction and truncate and low is None and high is None:
        raise ValueError(
            f"vllm_importance_sampling_mode={args.vllm_importance_sampling_mode!r} truncates the importance "
            "weights, so it needs a bound: set vllm_importance_sampling_clip_min or vllm_importance_sampling_clip_max"
        )


def critic_card_settings(args: CriticConfig) -> dict:
    """The advantage estimator, and with "gae" the critic's settings, for the model card."""
    if args.advantage_estimator != "gae":
        return {"advantage_estimator": args.advantage_estimator}
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(CriticConfig)}


def training_algorithm(args: CriticConfig) -> str:
    """How the policy was optimized, in words for the model card."""
    if args.advantage_estimator == "gae":
        return "PPO with a learned critic (per-token GAE advantages)"
    return "GRPO (group-relative advantages)"
