"""The PPO critic: a causal-LM backbone with a scalar value head, one value per token.

A separate model from the policy (as in TRL's former PPO trainer and OpenRLHF): the policy's
weights and what a checkpoint pushes to the Hub stay a plain causal LM, and the critic can be
smaller or larger than the policy. It starts from `critic_model_name_or_path` or, by default,
from the policy's own checkpoint (the backbone only; the LM head is not loaded). The value head
starts at zero, so the first values are 0 (the first advantages that gives: `advantages`).

On disk (`save` / `load`): the backbone in Hugging Face format plus `value_head.safetensors`,
so `ValueModel.from_pretrained(dir)` reloads it and `AutoModel.from_pretrained(dir)` still reads
the backbone.
"""

from __future__ import annotations

import copy
import os

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoConfig, AutoModel

VALUE_HEAD_NAME = "value_head.safetensors"


class ValueModel(nn.Module):
    """`backbone(input_ids) -> hidden states -> Linear(hidden, 1)`: values (B, L) for every position."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone
        hidden = backbone.config.hidden_size
        self.value_head = nn.Linear(hidden, 1, dtype=torch.float32)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_pretrained(cls, name_or_path: str, **model_kwargs) -> ValueModel:
        """The backbone of the causal LM at `name_or_path` (a Hub id or a folder); a folder written
        by `save` also brings back its value head."""
        config = AutoConfig.from_pretrained(name_or_path)
        backbone = AutoModel.from_pretrained(name_or_path, config=config, **model_kwargs)
        model = cls(backbone)
        head = os.path.join(name_or_path, VALUE_HEAD_NAME)
        if os.path.isfile(head):
            model.value_head.load_state_dict(load_file(head))
        return model

    @classmethod
    def from_policy(cls, policy: nn.Module) -> ValueModel:
        """A critic whose backbone is a copy of an in-memory policy's (for policies with no checkpoint path)."""
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
    """The values of the states before each completion token: position `prompt_length - 1 + t`
    holds the state after the prompt and the first t completion tokens."""
    return values[:, prompt_length - 1 : prompt_length - 1 + completion_length]
