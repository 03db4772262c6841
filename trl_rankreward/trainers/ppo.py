"""PPO with a learned critic on TRL's GRPOTrainer: `advantage_estimator="gae"`.

TRL 1.16 has no PPO trainer (its `PPOTrainer` and value-head models were removed), so the
package adds the critic to TRL's GRPO machinery instead of copying an old trainer: TRL still
generates (vLLM or transformers), computes old-policy and reference log-probs, the rewards
and the clipped policy surrogate (`loss_type`, `epsilon`, `beta`, `num_iterations`,
`steps_per_generation`). With `advantage_estimator="gae"` the mixin

1. after TRL scored the batch, runs the critic (`critic.ValueModel`) over prompt + completion,
   puts each completion's reward (the weighted sum of the reward columns) on its last token,
   minus an optional per-token KL penalty to the reference model (`kl_in_reward_coef`, classic
   RLHF PPO), and replaces TRL's group advantages by per-token GAE advantages (`advantages`),
   whitened over the whole batch on every process alike. Tool-result tokens (TRL's `tool_mask`)
   and completions no reward function scored get no advantage and no value target;
2. after the policy's backward on each micro-batch (its graph already freed, so the peak
   activation memory is the larger of the two models', not their sum), runs the critic's
   forward and the clipped value loss's backward, and steps the critic's own optimizer with the
   policy's (`critic_engine`: AdamW on one device or DDP; a second DeepSpeed engine, sharded
   like the policy, under DeepSpeed);
3. saves the critic and its optimizer in every checkpoint (`critic/`) and restores both on resume.

The rollout-time values (`old_values`) and returns stay fixed for all `steps_per_generation x
num_iterations` optimizer steps on one rollout batch: that is what lets the value clip bite.
No groups are needed: `num_generations=1` is allowed with "gae" (G > 1 works too). With
`advantage_estimator="group"` (the default of the judge-reward trainers) nothing here runs.

Defaults (`CriticConfig`): gamma 1.0 and lam 1.0 (verl's and OpenRLHF's defaults; see `lam`),
value clip 0.2, a critic learning rate of 9e-6 (OpenRLHF's PPO examples) with the run's Adam
betas, epsilon and weight decay. There is no value-loss weight: the critic has an optimizer of
its own, and Adam's update does not change when its loss is scaled, so `critic_learning_rate`
is the knob. Logged under `ppo/` (docs/metrics.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging
from trl import GRPOConfig, GRPOTrainer

from .advantages import (
    clipped_value_loss,
    explained_variance,
    generalized_advantages,
    global_mean_std,
    masked_whiten,
    token_rewards,
)
from .checkpoints import TiedWeightsOnResume
from .critic import ValueModel, completion_values
from .critic_engine import DeepSpeedCritic, TorchCritic
from .judge_eval import JudgeEvalConfig, add_judge_evaluation
from .model_loading import load_kwargs, load_reference
from .sampling import EpochSeededRepeatSampler

logger = logging.get_logger(__name__)

CRITIC_DIR = "critic"
ADVANTAGE_ESTIMATORS = ("group", "gae")


class _OneGeneration(int):
    """The int 1, seen by `GRPOConfig.__post_init__` only: its rule "at least 2 generations per
    prompt" exists for the group baseline, which a critic replaces. Replaced by a plain 1 after."""

    def __lt__(self, other):
        return False if other == 2 else int(self) < other


@dataclass
class CriticConfig:
    """PPO-with-critic fields, mixed into the package's GRPO-based configs (see `trainers.ppo`)."""

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

    def __post_init__(self):
        if self.advantage_estimator not in ADVANTAGE_ESTIMATORS:
            raise ValueError(
                f"advantage_estimator must be one of {list(ADVANTAGE_ESTIMATORS)}, got {self.advantage_estimator!r}"
            )
        if self.advantage_estimator == "gae" and _fsdp_launch(self):
            raise ValueError(
                "advantage_estimator='gae' trains the critic on one device, with DDP or with DeepSpeed (ZeRO-3 "
                "shards it); FSDP is not supported for the critic. Launch with DeepSpeed (accelerate_configs/"
                "zero3.yaml) or DDP, or use advantage_estimator='group' (GRPO)."
            )
        single = self.advantage_estimator == "gae" and self.num_generations == 1
        if single:
            self.num_generations = _OneGeneration(1)
        super().__post_init__()
        if single:
            self.num_generations = 1
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


def _fsdp_launch(args) -> bool:
    """FSDP asked for, by the config or by `accelerate launch` (before TrainingArguments reads it)."""
    return bool(args.fsdp) or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"


def critic_card_settings(args: CriticConfig) -> dict:
    """The advantage estimator, and with "gae" the critic's settings, for the model card."""
    if args.advantage_estimator != "gae":
        return {"advantage_estimator": args.advantage_estimator}
    names = ("advantage_estimator", "critic_model_name_or_path", "critic_learning_rate", "gamma", "lam",
             "cliprange_value", "whiten_advantages", "kl_in_reward_coef")  # fmt: skip
    return {name: getattr(args, name) for name in names}


def training_algorithm(args: CriticConfig) -> str:
    """How the policy was optimized, in words for the model card."""
    if args.advantage_estimator == "gae":
        return "PPO with a learned critic (per-token GAE advantages)"
    return "GRPO (group-relative advantages)"


class CriticPPOMixin:
    """Adds the critic to a GRPOTrainer subclass; put it first among the bases (see module docstring).

    A subclass that overrides `_calculate_rewards` without calling super passes its result
    through `self._keep_rewards(...)`, which the critic reads.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.critic = self._critic_engine = None
        self._kept_rewards: torch.Tensor | None = None
        self._micro_batch: dict | None = None
        if self.args.advantage_estimator == "gae":
            self._init_critic()

    # ---- setup ------------------------------------------------------------------------------------

    def _init_critic(self) -> None:
        args = self.args
        critic = self._build_critic()
        if args.activation_checkpointing:  # as the policy (TRL's default: on)
            critic.backbone.activation_checkpointing_enable(args.gradient_checkpointing_kwargs)
        for module in critic.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0  # deterministic values: old and new values differ by the update only
        critic.train()  # from_pretrained returns eval mode, where activation checkpointing is skipped
        engine = DeepSpeedCritic if self.is_deepspeed_enabled else TorchCritic
        self._critic_engine = engine(critic, self.accelerator, args)
        self.critic = self._critic_engine.model
        self.add_callback(_CriticStep(self))
        if args.kl_in_reward_coef and self.ref_model is None and not self._is_peft():
            self.ref_model = self._build_reference()
        logger.warning(
            f"trl-rankreward: PPO with a critic ({self._critic_source()}), gamma={args.gamma}, lam={args.lam}, "
            f"kl_in_reward_coef={args.kl_in_reward_coef}, beta={args.beta}"
        )

    def _critic_source(self) -> str:
        return self.args.critic_model_name_or_path or self._policy_path() or "a copy of the in-memory policy"

    def _policy(self):
        return self.accelerator.unwrap_model(self.model)

    def _policy_path(self) -> str | None:
        return getattr(self._policy().config, "_name_or_path", None) or None

    def _build_critic(self) -> ValueModel:
        path = self.args.critic_model_name_or_path or (None if self._is_peft() else self._policy_path())
        if self._is_peft() and not self.args.critic_model_name_or_path:
            path = self._policy().get_base_model().config._name_or_path
        if path:
            kwargs = load_kwargs(self.args, self.accelerator.distributed_type, dtype=self._policy().dtype,
                                 attn_implementation=self._policy().config._attn_implementation,
                                 of_policy=not self.args.critic_model_name_or_path)  # fmt: skip
            critic = ValueModel.from_pretrained(path, **kwargs)
            self._check_same_vocabulary(critic, path)
            return critic
        if self.is_deepspeed_enabled:  # ZeRO-3 has already sharded the policy's weights: nothing to copy
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
                              attn_implementation=policy.config._attn_implementation, temperature=self.temperature)  # fmt: skip

    def _is_peft(self) -> bool:
        return hasattr(self._policy(), "peft_config")

    # ---- rollout: values, per-token rewards, GAE ------------------------------------------------

    def _keep_rewards(self, columns: torch.Tensor) -> torch.Tensor:
        """Remember the gathered reward columns (B_total, n_funcs) of this batch for the critic."""
        self._kept_rewards = columns
        return columns

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        return self._keep_rewards(super()._calculate_rewards(inputs, prompts, completions, completion_ids_list))

    def _generate_and_score_completions(self, inputs):
        self._kept_rewards = None
        output = super()._generate_and_score_completions(inputs)
        if self.critic is not None:
            self._replace_advantages(output)
        return output

    def _replace_advantages(self, output: dict) -> None:
        """TRL's group advantages -> per-token GAE advantages; adds `old_values`, `returns` and
        `value_mask` (the tokens the value loss regresses: generated, not tool output, scored)."""
        args, mode = self.args, "train" if self.model.training else "eval"
        mask = generated_tokens(output)
        scores, scorable = self._local_scores(mask.size(0))
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad():
            values = self._critic_values(ids, attention, output["prompt_ids"].size(1), mask.size(1)) * mask
            kl = self._kl_to_reference(output, ids, attention) if args.kl_in_reward_coef else None
        rewards = token_rewards(scores, mask, kl, args.kl_in_reward_coef)
        advantages, returns = generalized_advantages(rewards, values, mask, args.gamma, args.lam)
        # A completion no reward function scored (e.g. its judging failed) carries no signal: no advantage,
        # no value target, and it stays out of the whitening statistics.
        scored = mask * scorable[:, None]
        advantages, returns = advantages * scored, returns * scored
        mean, std = global_mean_std(advantages, scored, self._reduce_sum)
        self._log_rollout(mode, advantages, returns, values, scored, kl, mean, std)
        if args.whiten_advantages:
            advantages = masked_whiten(advantages, scored, mean, std)
        output.update(advantages=advantages, old_values=values, returns=returns, value_mask=scored)

    def _reduce_sum(self, x: torch.Tensor) -> torch.Tensor:
        return self.accelerator.reduce(x, reduction="sum")

    def _local_scores(self, local_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This process's completions' scalar rewards (weighted sum of the columns) and which are scorable."""
        if self._kept_rewards is None:
            raise RuntimeError(
                f"{type(self).__name__} overrides _calculate_rewards without passing its result through "
                "self._keep_rewards(...): the critic has no rewards to learn from"
            )
        columns = self._kept_rewards
        weights = self.reward_weights.to(columns.device).unsqueeze(0)
        scores = (columns * weights).nansum(dim=1)
        scorable = ~torch.isnan(columns).all(dim=1)
        start = self.accelerator.process_index * local_size
        return scores[start : start + local_size], scorable[start : start + local_size]

    def _critic_values(self, ids, attention, prompt_length: int, completion_length: int) -> torch.Tensor:
        """Values of the completion states (B, T), computed in micro-batches like TRL's log-probs."""
        chunk = self.args.per_device_train_batch_size if self.model.training else self.args.per_device_eval_batch_size
        engine = self._critic_engine
        parts = [engine.values(ids[i : i + chunk], attention[i : i + chunk]) for i in range(0, ids.size(0), chunk)]
        return completion_values(torch.cat(parts), prompt_length, completion_length).float()

    def _kl_to_reference(self, output: dict, ids, attention) -> torch.Tensor:
        """log pi_old - log pi_ref per completion token (the k1 estimator of RLHF PPO's reward penalty)."""
        length, chunk = output["completion_ids"].size(1), self.args.per_device_train_batch_size
        policy = output.get("old_per_token_logps")
        if policy is None:
            policy, _, _ = self._get_per_token_logps_and_entropies(self.model, ids, attention, length, chunk)
        reference = output.get("ref_per_token_logps")
        if reference is None and self.ref_model is not None:
            reference, _, _ = self._get_per_token_logps_and_entropies(self.ref_model, ids, attention, length, chunk)
        elif reference is None:  # PEFT: the base model is the policy with its adapter off
            with self._policy().disable_adapter():
                reference, _, _ = self._get_per_token_logps_and_entropies(self.model, ids, attention, length, chunk)
        return policy - reference

    def _log_rollout(self, mode, advantages, returns, values, mask, kl, adv_mean, adv_std) -> None:
        metrics, reduce_sum = self._metrics[mode], self._reduce_sum
        ret_mean, ret_std = global_mean_std(returns, mask, reduce_sum)
        metrics["ppo/advantage_mean"].append(adv_mean.item())
        metrics["ppo/advantage_std"].append(adv_std.item())
        metrics["ppo/return_mean"].append(ret_mean.item())
        metrics["ppo/return_std"].append(ret_std.item())
        metrics["ppo/value_mean"].append(global_mean_std(values, mask, reduce_sum)[0].item())
        metrics["ppo/explained_variance"].append(explained_variance(values, returns, mask, reduce_sum))
        if kl is not None:
            metrics["ppo/kl_in_reward"].append(global_mean_std(kl, mask, reduce_sum)[0].item())

    # ---- training: the critic's update after the policy's ---------------------------------------

    def _prepare_inputs(self, generation_batch):
        """TRL's micro-batch for this step, kept for the critic's update in `training_step`."""
        self._micro_batch = super()._prepare_inputs(generation_batch)
        return self._micro_batch

    def training_step(self, model, inputs, num_items_in_batch=None):
        """The policy's forward and backward (TRL), then the critic's on the same micro-batch."""
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.critic is not None:
            value_loss = self._value_loss(self._micro_batch, "train")
            self._critic_engine.backward(value_loss, self.current_gradient_accumulation_steps)
        return loss

    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        if self.critic is not None and not self.model.training:
            with torch.no_grad():
                self._value_loss(inputs, "eval")
        return loss

    def _value_loss(self, inputs: dict, mode: str) -> torch.Tensor:
        """PPO's clipped value loss on one micro-batch (logged; the caller runs its backward)."""
        mask = inputs["value_mask"]
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        values = self._critic_engine.values(ids, attention)
        new_values = completion_values(values, inputs["prompt_ids"].size(1), mask.size(1))
        loss, clip_fraction = clipped_value_loss(
            new_values.float(), inputs["old_values"], inputs["returns"], mask, self.args.cliprange_value
        )
        stats = self.accelerator.gather(torch.stack([loss.detach(), clip_fraction.detach()])[None]).mean(dim=0)
        self._metrics[mode]["ppo/value_loss"].append(stats[0].item())
        self._metrics[mode]["ppo/value_clip_frac"].append(stats[1].item())
        return loss

    # ---- checkpoints ------------------------------------------------------------------------------

    def _save_checkpoint(self, model, trial):
        # Before TRL's save, which writes trainer_state.json last: a checkpoint with it holds the critic.
        if self._critic_engine is not None:
            step_dir = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            self._critic_engine.save(os.path.join(self._get_output_dir(trial=trial), step_dir, CRITIC_DIR))
        super()._save_checkpoint(model, trial)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None or self.critic is None:
            return
        folder = os.path.join(checkpoint, CRITIC_DIR)
        if not type(self._critic_engine).saved(folder):
            other = "DeepSpeed" if isinstance(self._critic_engine, TorchCritic) else "plain PyTorch/DDP"
            raise FileNotFoundError(
                f"Resuming PPO (advantage_estimator='gae') from {checkpoint}, which holds no critic that this launch "
                f"can read in {folder} (a run with advantage_estimator='group', plain TRL, or a {other} launch). "
                "Resume from a checkpoint of a 'gae' run launched the same way, or start a new run."
            )
        self._critic_engine.load(folder)


def generated_tokens(batch: dict) -> torch.Tensor:
    """(B, T) float mask of the completion tokens the policy generated: TRL's `completion_mask`
    times its `tool_mask` when tools ran (tool results are not the policy's actions)."""
    mask = batch["completion_mask"].float()
    return mask * batch["tool_mask"].float() if "tool_mask" in batch else mask


class _CriticStep(TrainerCallback):
    """Steps the critic's optimizer right after the policy's (once per optimizer step, all ranks)."""

    def __init__(self, trainer: CriticPPOMixin):
        self.trainer = trainer

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.trainer._critic_engine.optimizer_step()
        return control


@dataclass
class CriticPPOConfig(JudgeEvalConfig, CriticConfig, GRPOConfig):
    """`GRPOConfig` plus the critic (`CriticConfig`), with "gae" as the default: PPO for plain TRL reward functions."""

    advantage_estimator: str = field(
        default="gae",
        metadata={"help": "'gae': PPO with a learned critic; 'group': GRPO.", "choices": list(ADVANTAGE_ESTIMATORS)},
    )


class CriticPPOTrainer(TiedWeightsOnResume, CriticPPOMixin, GRPOTrainer):
    """PPO with a learned critic for any TRL reward functions: `GRPOTrainer`'s arguments, a `CriticPPOConfig`.

    trainer = CriticPPOTrainer("Qwen/Qwen3-0.6B", reward_funcs=my_reward, args=CriticPPOConfig(
        output_dir="out", num_generations=1), train_dataset=dataset)
    """

    def __init__(self, model, reward_funcs, args: CriticPPOConfig | None = None, **kwargs):
        if not isinstance(args, CriticConfig):
            raise TypeError(f"CriticPPOTrainer needs args=CriticPPOConfig(...), got {type(args).__name__}")
        super().__init__(model, reward_funcs=reward_funcs, args=args, **kwargs)
        add_judge_evaluation(self)

    def _get_train_sampler(self, dataset=None):
        """TRL's sampler, reseeded per epoch so that resuming keeps the data order (see `sampling`)."""
        return EpochSeededRepeatSampler.like(super()._get_train_sampler(dataset))


__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "CRITIC_DIR",
    "CriticConfig",
    "CriticPPOConfig",
    "CriticPPOMixin",
    "CriticPPOTrainer",
    "critic_card_settings",
    "training_algorithm",
]
