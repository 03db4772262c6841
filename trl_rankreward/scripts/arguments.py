"""The script arguments every example shares, and the parser of the example scripts.

`TrainScriptArguments` is TRL's `ScriptArguments` (dataset_name, dataset_config,
dataset_train_split, ...) plus a prompt limit; `ScriptParser` is TRL's `TrlParser` with the
`trl-rankreward` CLI's reading of `--config` and its one-line usage errors (`trl_rankreward.parsing`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from trl import ScriptArguments, TrlParser

from ..parsing import CONFIG_HELP, HelpFormatter, OneLineErrors, apply_config_file, to_dataclasses
from ..user_errors import TRACEBACK_FLAG, TRACEBACK_HELP


@dataclass
class TrainScriptArguments(ScriptArguments):
    """TRL's script arguments (with the package's dataset help) plus a prompt limit."""

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
