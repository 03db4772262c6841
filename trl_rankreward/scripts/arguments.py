"""The script arguments every example shares, and the parser of the example scripts.

`TrainScriptArguments` is TRL's `ScriptArguments` (dataset_name, dataset_config,
dataset_train_split, ...) plus a prompt limit; `ScriptParser` is TRL's `TrlParser` with the
`trl-rankreward` CLI's reading of `--config` and its one-line usage errors (`trl_rankreward.parsing`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields

from trl import ScriptArguments, TrlParser

from ..config_checks import CheckedConfig
from ..parsing import CONFIG_HELP, HelpFormatter, OneLineErrors, apply_config_file, to_dataclasses
from ..user_errors import TRACEBACK_FLAG, TRACEBACK_HELP

#: TRL's script arguments no training script reads, and why: set to anything but their default, they are refused
UNREAD_SCRIPT_ARGUMENTS = {
    "dataset_test_split": "the scripts train on dataset_train_split only; evaluate with eval_prompts (the judge win "
    "rate) or a separate eval run",
    "dataset_streaming": "the scripts load the training set in full (its rows are checked before the model loads)",
    "ignore_bias_buffers": "the scripts do not wrap the model in DDP themselves; accelerate launch does",
}


@dataclass
class TrainScriptArguments(CheckedConfig, ScriptArguments):
    """TRL's script arguments (with the package's dataset help) plus a prompt limit; the TRL arguments no script
    reads (`UNREAD_SCRIPT_ARGUMENTS`) are refused when set."""

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "The training set: a save_to_disk folder, a .json/.jsonl/.parquet file or a Hub dataset id."
        },
    )
    max_prompt_length: int | None = field(
        default=None,
        metadata={
            "help": "Drop queries whose tokenized prompt is longer than this, before the model loads (the papers: "
            "4096). Unset: a prompt that leaves no room for max_completion_length in the model's context is an error."
        },
    )

    def check_config(self) -> None:
        defaults = {f.name: f.default for f in fields(ScriptArguments)}
        for name, why in UNREAD_SCRIPT_ARGUMENTS.items():
            if getattr(self, name) != defaults[name]:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is not read by the training scripts ({why}); drop it"
                )


class ScriptParser(OneLineErrors, TrlParser):
    """`TrlParser` for the example scripts: `--config FILE.yaml` read as the CLI reads it (a file that cannot be read,
    a YAML syntax error, an unknown key are one-line usage errors), config values checked against the fields'
    types, a dataclass's own check (`__post_init__`) a usage error too; `--traceback` is a flag."""

    def __init__(self, dataclass_types, **kwargs):
        super().__init__(dataclass_types, **{"formatter_class": HelpFormatter, **kwargs})
        self.add_argument("--config", metavar="FILE.yaml", help=CONFIG_HELP)
        self.add_argument(TRACEBACK_FLAG, action="store_true", help=TRACEBACK_HELP)

    def parse_args_and_config(self, args=None) -> tuple:
        argv = apply_config_file(self, list(sys.argv[1:] if args is None else args))
        return tuple(to_dataclasses(self, self.parse_args(argv), self.dataclass_types))
