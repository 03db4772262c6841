"""The probe's advice: how to make a training config train the method `trl-rankreward probe-judge`
recommends (`switch_hint`)."""

from __future__ import annotations

from pathlib import Path


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
