"""The training entry point behind `examples/train_*.py` (`train`), and the one reader of a training config
(`read_training_config`, for `trl-rankreward bench --config` and `probe-judge --config`)."""

from .train import (
    RAlignScriptArguments,
    ScriptParser,
    TrainScriptArguments,
    config_keys,
    end_process_group,
    read_training_config,
    run,
    run_script,
    train,
)

__all__ = ["RAlignScriptArguments", "ScriptParser", "TrainScriptArguments", "config_keys", "end_process_group", "read_training_config", "run", "run_script",
           "train"]  # fmt: skip
