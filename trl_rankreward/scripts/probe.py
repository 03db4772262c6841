"""What `trl-rankreward probe-judge` needs from a training config: its settings parsed as training parses
them (`parse_training_config`), G rollouts of its starting policy for a few queries, cut into groups as the
trainer cuts them (`sample_groups`; transformers `generate`, CPU is fine for small policies), and how to make
the config train another method (`switch_hint`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any


def config_classes(values: dict) -> list[type]:
    """The trainer configs a training YAML may be written for: its `reward_method`'s, else every method's
    (the general one first)."""
    from ..rewards.registry import REWARD_METHODS
    from ..trainers.judge_reward import JudgeRewardGRPOConfig, config_for_method, method_config

    if values.get("reward_method") in REWARD_METHODS:
        return [config_for_method(values["reward_method"])]
    return [JudgeRewardGRPOConfig, *(method_config(name) for name in REWARD_METHODS)]


def parse_training_config(path: str) -> tuple[Any, Any, Any]:
    """(script arguments, trainer config, model config) of the training YAML at `path`, parsed as training
    parses it (a refused value is a one-line usage error, exit status 2)."""
    import dataclasses

    import yaml
    from trl import ModelConfig

    from .arguments import ScriptParser, TrainScriptArguments

    try:
        with open(path, encoding="utf-8") as f:
            values = yaml.safe_load(f)
    except OSError as exc:
        raise FileNotFoundError(f"--config {path}: cannot read the training config ({exc.strerror})") from None
    if not isinstance(values, dict):
        raise ValueError(f"--config {path}: expected a YAML mapping of training settings, got {type(values).__name__}")
    keys = set(values) - {"env"}
    names = {f.name for cls in (TrainScriptArguments, ModelConfig) for f in dataclasses.fields(cls)}
    for cls in config_classes(values):
        if keys <= names | {f.name for f in dataclasses.fields(cls)}:
            parser = ScriptParser((TrainScriptArguments, cls, ModelConfig), prog=f"trl-rankreward probe-judge ({path})")
            return parser.parse_args_and_config(["--config", path])
    raise ValueError(
        f"--config {path}: keys {sorted(keys - names)[:8]} fit none of the judge-reward trainer configs "
        f"({', '.join(c.__name__ for c in config_classes(values))}); probe-judge reads the config of a training run "
        "with a judge (examples/configs/rankbuffer_*, matrixreward_*, baseline_*, genrm_*)"
    )


def sample_groups(model_name: str, dataset, training_args, *, queries: int, seed: int, warmup: bool):
    """(groups, warm-up groups or None): `queries` rows of `dataset` drawn with `seed`, G rollouts each (and
    G more for the warm-up) sampled from the policy `model_name` with the config's generation settings."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..trainers.group_scoring import reward_row, rows_to_groups

    if queries < 1:
        raise ValueError(f"--queries must be >= 1, got {queries}")
    rows = [dataset[i] for i in random.Random(seed).sample(range(len(dataset)), min(queries, len(dataset)))]
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    device = "cuda" if torch.cuda.is_available() and not training_args.use_cpu else "cpu"
    model = AutoModelForCausalLM.from_pretrained(model_name, **(training_args.model_init_kwargs or {})).to(device)
    model.eval()
    g = training_args.num_generations
    per_query = 2 * g if warmup else g
    sampling = {k: getattr(training_args, k) for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")}
    sampling = {k: v for k, v in sampling.items() if v is not None}
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(seed)
    measured, warm = [], []
    try:
        for row in rows:
            completions = _generate(model, tokenizer, row["prompt"], training_args, per_query, sampling, device)
            measured += [reward_row(row, row["prompt"], c) for c in completions[:g]]
            warm += [reward_row(row, row["prompt"], c) for c in completions[g:]]
    finally:
        tokenizer.padding_side = side
    return rows_to_groups(measured, g), rows_to_groups(warm, g) if warmup else None


def _generate(model, tokenizer, prompt, training_args, n: int, sampling: dict, device: str) -> list[str]:
    import torch

    if isinstance(prompt, str):
        text = prompt
    else:
        text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True,
                                             **(training_args.chat_template_kwargs or {}))  # fmt: skip
    batch = tokenizer([text], return_tensors="pt", add_special_tokens=False).to(device)
    with torch.no_grad():
        output = model.generate(**batch, do_sample=True, num_return_sequences=n, pad_token_id=tokenizer.pad_token_id,
                                max_new_tokens=training_args.max_completion_length,
                                **sampling, **(training_args.generation_kwargs or {}))  # fmt: skip
    return tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)


def switch_hint(config_path: str, training_args, recommended: str) -> str:
    """One line: the config already trains `recommended`, or what to change in it to train that method and the
    example script that trains it (`trainers.judge_reward.script_for_method`)."""
    import yaml

    from ..trainers.judge_reward import script_for_method

    current = training_args.reward_method
    if recommended == current:
        return f"{Path(config_path).name} already trains {recommended}: keep it."
    with open(config_path, encoding="utf-8") as f:
        keys = set(yaml.safe_load(f))
    own = [k for k in _own_option_names(training_args) if k != "lambda_fmt" and k in keys]
    drop = f"; drop {current}'s options ({', '.join(own)})" if own else ""
    how = (f"set `reward_method: {recommended}` (its options are config fields, docs/methods.md){drop}, and train "
           f"with {script_for_method(recommended)}")  # fmt: skip
    return f"to train {recommended} instead of {current}: {how}."


def _own_option_names(training_args) -> list[str]:
    """The method options a method's config class (`method_config`) holds as fields."""
    from ..rewards.options import MethodOptions, option_fields

    return [f.name for f in option_fields(type(training_args))] if isinstance(training_args, MethodOptions) else []
