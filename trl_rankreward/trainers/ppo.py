"""PPO with a learned critic on TRL's GRPO machinery (`advantage_estimator="gae"`): the config fields
(`CriticConfig`), the advantage and value math, and `PPOCritic`, which `base.GRPOTrainerBase` drives.

TRL still generates, computes the log-probs, the rewards and the clipped policy surrogate. `PPOCritic`
(1) after scoring, puts each completion's reward on its last token (minus an optional per-token KL penalty,
`kl_in_reward_coef`) and replaces TRL's group advantages by per-token GAE advantages, whitened over the whole
batch; tool-result tokens and unscored completions get none; (2) after the policy's backward on each micro-batch
(its graph freed, so peak memory is the larger model's, not the sum), trains the critic on the clipped value
loss with its own optimizer; (3) saves and restores the critic with every checkpoint. The rollout-time values
stay fixed for all optimizer steps on one rollout batch, which lets the value clip bite (docs/ppo.md).

On (B, T) completion tokens, `mask` 1 on the tokens the policy generated, Generalized Advantage Estimation
(Schulman et al., 2016, arXiv:1506.02438) over the masked-in tokens only (a tool result is skipped, as verl does):

    delta_t = r_t + gamma * V_next - V_t           (V after the last real token is 0)
    A_t     = delta_t + gamma * lam * A_next
    R_t     = A_t + V_t                            (the critic's regression target)
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import TrainerCallback
from transformers.utils import logging
from trl import GRPOConfig

from ..config_checks import CheckedConfig
from .critic import DeepSpeedCritic, TorchCritic, ValueModel, completion_values, load_kwargs, load_reference

ADVANTAGE_ESTIMATORS = ("group", "gae")
#: how TRL 1.16's `GRPOConfig.__post_init__` words its group-size rule (the error a G=1 "gae" config gets from it)
TRL_GROUP_SIZE_RULE = "GRPO requires at least 2 generations per prompt"


@dataclass
class CriticConfig(CheckedConfig):
    """Mixed in before `GRPOConfig`; the trainers' base builds the critic when `advantage_estimator="gae"`."""

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

    def base_post_init(self) -> None:
        """The estimator and the launch first, then TRL's `GRPOConfig.__post_init__` (`grpo_post_init`)."""
        if self.advantage_estimator not in ADVANTAGE_ESTIMATORS:
            raise ValueError(
                f"advantage_estimator must be one of {list(ADVANTAGE_ESTIMATORS)}, got {self.advantage_estimator!r}"
            )
        fsdp = bool(self.fsdp) or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
        if self.advantage_estimator == "gae" and fsdp:
            raise ValueError(
                "advantage_estimator='gae' trains the critic on one device, with DDP or with DeepSpeed (ZeRO-3 "
                "shards it); FSDP is not supported for the critic. Launch with DeepSpeed (accelerate_configs/"
                "zero3.yaml) or DDP, or use advantage_estimator='group' (GRPO)."
            )
        grpo_post_init(self)

    def check_config(self) -> None:
        for name in ("gamma", "lam"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("critic_learning_rate", "cliprange_value"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        path = self.critic_model_name_or_path
        if path and path.startswith((".", "/", "~")) and not os.path.isdir(os.path.expanduser(path)):
            raise ValueError(
                f"critic_model_name_or_path={path!r} does not exist (expected a local model folder or a Hub id like "
                "owner/name)"
            )
        if self.kl_in_reward_coef < 0:
            raise ValueError(f"kl_in_reward_coef must be >= 0, got {self.kl_in_reward_coef}")
        if self.advantage_estimator == "group" and self.kl_in_reward_coef:
            raise ValueError(
                f"kl_in_reward_coef={self.kl_in_reward_coef} needs advantage_estimator='gae' (the penalty is a "
                "per-token reward); with 'group' use TRL's beta (KL in the loss)"
            )


def grpo_post_init(config) -> None:
    """`GRPOConfig.__post_init__` with its group-size rule (for the group baseline, which the critic replaces) lifted
    for "gae" at G=1: that error is caught, and the checks TRL runs after it run here."""
    try:
        GRPOConfig.__post_init__(config)
    except ValueError as error:
        single = config.advantage_estimator == "gae" and config.num_generations == 1
        if not (single and str(error).startswith(TRL_GROUP_SIZE_RULE)):
            raise
        _grpo_checks_after_group_size(config)


def _grpo_checks_after_group_size(args: GRPOConfig) -> None:
    """What TRL 1.16's `GRPOConfig.__post_init__` checks after its group-size rule: the vLLM importance-sampling
    bounds, with the deprecated `vllm_importance_sampling_cap` moved to `_clip_max`."""
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


#: sums a 1-D tensor over every process (the identity on one process)
ReduceSum = Callable[[torch.Tensor], torch.Tensor]


def token_rewards(
    scores: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, kl_coef: float = 0.0
) -> torch.Tensor:
    """Per-token rewards (B, T): `scores` (B,) at each completion's last masked-in token, minus `kl_coef * kl` on
    every masked-in token (RLHF PPO's KL penalty). A completion with no masked-in token gets nothing."""
    mask = mask.float()
    rewards = torch.zeros_like(mask)
    positions = torch.arange(mask.size(1), device=mask.device).expand_as(mask)
    last = (positions * mask).argmax(dim=1)  # the highest masked-in position of each row
    rows = mask.sum(dim=1) > 0
    rewards[rows, last[rows]] = scores[rows].float()
    if kl is not None and kl_coef:
        rewards = rewards - kl_coef * kl.float() * mask
    return rewards


def generalized_advantages(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both (B, T) and zero where `mask` is 0 (module docstring). Masked-out tokens are
    stepped over: padding after a completion is episode end (V = 0), a tool result links the tokens beside it."""
    mask = mask.float()
    values = values.float() * mask
    rewards = rewards.float() * mask
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(running)
    for t in reversed(range(rewards.size(1))):
        real = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = real * (delta + gamma * lam * running) + (1 - real) * running
        next_value = real * values[:, t] + (1 - real) * next_value
        advantages[:, t] = running * real
    return advantages, (advantages + values) * mask


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def global_mean_std(x: torch.Tensor, mask: torch.Tensor, reduce_sum: ReduceSum) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (population) std of `x` over the masked-in tokens of every process, alike on every rank."""
    mask = mask.float()
    sums = reduce_sum(torch.stack([(x * mask).sum(), (x * x * mask).sum(), mask.sum()]).double())
    total, square, count = sums.tolist()
    count = max(count, 1.0)
    mean = total / count
    variance = max(square / count - mean * mean, 0.0)
    return torch.tensor(mean, device=x.device), torch.tensor(variance**0.5, device=x.device)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """(x - mean) / std on masked-in tokens, 0 elsewhere (`global_mean_std`'s, so all ranks whiten alike)."""
    return (x - mean) / (std + 1e-8) * mask


def clipped_value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, clip fraction): PPO's clipped value loss `0.5 * max((V - R)^2, (V_clip - R)^2)` over masked-in tokens,
    `V_clip = V_old + clamp(V - V_old, -clip, clip)`; the fraction: where the clipped term is the larger."""
    clipped = old_values + (new_values - old_values).clamp(-clip, clip)
    unclipped_loss = (new_values - returns) ** 2
    clipped_loss = (clipped - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(unclipped_loss, clipped_loss), mask)
    fraction = masked_mean((clipped_loss > unclipped_loss).float(), mask)
    return loss, fraction


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, reduce_sum: ReduceSum = lambda t: t
) -> float:
    """1 - Var(R - V) / Var(R) over the masked-in tokens of every process: 1 is a perfect critic, 0 one that
    predicts the mean; NaN when the returns do not vary."""
    _, returns_std = global_mean_std(returns, mask, reduce_sum)
    _, residual_std = global_mean_std(returns - values, mask, reduce_sum)
    if returns_std.item() == 0:
        return float("nan")
    return float(1.0 - residual_std**2 / returns_std**2)


logger = logging.get_logger(__name__)

#: the critic's folder inside every `checkpoint-N` of a "gae" run
CRITIC_DIR = "critic"


class PPOCritic(TrainerCallback):
    """The critic of one trainer, given its parts (`logps`: TRL's `_get_per_token_logps_and_entropies`; `ref_model`:
    TRL's, else loaded where `kl_in_reward_coef` needs it); its methods return their `ppo/` metrics."""

    def __init__(self, args, accelerator, policy, *, deepspeed: bool, reward_weights: torch.Tensor, logps,
                 ref_model=None, temperature: float = 1.0):  # fmt: skip
        self.args, self.accelerator, self.policy, self.deepspeed = args, accelerator, policy, deepspeed
        self.reward_weights, self.logps, self.temperature = reward_weights, logps, temperature
        critic = self._build()
        if args.activation_checkpointing:  # as the policy (TRL's default: on)
            critic.backbone.activation_checkpointing_enable(args.gradient_checkpointing_kwargs)
        for module in critic.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0  # deterministic values: old and new values differ by the update only
        critic.train()  # from_pretrained returns eval mode, where activation checkpointing is skipped
        engine = DeepSpeedCritic if deepspeed else TorchCritic
        self.engine = engine(critic, accelerator, args)
        self.model = self.engine.model
        self.reference = ref_model
        if args.kl_in_reward_coef and ref_model is None and not self._is_peft():
            self.reference = self._build_reference()
        source = args.critic_model_name_or_path or self._policy_path() or "a copy of the in-memory policy"
        logger.warning(
            f"trl-rankreward: PPO with a critic ({source}), gamma={args.gamma}, lam={args.lam}, "
            f"kl_in_reward_coef={args.kl_in_reward_coef}, beta={args.beta}"
        )

    def on_optimizer_step(self, args, state, control, **kwargs):
        """The critic's optimizer steps right after the policy's (once per optimizer step, all ranks)."""
        self.engine.optimizer_step()
        return control

    def _policy(self):
        return self.accelerator.unwrap_model(self.policy)

    def _policy_path(self) -> str | None:
        return getattr(self._policy().config, "_name_or_path", None) or None

    def _is_peft(self) -> bool:
        return hasattr(self._policy(), "peft_config")

    def _build(self) -> ValueModel:
        args, accelerator = self.args, self.accelerator
        path = args.critic_model_name_or_path or (None if self._is_peft() else self._policy_path())
        if self._is_peft() and not args.critic_model_name_or_path:
            path = self._policy().get_base_model().config._name_or_path
        if path:
            kwargs = load_kwargs(args, accelerator.distributed_type, dtype=self._policy().dtype,
                                 attn_implementation=self._policy().config._attn_implementation,
                                 of_policy=not args.critic_model_name_or_path)  # fmt: skip
            critic = ValueModel.from_pretrained(path, **kwargs)
            self._check_same_vocabulary(critic, path)
            return critic
        if self.deepspeed:  # ZeRO-3 has already sharded the policy's weights: nothing to copy
            raise ValueError(
                "Under DeepSpeed the critic is loaded from a path, but the policy was passed in memory without one; "
                "set critic_model_name_or_path (e.g. the policy's checkpoint)"
            )
        return ValueModel.from_policy(self._policy())

    def _check_same_vocabulary(self, critic: ValueModel, path: str) -> None:
        """The critic reads the policy's token ids: a model with another vocabulary would give silent nonsense."""
        policy = getattr(self._policy().config, "vocab_size", None)
        own = getattr(critic.backbone.config, "vocab_size", None)
        if policy is not None and own is not None and policy != own:
            raise ValueError(
                f"critic_model_name_or_path={path!r} has a vocabulary of {own} tokens, the policy {policy}: the critic "
                "reads the policy's token ids, so it needs the policy's tokenizer. Use a model of the same family "
                "(same tokenizer), or leave critic_model_name_or_path unset to start from the policy."
            )

    def _build_reference(self):
        path = self._policy_path()
        if not path:
            raise ValueError(
                "kl_in_reward_coef > 0 needs the reference model, loaded from the policy's path, but the policy was "
                "passed in memory without one; pass the model as a path (or set beta > 0 so TRL builds it)"
            )
        policy = self._policy()
        return load_reference(path, self.accelerator, self.args, dtype=policy.dtype,
                              attn_implementation=policy.config._attn_implementation,
                              temperature=self.temperature)  # fmt: skip

    def replace_advantages(self, output: dict, reward_columns: torch.Tensor) -> dict[str, float]:
        """TRL's group advantages -> per-token GAE advantages, from the gathered (B_total, n_funcs) `reward_columns`;
        adds `old_values`, `returns` and `value_mask` (the tokens the value loss regresses); the `ppo/` metrics."""
        args = self.args
        mask = generated_tokens(output)
        scores, scorable = self._local_scores(reward_columns, mask.size(0))
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad():
            values = self._values(ids, attention, output["prompt_ids"].size(1), mask.size(1)) * mask
            kl = self._kl_to_reference(output, ids, attention) if args.kl_in_reward_coef else None
        rewards = token_rewards(scores, mask, kl, args.kl_in_reward_coef)
        advantages, returns = generalized_advantages(rewards, values, mask, args.gamma, args.lam)
        # An unscored completion (its judging failed) carries no signal, and stays out of the whitening.
        scored = mask * scorable[:, None]
        advantages, returns = advantages * scored, returns * scored
        mean, std = global_mean_std(advantages, scored, self._reduce_sum)
        metrics = self._rollout_metrics(advantages, returns, values, scored, kl, mean, std)
        if args.whiten_advantages:
            advantages = masked_whiten(advantages, scored, mean, std)
        output.update(advantages=advantages, old_values=values, returns=returns, value_mask=scored)
        return metrics

    def _reduce_sum(self, x: torch.Tensor) -> torch.Tensor:
        return self.accelerator.reduce(x, reduction="sum")

    def _local_scores(self, columns: torch.Tensor, local_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This process's completions' scalar rewards (weighted sum of the columns) and which are scorable."""
        weights = self.reward_weights.to(columns.device).unsqueeze(0)
        scores = (columns * weights).nansum(dim=1)
        scorable = ~torch.isnan(columns).all(dim=1)
        start = self.accelerator.process_index * local_size
        return scores[start : start + local_size], scorable[start : start + local_size]

    def _values(self, ids, attention, prompt_length: int, completion_length: int) -> torch.Tensor:
        """Values of the completion states (B, T), computed in micro-batches like TRL's log-probs."""
        args = self.args
        chunk = args.per_device_train_batch_size if self.policy.training else args.per_device_eval_batch_size
        parts = [self.engine.values(ids[i : i + chunk], attention[i : i + chunk]) for i in range(0, ids.size(0), chunk)]
        return completion_values(torch.cat(parts), prompt_length, completion_length).float()

    def _kl_to_reference(self, output: dict, ids, attention) -> torch.Tensor:
        """log pi_old - log pi_ref per completion token (the k1 estimator of RLHF PPO's reward penalty)."""
        logps = self.logps
        length, chunk = output["completion_ids"].size(1), self.args.per_device_train_batch_size
        policy = output.get("old_per_token_logps")
        if policy is None:
            policy, _, _ = logps(self.policy, ids, attention, length, chunk)
        reference = output.get("ref_per_token_logps")
        if reference is None and self.reference is not None:
            reference, _, _ = logps(self.reference, ids, attention, length, chunk)
        elif reference is None:  # PEFT: the base model is the policy with its adapter off
            with self._policy().disable_adapter():
                reference, _, _ = logps(self.policy, ids, attention, length, chunk)
        return policy - reference

    def _rollout_metrics(self, advantages, returns, values, mask, kl, adv_mean, adv_std) -> dict[str, float]:
        reduce_sum = self._reduce_sum
        ret_mean, ret_std = global_mean_std(returns, mask, reduce_sum)
        metrics = {
            "ppo/advantage_mean": adv_mean.item(),
            "ppo/advantage_std": adv_std.item(),
            "ppo/return_mean": ret_mean.item(),
            "ppo/return_std": ret_std.item(),
            "ppo/value_mean": global_mean_std(values, mask, reduce_sum)[0].item(),
            "ppo/explained_variance": explained_variance(values, returns, mask, reduce_sum),
        }
        if kl is not None:
            metrics["ppo/kl_in_reward"] = global_mean_std(kl, mask, reduce_sum)[0].item()
        return metrics

    def train_on(self, micro_batch: dict, accumulation_steps: int) -> dict[str, float]:
        """The clipped value loss's backward on the micro-batch the policy just trained on; its metrics."""
        loss, metrics = self.value_loss(micro_batch)
        self.engine.backward(loss, accumulation_steps)
        return metrics

    def value_loss(self, inputs: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """PPO's clipped value loss on one micro-batch and its metrics (the caller runs its backward, if any)."""
        mask = inputs["value_mask"]
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        values = self.engine.values(ids, attention)
        new_values = completion_values(values, inputs["prompt_ids"].size(1), mask.size(1))
        loss, clip_fraction = clipped_value_loss(
            new_values.float(), inputs["old_values"], inputs["returns"], mask, self.args.cliprange_value
        )
        stats = self.accelerator.gather(torch.stack([loss.detach(), clip_fraction.detach()])[None]).mean(dim=0)
        return loss, {"ppo/value_loss": stats[0].item(), "ppo/value_clip_frac": stats[1].item()}

    def save(self, checkpoint: str) -> None:
        """The critic and its optimizer into `checkpoint/critic` (every process: DeepSpeed writes shards)."""
        self.engine.save(os.path.join(checkpoint, CRITIC_DIR))

    def load(self, checkpoint: str) -> None:
        folder = os.path.join(checkpoint, CRITIC_DIR)
        if not type(self.engine).saved(folder):
            other = "DeepSpeed" if isinstance(self.engine, TorchCritic) else "plain PyTorch/DDP"
            raise FileNotFoundError(
                f"Resuming PPO (advantage_estimator='gae') from {checkpoint}, which holds no critic that this launch "
                f"can read in {folder} (a run with advantage_estimator='group', plain TRL, or a {other} launch). "
                "Resume from a checkpoint of a 'gae' run launched the same way, or start a new run."
            )
        self.engine.load(folder)


def generated_tokens(batch: dict) -> torch.Tensor:
    """(B, T) float mask of the completion tokens the policy generated (tool results are not its actions)."""
    mask = batch["completion_mask"].float()
    return mask * batch["tool_mask"].float() if "tool_mask" in batch else mask

