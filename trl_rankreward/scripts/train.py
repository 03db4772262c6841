"""The training entry point behind `examples/train_*.py`, and the one reader of a training config.

`train` checks, before any model loads: the resume flag, the Hub (`--push_to_hub`), `output_dir`
(`output_dir.py`), a local model folder (`tiny` builds one), the dataset's rows and its prompt lengths; it then
trains and saves the model, tokenizer, `trainer_state.json` and model card. A user error is one line and exit 1;
SIGTERM/SIGINT saves a checkpoint and exits 75. `read_training_config` reads a training YAML for `bench` and
`probe-judge` with the parser and config class a script would use.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from trl import ScriptArguments, TrlParser

from ..config_checks import CheckedConfig
from ..parsing import CONFIG_HELP, HelpFormatter, OneLineErrors, apply_config_file, read_config_file, to_dataclasses
from ..trainers.dataset_checks import checked_like
from ..trainers.extension_builds import check_build_locks
from ..user_errors import TRACEBACK_FLAG, TRACEBACK_HELP, ConfigError, MissingFileError, run_reporting_errors
from .output_dir import claim_output_dir

#: TRL's script arguments no training script reads, and why: set to anything but their default, they are refused
UNREAD_SCRIPT_ARGUMENTS = {
    "dataset_test_split": "the scripts train on dataset_train_split only; evaluate with eval_prompts (the judge win "
    "rate) or a separate eval run",
    "dataset_streaming": "the scripts load the training set in full (its rows are checked before the model loads)",
    "ignore_bias_buffers": "the scripts do not wrap the model in DDP themselves; accelerate launch does",
}


@dataclass
class TrainScriptArguments(CheckedConfig, ScriptArguments):
    """TRL's script arguments plus a prompt limit; the ones no script reads are refused when set."""

    dataset_name: str | None = field(
        default=None,
        metadata={"help": "The training set: a save_to_disk folder, a .json/.jsonl/.parquet file or a Hub dataset id."},
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
                raise ConfigError(
                    f"{name}={getattr(self, name)!r} is not read by the training scripts ({why}); drop it"
                )


class ScriptParser(OneLineErrors, TrlParser):
    """`TrlParser` with the CLI's `--config FILE.yaml` reading and one-line usage errors; `--traceback` a flag."""

    def __init__(self, dataclass_types, **kwargs):
        super().__init__(dataclass_types, **{"formatter_class": HelpFormatter, **kwargs})
        self.add_argument("--config", metavar="FILE.yaml", help=CONFIG_HELP)
        self.add_argument(TRACEBACK_FLAG, action="store_true", help=TRACEBACK_HELP)

    def parse_args_and_config(self, args=None, config: dict | None = None) -> tuple:
        """`config`: the `--config` file's mapping when the caller has read it already."""
        argv = apply_config_file(self, list(sys.argv[1:] if args is None else args), config=config)
        return tuple(to_dataclasses(self, self.parse_args(argv), self.dataclass_types))


@dataclass
class RAlignScriptArguments(TrainScriptArguments):
    """The script arguments of `examples/train_ralign_genrm.py` (pairs with golden rationales) plus its MetaRM."""

    metarm: str = field(
        default="server",
        metadata={
            "help": "'server': LLM MetaRM at metarm_base_urls; 'keyword': the offline KeywordMetaJudge (tests).",
            "choices": ["server", "keyword"],
        },
    )
    keyword_threshold: float = field(
        default=0.3, metadata={"help": "KeywordMetaJudge: share of golden key words the rationale must cover."}
    )


def training_parsers(reward_method: str | None = None) -> list[tuple[type, type]]:
    """(script arguments, trainer config) a training YAML may be written for: its `reward_method`'s config class,
    else the general one and every method's; and R-Align's (a GenRM run, without a reward method)."""
    from ..rewards.registry import REWARD_METHODS
    from ..trainers.judge_reward import JudgeRewardGRPOConfig, config_for_method, method_config
    from ..trainers.ralign import RAlignGenRMConfig

    if reward_method in REWARD_METHODS:
        judge_reward = [config_for_method(reward_method)]
    else:
        judge_reward = [JudgeRewardGRPOConfig, *(method_config(name) for name in REWARD_METHODS)]
    return [(TrainScriptArguments, c) for c in judge_reward] + [(RAlignScriptArguments, RAlignGenRMConfig)]


def read_training_config(path: str, overrides: Sequence[str] = (), *, prog: str, here: bool = True):
    """((script arguments, trainer config, model config), the YAML mapping) of the config at `path` with `overrides`,
    parsed by the first of `training_parsers()` missing the fewest keys (which refuses the rest as the script would).
    `here=False` (a run on another machine) parses with `use_cpu`, skipping this machine's bf16 check."""
    from trl import ModelConfig

    values = read_config_file(ScriptParser((), prog=prog), path)
    keys = config_keys(values, overrides)
    given = dict(zip(overrides, overrides[1:], strict=False)).get("--reward_method", values.get("reward_method"))

    def missing(types: tuple[type, ...]) -> int:
        return len(keys - {f.name for cls in types for f in fields(cls)})

    types = min(((*pair, ModelConfig) for pair in training_parsers(given)), key=missing)  # of equals, the first
    elsewhere = [] if here else ["--use_cpu", "true"]  # before the overrides: a flag given wins
    argv = ["--config", path, *elsewhere, *overrides]
    return ScriptParser(types, prog=prog).parse_args_and_config(argv, config=values), values


def config_keys(values: dict, overrides: Sequence[str] = ()) -> set[str]:
    """The settings a training config gives: the keys of its YAML mapping `values` and the flags among `overrides`."""
    return set(values) | {w[2:].split("=", 1)[0].replace("-", "_") for w in overrides if w.startswith("--")}


def run_script(main: Callable, make_parser: Callable, argv: Sequence[str] | None = None) -> int:
    """Parse the command line with `make_parser()`, run `main(*parsed)`; return the exit status (a stale DeepSpeed
    build lock stops the run first)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "train"

    def body() -> int:
        from ..trainers.preemption import TrainingPreempted

        parsed = make_parser().parse_args_and_config(argv)
        check_build_locks()  # before DeepSpeed builds an op: a killed build's lock would hang it, silently
        try:
            main(*parsed)
            status = 0
        except TrainingPreempted as stopped:  # every rank stopped at the same step, its checkpoint saved
            status = stopped.code
        end_process_group()  # after the except block: the exception's frames, which hold the trainer, are gone
        return status

    return run_reporting_errors(prog, body, argv)


def end_process_group() -> None:
    """Destroy the launch's process group, if any, once the trainer is collected, so gloo's threads stop in order,
    not at exit (where a rank could abort, -6). Only after a success or a signal stop: a failed rank never comes."""
    import gc

    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.barrier()  # every rank done with every collective (rank 0 may still be writing the card)
        dist.destroy_process_group()


#: values of `--resume_from_checkpoint` meaning "the newest complete checkpoint in output_dir" / "do not resume"
RESUME_LATEST = ("latest", "true", "last")
RESUME_NONE = ("false", "none", "no", "")


def parse_resume(value) -> str | bool | None:
    """`--resume_from_checkpoint` (text from TrlParser) as the trainer takes it: a checkpoint path, which must
    exist, True (the newest checkpoint) or None."""
    if value is None or isinstance(value, bool):
        return value or None
    text = str(value).strip()
    if text.lower() in RESUME_LATEST:
        return True
    if text.lower() in RESUME_NONE:
        return None
    if not os.path.isdir(text):
        raise MissingFileError(
            f"--resume_from_checkpoint {text}: no such checkpoint folder; pass a checkpoint-N folder, `latest` "
            "(the newest complete checkpoint in output_dir) or `false`"
        )
    return text


def resume_argument(trainer_class, training_args) -> str | None:
    """What to pass to `trainer.train(resume_from_checkpoint=...)`; starting afresh in a folder with checkpoints
    overwrites them, with a note naming the resume flag."""
    from ..trainers.base import checkpoint_steps

    resume = parse_resume(training_args.resume_from_checkpoint)
    output_dir = training_args.output_dir
    if resume is True:
        return trainer_class.latest_checkpoint(output_dir)
    steps = checkpoint_steps(output_dir)
    if resume is None and steps and training_args.process_index == 0:
        print(
            f"Note: {output_dir} holds checkpoints of an earlier run (newest: checkpoint-{steps[0]}); this run starts "
            "from step 0 and overwrites them. To continue that run instead: --resume_from_checkpoint latest",
            file=sys.stderr,
        )
    return resume


def check_hub_push(training_args) -> None:
    """With --push_to_hub, the Hub must be reachable with a token before training starts, not after it ends."""
    if not training_args.push_to_hub:
        return
    from huggingface_hub import constants, whoami
    from huggingface_hub.errors import LocalTokenNotFoundError

    if constants.HF_HUB_OFFLINE:
        raise ConfigError("--push_to_hub needs the Hub, but HF_HUB_OFFLINE=1 is set; unset it or drop --push_to_hub")
    try:
        whoami()
    except LocalTokenNotFoundError:
        raise ConfigError("--push_to_hub needs a Hugging Face token: run `hf auth login` or set HF_TOKEN") from None
    except Exception as exc:  # network errors of the Hub client (httpx), HTTP 401 for a bad token
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"--push_to_hub: cannot reach the Hub at {constants.ENDPOINT} ({type(exc).__name__}: {reason}); check the "
            "network and HF_TOKEN, or drop --push_to_hub and push the saved output_dir later"
        ) from None


def hub_dataset_id(dataset_name: str | None) -> str | None:
    """`dataset_name` when it is a Hub id (the model card links it), None for a local file or folder."""
    if not dataset_name or os.path.exists(dataset_name) or dataset_name.startswith((".", "/", "~")):
        return None
    return dataset_name if re.fullmatch(r"[\w.-]+(/[\w.-]+)?", dataset_name) else None


#: `model_name_or_path` value that builds a tiny random model (`trl_rankreward.tiny.build_tiny_model`)
TINY_MODEL = "tiny"


def resolve_model(name: str, training_args) -> str:
    """`name`, or for `tiny` a tiny random model built under `output_dir/tiny_model`. A local path (., / or ~, or an
    existing parent folder) must exist: transformers would read it as a Hub id."""
    if name == TINY_MODEL:
        from ..tiny import build_tiny_model

        with training_args.main_process_first(local=True, desc="building the tiny model"):
            return str(build_tiny_model(Path(training_args.output_dir) / "tiny_model"))
    path = Path(name).expanduser()
    local = name.startswith((".", "/", "~")) or ("/" in name and path.parent.is_dir() and str(path.parent) != ".")
    if local and not path.is_dir():
        raise MissingFileError(
            f"model_name_or_path {name!r}: no such folder (for a Hub model give its id, owner/name; for a local one "
            "the folder written by save_pretrained)"
        )
    return name


def load_train_dataset(script_args):
    """`dataset_name` as a `save_to_disk` directory, a json/jsonl/parquet file, or a Hub dataset id."""
    if script_args.dataset_name is None:
        raise ConfigError("Set dataset_name (a save_to_disk directory, a .json/.jsonl/.parquet file or a Hub id)")
    from datasets import DatasetDict

    from ..data.sources import load_source

    split = script_args.dataset_train_split
    data = load_source(script_args.dataset_name, split=split, config=script_args.dataset_config)
    return data[split] if isinstance(data, DatasetDict) else data


def check_prompt_lengths(dataset, model_name: str, script_args, training_args):
    """Before any model loads: drop prompts over `max_prompt_length` tokens (printing how many), or without a
    limit stop on a prompt that leaves no room for `max_completion_length` in the model's context."""
    from transformers import AutoConfig, AutoTokenizer

    from ..data.prompts import check_prompts_fit, context_length, drop_long_prompts, prompt_lengths

    tokenizer = AutoTokenizer.from_pretrained(model_name)
    lengths = prompt_lengths(dataset["prompt"], tokenizer, training_args.chat_template_kwargs)
    query_ids = dataset["query_id"] if "query_id" in dataset.column_names else None
    if script_args.max_prompt_length:
        kept, dropped = drop_long_prompts(dataset, lengths, script_args.max_prompt_length)
        checked_like(kept, dataset)  # the trainer does not check these rows again
        if dropped.rows and training_args.process_index == 0:
            print(f"Dropped {len(dropped.rows)} of {dropped.total} prompts longer than max_prompt_length="
                  f"{dropped.limit} tokens ({dropped.describe(query_ids)})", file=sys.stderr)  # fmt: skip
        return kept
    window = context_length(AutoConfig.from_pretrained(model_name))
    if window:
        check_prompts_fit(lengths, context_length=window, max_completion_length=training_args.max_completion_length,
                          query_ids=query_ids)  # fmt: skip
    return dataset


def train(trainer_class, script_args, training_args, model_args, *, check_prompts: bool = True, **trainer_kwargs):
    """Build `trainer_class` from the parsed arguments and `trainer_kwargs` (e.g. a ready `judge`), then `run`.
    `check_prompts=False` skips the row and prompt-length checks (R-Align's pairs, which their trainer checks)."""
    from trl import get_peft_config

    own = training_args.model_init_kwargs or {}  # the config's own win
    model_kwargs = {"revision": model_args.model_revision, "attn_implementation": model_args.attn_implementation}
    training_args.model_init_kwargs = {**model_kwargs, "dtype": model_args.dtype, **own}
    resume = resume_argument(trainer_class, training_args)
    check_hub_push(training_args)
    with claim_output_dir(training_args, model_args.model_name_or_path):
        model = resolve_model(model_args.model_name_or_path, training_args)  # a missing local folder fails first
        dataset = load_train_dataset(script_args)
        if check_prompts:  # every row well-formed, with what the method needs, before anything reads a prompt
            trainer_class.check_datasets(training_args, dataset, reward_method=trainer_kwargs.get("reward_method"))
            dataset = check_prompt_lengths(dataset, model, script_args, training_args)
        trainer = trainer_class(
            model, args=training_args, train_dataset=dataset, peft_config=get_peft_config(model_args), **trainer_kwargs
        )
        return run(trainer, resume, dataset_name=script_args.dataset_name)


def run(trainer, resume_from_checkpoint: str | None, *, dataset_name: str | None = None):
    """Train, then save the model, its tokenizer, `trainer_state.json` and a model card to `output_dir`, and push
    them with `--push_to_hub`. A `JudgeFailureError` propagates after the trainer saved its checkpoint."""
    args = trainer.args
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    trainer.save_model(args.output_dir)  # every process (ZeRO-3 gathers the weights); written by the main one
    trainer.save_state()  # output_dir/trainer_state.json: this run's log history, read by scripts/quickstart.sh
    card_dataset = hub_dataset_id(dataset_name)
    if trainer.is_world_process_zero() and hasattr(trainer, "create_model_card"):
        # as TRL names the model: the Hub repo's name, else the output folder's; dataset_label names a local one too
        name = args.hub_model_id.split("/")[-1] if args.hub_model_id else Path(args.output_dir).name
        trainer.create_model_card(model_name=name, dataset_name=card_dataset, dataset_label=dataset_name)
    trainer.accelerator.print(f"Model, tokenizer and model card saved to {args.output_dir}")
    if args.push_to_hub:
        trainer.push_to_hub(dataset_name=card_dataset)
        trainer.accelerator.print(f"Pushed to https://huggingface.co/{trainer.hub_model_id}")
    return trainer
