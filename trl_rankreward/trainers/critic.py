"""The PPO critic: `ValueModel` (a causal-LM backbone with a zero-initialized value head) and its engines beside
TRL's policy (`TorchCritic`: own AdamW, one device or DDP; `DeepSpeedCritic`: a second DeepSpeed engine, sharded
like the policy), and the loading of models beside the policy (`device_map=None` under DDP or DeepSpeed).
"""

from __future__ import annotations

import copy
import os

import torch
from accelerate.utils import DistributedType
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoConfig, AutoModel

VALUE_HEAD_NAME = "value_head.safetensors"


class ValueModel(nn.Module):
    """`backbone(input_ids) -> hidden states -> Linear(hidden, 1)`: values (B, L) for every position."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(backbone.config.hidden_size, 1, dtype=torch.float32)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_pretrained(cls, name_or_path: str, **model_kwargs) -> ValueModel:
        """The backbone of the causal LM at `name_or_path`; a folder written by `save` also brings its value head."""
        config = AutoConfig.from_pretrained(name_or_path)
        backbone = AutoModel.from_pretrained(name_or_path, config=config, **model_kwargs)
        model = cls(backbone)
        head = os.path.join(name_or_path, VALUE_HEAD_NAME)
        if os.path.isfile(head):
            model.value_head.load_state_dict(load_file(head))
        return model

    @classmethod
    def from_policy(cls, policy: nn.Module) -> ValueModel:
        """A critic whose backbone is a copy of an in-memory policy's (one with no checkpoint path)."""
        return cls(copy.deepcopy(policy.base_model))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        # In the head's dtype (float32 unless DeepSpeed cast the whole model to bf16/fp16), values in float32.
        return self.value_head(hidden.to(self.value_head.weight.dtype)).squeeze(-1).float()

    def save(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.backbone.save_pretrained(directory)
        save_file({k: v.detach().cpu().contiguous() for k, v in self.value_head.state_dict().items()},
                  os.path.join(directory, VALUE_HEAD_NAME))  # fmt: skip

    def load(self, directory: str) -> None:
        """Weights written by `save` into this model (same architecture), e.g. on resume."""
        loaded = AutoModel.from_pretrained(directory, dtype=next(self.backbone.parameters()).dtype)
        self.backbone.load_state_dict(loaded.state_dict())
        self.value_head.load_state_dict(load_file(os.path.join(directory, VALUE_HEAD_NAME)))


def completion_values(values: torch.Tensor, prompt_length: int, completion_length: int) -> torch.Tensor:
    """The values (B, T) of the states before each completion token (after the prompt and t completion tokens)."""
    return values[:, prompt_length - 1 : prompt_length - 1 + completion_length]


OPTIMIZER_NAME = "critic_optimizer.pt"
DEEPSPEED_TAG = "deepspeed"


def adam_settings(args) -> dict:
    """The critic's own learning rate, with the run's betas, epsilon and weight decay."""
    return dict(lr=args.critic_learning_rate, betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon,
                weight_decay=args.weight_decay)  # fmt: skip


class _Engine:
    model: nn.Module

    def values(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model(ids, mask)


class TorchCritic(_Engine):
    def __init__(self, critic: ValueModel, accelerator, args):
        self.optimizer = torch.optim.AdamW(critic.parameters(), **adam_settings(args))
        self.model = accelerator.prepare_model(critic)
        self.accelerator = accelerator
        self.max_grad_norm = args.max_grad_norm

    def backward(self, loss: torch.Tensor, accumulation_steps: int) -> None:
        (loss / accumulation_steps).backward()

    def optimizer_step(self) -> None:
        """Once per optimizer step, after the policy's (`PPOCritic.on_optimizer_step`)."""
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
        # On the CPU: load_state_dict moves each state to its parameter's device ("cpu:0" fails for DDP on CPU).
        state = torch.load(os.path.join(folder, OPTIMIZER_NAME), map_location="cpu", weights_only=True)
        self.optimizer.load_state_dict(state)

    @staticmethod
    def saved(folder: str) -> bool:
        return os.path.isfile(os.path.join(folder, OPTIMIZER_NAME))


class DeepSpeedCritic(_Engine):
    def __init__(self, critic: ValueModel, accelerator, args):
        import deepspeed

        config = critic_deepspeed_config(accelerator.state.deepspeed_plugin.deepspeed_config, args,
                                         critic.backbone.config.hidden_size, accelerator.num_processes)  # fmt: skip
        optimizer = deepspeed_critic_optimizer(critic.parameters(), config, args)
        self.model, self.optimizer, _, _ = deepspeed.initialize(model=critic, optimizer=optimizer, config=config)

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
    """AdamW for the critic's DeepSpeed engine; DeepSpeed's CPU Adam when the optimizer is offloaded (it refuses a
    torch one there), as accelerate swaps it for the policy, unless `zero_force_ds_cpu_optimizer: false`."""
    offload = config.get("zero_optimization", {}).get("offload_optimizer") or {}
    if offload.get("device", "none") not in ("none", None) and config.get("zero_force_ds_cpu_optimizer", True):
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(params, adamw_mode=True, **adam_settings(args))
    return torch.optim.AdamW(params, **adam_settings(args))


def critic_deepspeed_config(run_config: dict, args, hidden_size: int, world_size: int) -> dict:
    """The run's DeepSpeed config for the critic: its ZeRO, precision and offload, the trainer's batch, accumulation
    and clipping, no `optimizer`/`scheduler` blocks, and "auto" buckets sized from the critic's hidden size."""
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


#: launches where each process holds its own copy (DDP) or a shard (DeepSpeed): `device_map` must be None
ONE_DEVICE_PER_PROCESS = (DistributedType.MULTI_GPU, DistributedType.DEEPSPEED)


def load_kwargs(
    args, distributed_type, *, dtype, attn_implementation: str | None = None, of_policy: bool = True
) -> dict:
    """`from_pretrained` keyword arguments for a model loaded beside the policy, in the policy's `dtype` (and
    `attn_implementation` unless the run sets one); `of_policy=False` drops the policy's `revision`."""
    kwargs = dict(args.model_init_kwargs or {})
    kwargs.setdefault("trust_remote_code", args.trust_remote_code)
    kwargs["dtype"] = dtype
    if kwargs.get("attn_implementation") is None and attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    if not of_policy:
        kwargs.pop("revision", None)
    if distributed_type in ONE_DEVICE_PER_PROCESS:
        kwargs["device_map"] = None
    return kwargs


def load_reference(path: str, accelerator, args, *, dtype, attn_implementation: str | None, temperature: float):
    """The frozen reference policy at `path`, with TRL's fused LM head, prepared for this launch."""
    from trl.models import prepare_deepspeed
    from trl.trainer.utils import add_fused_lm_head, create_model_from_path, disable_dropout_in_model

    kwargs = load_kwargs(args, accelerator.distributed_type, dtype=dtype, attn_implementation=attn_implementation)
    reference = create_model_from_path(path, **kwargs)
    if args.disable_dropout:
        disable_dropout_in_model(reference)
    add_fused_lm_head(reference, temperature=temperature, cast_lm_head_to_fp32=args.cast_lm_head_to_fp32)
    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        return prepare_deepspeed(reference, accelerator)
    return accelerator.prepare_model(reference, evaluation_mode=True)
