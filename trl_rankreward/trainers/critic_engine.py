"""How the critic is trained and checkpointed, beside TRL's policy: plain PyTorch/DDP, or its own DeepSpeed engine.

The policy stays TRL's (one accelerate-prepared model). The critic gets

- `TorchCritic` (one device, or DDP through `accelerator.prepare_model`): an AdamW of its own,
  gradients accumulated over the micro-batches and stepped once per optimizer step, clipped to
  `max_grad_norm`; checkpoints hold the critic in Hugging Face format (`ValueModel.save`) and
  the optimizer state;
- `DeepSpeedCritic` (under `accelerate launch` with DeepSpeed): a second DeepSpeed engine built
  from the run's DeepSpeed config, so with ZeRO-3 the critic's parameters, gradients and Adam
  states are sharded like the policy's, and offloaded like the policy's when the config offloads
  the optimizer (the two-engine layout of OpenRLHF's PPO). DeepSpeed scales by the accumulation
  steps, clips and steps at the accumulation boundary itself; checkpoints are DeepSpeed's sharded
  format (`engine.save_checkpoint`), written by every rank.

Both take the run's Adam settings (`adam_settings`) and expose the same methods; `model` is what
the trainer's `critic` attribute holds.
"""

from __future__ import annotations

import copy
import os

import torch

from .critic import ValueModel

OPTIMIZER_NAME = "critic_optimizer.pt"
DEEPSPEED_TAG = "deepspeed"


def adam_settings(args) -> dict:
    """The critic's Adam hyperparameters: its own learning rate, the run's betas, epsilon and weight decay."""
    return dict(lr=args.critic_learning_rate, betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon,
                weight_decay=args.weight_decay)  # fmt: skip


class TorchCritic:
    def __init__(self, critic: ValueModel, accelerator, args):
        self.optimizer = torch.optim.AdamW(critic.parameters(), **adam_settings(args))
        self.model = accelerator.prepare_model(critic)
        self.accelerator = accelerator
        self.max_grad_norm = args.max_grad_norm

    def values(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model(ids, mask)

    def backward(self, loss: torch.Tensor, accumulation_steps: int) -> None:
        (loss / accumulation_steps).backward()

    def optimizer_step(self) -> None:
        """Once per optimizer step, after the policy's (`_CriticStep`)."""
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def save(self, folder: str) -> None:
        if self.accelerator.is_main_process:
            self.accelerator.unwrap_model(self.model).save(folder)
            torch.save(self.optimizer.state_dict(), os.path.join(folder, OPTIMIZER_NAME))

    def load(self, folder: str) -> None:
        self.accelerator.unwrap_model(self.model).load(folder)
        # Loaded on the CPU: load_state_dict moves each state to its parameter's device. (Mapping straight to
        # accelerator.device fails for a DDP process on the CPU, whose device is "cpu:0".)
        state = torch.load(os.path.join(folder, OPTIMIZER_NAME), map_location="cpu", weights_only=True)
        self.optimizer.load_state_dict(state)

    @staticmethod
    def saved(folder: str) -> bool:
        return os.path.isfile(os.path.join(folder, OPTIMIZER_NAME))


class DeepSpeedCritic:
    def __init__(self, critic: ValueModel, accelerator, args):
        import deepspeed

        config = critic_deepspeed_config(accelerator.state.deepspeed_plugin.deepspeed_config, args,
                                         critic.backbone.config.hidden_size, accelerator.num_processes)  # fmt: skip
        optimizer = deepspeed_critic_optimizer(critic.parameters(), config, args)
        self.model, self.optimizer, _, _ = deepspeed.initialize(model=critic, optimizer=optimizer, config=config)

    def values(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model(ids, mask)

    def backward(self, loss: torch.Tensor, accumulation_steps: int) -> None:
        """DeepSpeed divides by its accumulation steps and steps only at the boundary: call every micro-batch."""
        self.model.backward(loss)
        self.model.step()

    def optimizer_step(self) -> None:
        """Nothing: `backward` already stepped at the accumulation boundary."""

    def save(self, folder: str) -> None:
        self.model.save_checkpoint(folder, tag=DEEPSPEED_TAG)  # every rank writes its shard

    def load(self, folder: str) -> None:
        path, _ = self.model.load_checkpoint(folder, tag=DEEPSPEED_TAG, load_lr_scheduler_states=False)
        if path is None:
            raise FileNotFoundError(f"No DeepSpeed critic checkpoint under {folder}/{DEEPSPEED_TAG}")

    @staticmethod
    def saved(folder: str) -> bool:
        return os.path.isdir(os.path.join(folder, DEEPSPEED_TAG))


def deepspeed_critic_optimizer(params, config: dict, args) -> torch.optim.Optimizer:
    """AdamW for the critic's DeepSpeed engine. With the optimizer offloaded to the CPU, DeepSpeed accepts only
    its own CPU Adam as a client optimizer (a torch one raises ZeRORuntimeException): the same swap that
    accelerate makes for the policy, unless the config sets `zero_force_ds_cpu_optimizer: false`."""
    offload = config.get("zero_optimization", {}).get("offload_optimizer") or {}
    if offload.get("device", "none") not in ("none", None) and config.get("zero_force_ds_cpu_optimizer", True):
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(params, adamw_mode=True, **adam_settings(args))
    return torch.optim.AdamW(params, **adam_settings(args))


def critic_deepspeed_config(run_config: dict, args, hidden_size: int, world_size: int) -> dict:
    """The run's DeepSpeed config for the critic's engine: the same ZeRO stage, precision and offload, the
    trainer's batch, accumulation and clipping, our optimizer (its `optimizer`/`scheduler` blocks dropped), and
    the size-dependent "auto" buckets resolved from the critic's hidden size (as transformers does for a model)."""
    config = copy.deepcopy(run_config)
    config.pop("optimizer", None)
    config.pop("scheduler", None)
    config["train_micro_batch_size_per_gpu"] = args.per_device_train_batch_size
    config["gradient_accumulation_steps"] = args.gradient_accumulation_steps
    config["train_batch_size"] = args.per_device_train_batch_size * args.gradient_accumulation_steps * world_size
    config["gradient_clipping"] = args.max_grad_norm
    zero = config.setdefault("zero_optimization", {})
    sizes = {"reduce_bucket_size": hidden_size * hidden_size, "stage3_prefetch_bucket_size": int(0.9 * hidden_size**2),
             "stage3_param_persistence_threshold": 10 * hidden_size}  # fmt: skip
    for key, value in sizes.items():
        if zero.get(key, "auto") == "auto":
            zero[key] = value
    for precision in ("bf16", "fp16"):
        block = config.get(precision)
        if isinstance(block, dict) and block.get("enabled") == "auto":
            block["enabled"] = bool(getattr(args, precision))
    return config
