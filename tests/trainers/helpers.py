"""Shared setup of the tiny trainer tests: a few-second CPU config, the trainer on the tiny dataset, moved parameters."""

import torch
from datasets import load_dataset

#: GRPO settings for a few-second CPU run (TRL_NOTES: no bf16, no activation checkpointing)
TINY_CPU_SETTINGS = dict(
    per_device_train_batch_size=8,  # 2 groups of G=4 per step
    num_generations=4,
    max_completion_length=8,
    max_steps=3,
    learning_rate=1e-2,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    bf16=False,
    activation_checkpointing=False,
    seed=0,
)


def tiny_config(config_class, output_dir, **overrides):
    """`config_class` (a `GRPOConfig`) with `TINY_CPU_SETTINGS`, writing to `output_dir`; `overrides` win."""
    return config_class(**{**TINY_CPU_SETTINGS, "output_dir": str(output_dir), **overrides})


def load_rows(dataset_path):
    """The JSON-lines dataset written by `tests.conftest.write_tiny_dataset`, as a `datasets.Dataset`."""
    return load_dataset("json", data_files=dataset_path, split="train")


def tiny_trainer(trainer_class, model_dir, dataset_path, args, **kwargs):
    """`trainer_class(model_dir, args=args, train_dataset=<the JSON-lines dataset>, **kwargs)`."""
    return trainer_class(model_dir, args=args, train_dataset=load_rows(dataset_path), **kwargs)


def snapshot(model) -> dict:
    """A copy of every parameter, to compare with after training."""
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def moved(before: dict, model) -> list[str]:
    """Names of the parameters of `model` that differ from `before` (a `snapshot`)."""
    return [n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach().cpu())]
