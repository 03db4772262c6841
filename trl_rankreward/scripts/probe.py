"""The probe's advice: how to make a training config train the method `trl-rankreward probe-judge`
recommends (`switch_hint`), and the example script that trains each method."""

from __future__ import annotations

from pathlib import Path

#: the example script that trains each method (a config for one method needs that script's config class)
SCRIPT_FOR_METHOD = {
    "rank_buffer": "examples/train_rankbuffer.py",
    "matrix": "examples/train_matrixreward.py",
    "genrm": "examples/train_genrm_rlhf.py",
    **{m: "examples/train_baseline.py" for m in
       ("pointwise", "gdpo", "rrc_scr", "rrc_agr", "pairwise_rank", "tournament", "arena")},
}  # fmt: skip


def switch_hint(config_path: str, training_args, recommended: str) -> str:
    """One line: the config already trains `recommended`, or what to change in it to train that method."""
    import yaml

    current = training_args.reward_method
    if recommended == current:
        return f"{Path(config_path).name} already trains {recommended}: keep it."
    with open(config_path, encoding="utf-8") as f:
        keys = set(yaml.safe_load(f))
    own = [k for k in _own_option_names(training_args) if k != "lambda_fmt" and k in keys]
    if "reward_method_kwargs" in keys and training_args.reward_method_kwargs:
        own.append("reward_method_kwargs")
    drop = f"; drop {current}'s options ({', '.join(own)})" if own else ""
    script = SCRIPT_FOR_METHOD.get(recommended)
    if recommended == "rank_buffer":
        how = f"train with {script} (its options, k0, buffer_init, ..., are config fields){drop}"
    elif recommended == "matrix":
        how = f"train with {script} (its options are config fields){drop}"
    elif script:
        how = f"set `reward_method: {recommended}` (options in `reward_method_kwargs`){drop}, and train with {script}"
    else:
        how = (f"set `reward_method: {recommended}` (options in `reward_method_kwargs`){drop}, and train with "
               "JudgeRewardGRPOTrainer (no example script is limited to it: train_baseline.py takes the baselines "
               "only)")  # fmt: skip
    return f"to train {recommended} instead of {current}: {how}."


def _own_option_names(training_args) -> list[str]:
    """The method options a one-method config (RankBufferGRPOConfig, ...) holds as fields."""
    from ..rewards.options import MethodOptions, option_fields

    return [f.name for f in option_fields(type(training_args))] if isinstance(training_args, MethodOptions) else []
