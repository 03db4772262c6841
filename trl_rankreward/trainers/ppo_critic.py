"""The learned critic of PPO on TRL's GRPO machinery (`advantage_estimator="gae"`), driven by `GRPOTrainerBase`.

TRL still generates, computes the old-policy and reference log-probs, the rewards and the
clipped policy surrogate. `PPOCritic`

1. after TRL scored the batch (`replace_advantages`), runs the critic (`critic.ValueModel`) over
   prompt + completion, puts each completion's reward (the weighted sum of the reward columns)
   on its last token, minus an optional per-token KL penalty to the reference model
   (`kl_in_reward_coef`, classic RLHF PPO), and replaces TRL's group advantages by per-token GAE
   advantages, whitened over the whole batch on every process alike. Tool-result tokens (TRL's
   `tool_mask`) and completions no reward function scored get no advantage and no value target;
2. after the policy's backward on each micro-batch (`train_on`; its graph already freed, so the
   peak activation memory is the larger of the two models', not their sum), runs the critic's
   forward and the clipped value loss's backward, and steps the critic's own optimizer with the
   policy's (`critic_engine`: AdamW on one device or DDP; a second DeepSpeed engine, sharded
   like the policy, under DeepSpeed);
3. saves the critic and its optimizer in every checkpoint (`critic/`) and restores both on resume.

The rollout-time values (`old_values`) and returns stay fixed for all `steps_per_generation x
num_iterations` optimizer steps on one rollout batch: that is what lets the value clip bite.
Logged under `ppo/` (docs/metrics.md).
"""

from __future__ import annotations

import os

import torch
from transformers import TrainerCallback
from transformers.utils import logging

from .advantages import (
    clipped_value_loss,
    explained_variance,
    generalized_advantages,
    global_mean_std,
    masked_whiten,
    token_rewards,
)
from .critic import ValueModel, completion_values
from .critic_engine import DeepSpeedCritic, TorchCritic
from .model_loading import load_kwargs, load_reference

logger = logging.get_logger(__name__)

#: the critic's folder inside every `checkpoint-N` of a "gae" run
CRITIC_DIR = "critic"


class PPOCritic:
    """The critic of one trainer, built from explicit collaborators and fed its batches (module docstring).
    It writes nothing into the trainer: its methods return their `ppo/` metrics for the trainer to log.

    Args:
        args: the config (its `CriticConfig` fields, and TRL's batch sizes and activation checkpointing).
        accelerator: the trainer's `Accelerator`.
        policy: the trainer's policy model (its `model`; its `training` flag says train or eval).
        deepspeed: whether the launch uses DeepSpeed.
        reward_weights: TRL's weights of the reward columns.
        logps: TRL's `_get_per_token_logps_and_entropies`, for the KL penalty.
        ref_model: TRL's reference model, if it built one; else the critic loads its own where
            `kl_in_reward_coef` needs one (PEFT: the policy with its adapter off).
        temperature: the sampling temperature the reference's log-probs are computed at.

    `model` is the critic (`ValueModel`, wrapped as launched), `engine` the way it is trained (`critic_engine`).
    """

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

    # ---- setup ------------------------------------------------------------------------------------

    def step_callback(self) -> TrainerCallback:
        """The callback that steps the critic's optimizer right after the policy's (the trainer adds it)."""
        return _CriticStep(self)

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

    # ---- rollout: values, per-token rewards, GAE ------------------------------------------------

    def replace_advantages(self, output: dict, reward_columns: torch.Tensor) -> dict[str, float]:
        """TRL's group advantages -> per-token GAE advantages; adds `old_values`, `returns` and
        `value_mask` (the tokens the value loss regresses: generated, not tool output, scored).
        `reward_columns`: the batch's gathered (B_total, n_funcs) rewards, as TRL scored them.
        Returns the rollout's `ppo/` metrics."""
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
        # A completion no reward function scored (e.g. its judging failed) carries no signal: no advantage,
        # no value target, and it stays out of the whitening statistics.
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

    # ---- training: the critic's update after the policy's ---------------------------------------

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

    # ---- checkpoints ------------------------------------------------------------------------------

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
    """(B, T) float mask of the completion tokens the policy generated: TRL's `completion_mask`
    times its `tool_mask` when tools ran (tool results are not the policy's actions)."""
    mask = batch["completion_mask"].float()
    return mask * batch["tool_mask"].float() if "tool_mask" in batch else mask


class _CriticStep(TrainerCallback):
    """Steps the critic's optimizer right after the policy's (once per optimizer step, all ranks)."""

    def __init__(self, critic: PPOCritic):
        self.critic = critic

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.critic.engine.optimizer_step()
        return control
