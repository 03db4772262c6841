"""What every training example shares: script arguments, dataset loading, resuming, the train-save-push path, errors.

Used by train_rankbuffer.py, train_matrixreward.py, train_baseline.py, train_genrm_rlhf.py and train_ralign_genrm.py
(run from this folder, so `import train_common` finds this file). The dataset (`dataset_name`):
a directory written by `Dataset.save_to_disk`, a .json/.jsonl/.parquet file, or a Hub id; columns
`prompt`, `query_id`, `rubrics`, `references` (docs/trainers.md).

Every script:

- resumes with `--resume_from_checkpoint PATH`, or `latest` / `true` (the newest complete
  `checkpoint-N` in `output_dir`); `false` / `none` starts afresh;
- builds a tiny random model when `model_name_or_path` is `tiny` (CPU smoke runs; once per
  machine, the other processes wait for it);
- ends by saving the model, its tokenizer, `trainer_state.json` and a model card (README.md) to
  `output_dir`, and pushes them with `--push_to_hub` (`--hub_model_id me/policy`);
- prints a library error (bad config value, missing dataset, unreachable judge, circuit breaker)
  as one line and exits with status 1; `--traceback` (or TRL_RANKREWARD_TRACEBACK=1) shows the
  full traceback.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from trl import ScriptArguments, get_peft_config

from trl_rankreward.data.sources import load_source

#: `model_name_or_path` value that builds a tiny random model (`trl_rankreward.testing.build_tiny_model`)
TINY_MODEL = "tiny"
#: values of `--resume_from_checkpoint` meaning "the newest complete checkpoint in output_dir" / "do not resume"
RESUME_LATEST = ("latest", "true", "last")
RESUME_NONE = ("false", "none", "no", "")
TRACEBACK_FLAG = "--traceback"
TRACEBACK_ENV = "TRL_RANKREWARD_TRACEBACK"


@dataclass
class TrainScriptArguments(ScriptArguments):
    """TRL's script arguments (dataset_name, dataset_config, dataset_train_split, ...) plus a prompt limit."""

    max_prompt_length: int | None = field(
        default=None,
        metadata={
            "help": "Drop queries whose tokenized prompt is longer than this, before the model loads (the papers: "
            "4096). Unset: a prompt that leaves no room for max_completion_length in the model's context is an error."
        },
    )


def load_train_dataset(args: TrainScriptArguments):
    """`dataset_name` as a `save_to_disk` directory, a json/jsonl/parquet file, or a Hub dataset id."""
    if args.dataset_name is None:
        raise ValueError("Set dataset_name (a save_to_disk directory, a .json/.jsonl/.parquet file or a Hub id)")
    from datasets import DatasetDict

    data = load_source(args.dataset_name, split=args.dataset_train_split, config=args.dataset_config)
    return data[args.dataset_train_split] if isinstance(data, DatasetDict) else data


def check_prompt_lengths(dataset, model_name: str, script_args, training_args):
    """Before any model loads: drop prompts over `max_prompt_length` tokens (printing how many), or without a
    limit stop on a prompt that leaves no room for `max_completion_length` in the model's context."""
    from transformers import AutoConfig, AutoTokenizer

    from trl_rankreward.data.prompt_lengths import check_prompts_fit, context_length, drop_long_prompts, prompt_lengths

    tokenizer = AutoTokenizer.from_pretrained(model_name)
    lengths = prompt_lengths(dataset["prompt"], tokenizer, training_args.chat_template_kwargs)
    query_ids = dataset["query_id"] if "query_id" in dataset.column_names else None
    if script_args.max_prompt_length:
        dataset, dropped = drop_long_prompts(dataset, lengths, script_args.max_prompt_length)
        if dropped.rows and training_args.process_index == 0:
            print(f"Dropped {len(dropped.rows)} of {dropped.total} prompts longer than max_prompt_length="
                  f"{dropped.limit} tokens ({dropped.describe(query_ids)})", file=sys.stderr)  # fmt: skip
        return dataset
    window = context_length(AutoConfig.from_pretrained(model_name))
    if window:
        check_prompts_fit(lengths, context_length=window, max_completion_length=training_args.max_completion_length,
                          query_ids=query_ids)  # fmt: skip
    return dataset


# ---- the model: a path or Hub id, or `tiny` built once per machine ----------------------------------


def resolve_model(name: str, training_args) -> str:
    """`name`, or for `tiny` the folder of a tiny random model built under `output_dir/tiny_model`.

    The local main process of each machine builds it while the others wait at a barrier
    (`TrainingArguments.main_process_first`); the build itself is atomic, so machines that share
    a filesystem never read a half-written folder either.
    """
    if name != TINY_MODEL:
        check_local_model(name)
        return name
    from trl_rankreward.testing import build_tiny_model

    folder = Path(training_args.output_dir) / "tiny_model"
    with training_args.main_process_first(local=True, desc="building the tiny model"):
        return str(build_tiny_model(folder))


def check_local_model(name: str) -> None:
    """A model name that is a local path (it starts with ., / or ~, or its folder part exists here) must exist:
    otherwise transformers reads it as a Hub id and fails with "Repo id must be in the form ..."."""
    path = Path(name).expanduser()
    local = name.startswith((".", "/", "~")) or ("/" in name and path.parent.is_dir() and str(path.parent) != ".")
    if local and not path.is_dir():
        raise FileNotFoundError(
            f"model_name_or_path {name!r}: no such folder (for a Hub model give its id, owner/name; for a local one "
            "the folder written by save_pretrained)"
        )


def check_hub_push(training_args) -> None:
    """With --push_to_hub, the Hub must be reachable with a token before training starts, not after it ends
    (where a missing network used to end the run in an 88-line ConnectError)."""
    if not training_args.push_to_hub:
        return
    from huggingface_hub import constants, whoami
    from huggingface_hub.errors import LocalTokenNotFoundError

    if constants.HF_HUB_OFFLINE:
        raise ValueError("--push_to_hub needs the Hub, but HF_HUB_OFFLINE=1 is set; unset it or drop --push_to_hub")
    try:
        whoami()
    except LocalTokenNotFoundError:
        raise ValueError("--push_to_hub needs a Hugging Face token: run `hf auth login` or set HF_TOKEN") from None
    except Exception as exc:  # network errors of the Hub client (httpx), HTTP 401 for a bad token
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(
            f"--push_to_hub: cannot reach the Hub at {constants.ENDPOINT} ({type(exc).__name__}: {reason}); check the "
            "network and HF_TOKEN, or drop --push_to_hub and push the saved output_dir later"
        ) from None


# ---- resuming ------------------------------------------------------------------------------------


def parse_resume(value) -> str | bool | None:
    """`--resume_from_checkpoint` as the trainer takes it: a path, True (the newest checkpoint) or None.

    TrlParser hands the flag over as text: `latest` / `true` mean True, `false` / `none` (and an
    unset flag) mean None, anything else is a checkpoint path, which must exist.
    """
    if value is None or value is False:
        return None
    if value is True:
        return True
    text = str(value).strip()
    if text.lower() in RESUME_LATEST:
        return True
    if text.lower() in RESUME_NONE:
        return None
    if not os.path.isdir(text):
        raise FileNotFoundError(
            f"--resume_from_checkpoint {text}: no such checkpoint folder; pass a checkpoint-N folder, `latest` "
            "(the newest complete checkpoint in output_dir) or `false`"
        )
    return text


def resume_argument(trainer_class, training_args) -> str | bool | None:
    """What to pass to `trainer.train(resume_from_checkpoint=...)`, checked before any model is loaded.

    `latest` / True is resolved here to the newest complete checkpoint's path, for every trainer
    (`trainer_class.latest_checkpoint`: which files make a checkpoint complete is the trainer's to say).
    Starting afresh in a folder that
    holds checkpoints is allowed (they get overwritten), with a warning naming the resume flag.
    """
    from trl_rankreward.trainers.checkpoints import checkpoint_steps

    resume = parse_resume(training_args.resume_from_checkpoint)
    output_dir = training_args.output_dir
    if resume is True:
        # resolved once, here (failing fast when there is none): the trainer gets the path, so a skipped
        # half-written checkpoint is reported once, not again by the trainer's own resolution of True
        return trainer_class.latest_checkpoint(output_dir)
    steps = checkpoint_steps(output_dir)
    if resume is None and steps and training_args.process_index == 0:
        newest = steps[0]
        print(
            f"Note: {output_dir} holds checkpoints of an earlier run (newest: checkpoint-{newest}); this run starts "
            "from step 0 and overwrites them. To continue that run instead: --resume_from_checkpoint latest",
            file=sys.stderr,
        )
    return resume


# ---- the shared train -> save -> model card -> push path -----------------------------------------


def train(trainer_class, script_args, training_args, model_args, **trainer_kwargs):
    """Build `trainer_class` from the parsed arguments (train_rankbuffer/matrixreward/baseline/genrm_rlhf) and
    `trainer_kwargs` (e.g. a ready `judge`), then `run`."""
    model_init_kwargs = dict(
        revision=model_args.model_revision,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = model_init_kwargs

    resume = resume_argument(trainer_class, training_args)
    check_hub_push(training_args)
    model = resolve_model(model_args.model_name_or_path, training_args)  # a missing local folder fails first
    dataset = load_train_dataset(script_args)
    dataset = check_prompt_lengths(dataset, model, script_args, training_args)

    trainer = trainer_class(
        model,
        args=training_args,
        train_dataset=dataset,
        peft_config=get_peft_config(model_args),
        **trainer_kwargs,
    )
    return run(trainer, resume, dataset_name=script_args.dataset_name)


def run(trainer, resume_from_checkpoint: str | bool | None, *, dataset_name: str | None = None):
    """Train (resuming as `resume_argument` decided), then save the model, its tokenizer, `trainer_state.json`
    and a model card to `output_dir`, and push them to the Hub with `--push_to_hub`. Returns the trainer.

    The one path every example script ends with. A `JudgeFailureError` (the judge circuit breaker)
    propagates after the trainer saved its checkpoint; nothing else is saved then.
    """
    from trl_rankreward.trainers.console_log import use_compact_console_log

    use_compact_console_log(trainer)  # idempotent: a no-op once the trainers do it themselves
    args = trainer.args
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    trainer.save_model(args.output_dir)  # every process (ZeRO-3 gathers the weights); written by the main one
    trainer.save_state()  # output_dir/trainer_state.json: this run's log history, read by scripts/quickstart.sh
    card_dataset = _hub_dataset_id(dataset_name)
    if trainer.is_world_process_zero() and hasattr(trainer, "create_model_card"):
        # dataset_label: our section of the card names a local dataset too (TRL's part links Hub ids only)
        trainer.create_model_card(model_name=_model_name(args), dataset_name=card_dataset, dataset_label=dataset_name)
    trainer.accelerator.print(f"Model, tokenizer and model card saved to {args.output_dir}")
    if args.push_to_hub:
        trainer.push_to_hub(dataset_name=card_dataset)
        trainer.accelerator.print(f"Pushed to https://huggingface.co/{trainer.hub_model_id}")
    return trainer


def _model_name(args) -> str:
    """As TRL names the model in its cards: the Hub repo's name, else the output folder's."""
    return args.hub_model_id.split("/")[-1] if args.hub_model_id else Path(args.output_dir).name


def _hub_dataset_id(dataset_name: str | None) -> str | None:
    """`dataset_name` when it is a Hub id (the model card links it), None for a local file or folder."""
    if not dataset_name or os.path.exists(dataset_name) or dataset_name.startswith((".", "/", "~")):
        return None
    return dataset_name if re.fullmatch(r"[\w.-]+(/[\w.-]+)?", dataset_name) else None


# ---- the command line: one-line errors -----------------------------------------------------------


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that describe a fix for the user: printed as one line, without a traceback."""
    from trl_rankreward.judging.backends.base import BackendError
    from trl_rankreward.judging.requests import JudgeError
    from trl_rankreward.rewards.base import GroupJudgingFailed

    errors: list[type[BaseException]] = [ValueError, OSError, BackendError, JudgeError, GroupJudgingFailed]
    try:  # the trainers import torch and trl; a failure to import them is not a user error to hide
        from trl_rankreward.trainers.judge_reward import JudgeFailureError

        errors.append(JudgeFailureError)
    except ImportError:
        pass
    return tuple(errors)


def cli(main: Callable, make_parser: Callable, argv: Sequence[str] | None = None) -> int:
    """Parse the command line with `make_parser()`, run `main(*parsed)`; return the exit status.

    A library error (`user_errors`: a bad config value, a missing dataset or checkpoint, an
    unreachable judge, `DatasetError`, `JudgeFailureError`, ...) is printed as one line,
    `<script>: error: <Type>: <message> [full traceback: --traceback]`, and returns 1; `--traceback` or TRL_RANKREWARD_TRACEBACK=1
    re-raises it with its full traceback (also exit status 1). Ctrl-C returns 130. After a
    successful `main` the process group of a distributed launch is destroyed (`end_process_group`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    show_traceback = TRACEBACK_FLAG in argv or os.environ.get(TRACEBACK_ENV, "").lower() in ("1", "true", "yes")
    argv = [a for a in argv if a != TRACEBACK_FLAG]
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "train"
    try:
        parser = make_parser()
        parser.error = _raise_usage_error  # one line, not argparse's usage block of every field
        parsed = parser.parse_args_and_config(argv)
        check_field_types(parsed)
        main(*parsed)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (yaml.YAMLError, *user_errors()) as exc:
        if show_traceback:
            traceback.print_exc()
        else:
            message = _yaml_problem(exc) if isinstance(exc, yaml.YAMLError) else _one_line(exc)
            print(f"{prog}: error: {message} [full traceback: {TRACEBACK_FLAG}]", file=sys.stderr)
        return 1
    end_process_group()
    return 0


class UsageError(ValueError):
    """A flag or config value the parser refused (argparse's message, as one line)."""


def _raise_usage_error(message: str):
    raise UsageError(f"{message} (see --help)")


def _yaml_problem(exc) -> str:
    """A YAML syntax error as one line: the file, line and column, and what is wrong there."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark else "the --config file"
    return f"{where}: invalid YAML ({getattr(exc, 'problem', None) or exc})"


def check_field_types(parsed) -> None:
    """A config value of the wrong kind (`learning_rate: [1, 2]`) is an error naming the key, before any model
    loads: a YAML value reaches the config as it is, with no conversion to the field's type. Fields whose default
    is a number must hold a number."""
    import dataclasses

    for config in parsed:
        if not dataclasses.is_dataclass(config):
            continue
        for f in dataclasses.fields(config):
            default, value = f.default, getattr(config, f.name, None)
            if isinstance(default, bool) or not isinstance(default, int | float) or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{f.name}: expected a number, got {value!r} ({type(value).__name__})")


def end_process_group() -> None:
    """Destroy the launch's process group, if there is one, before the interpreter exits, as PyTorch asks.

    A gloo group left to the interpreter's shutdown can abort the process after the work is done
    ("terminate called without an active exception", SIGABRT: pytorch/pytorch#190489). Ending it here
    removes that cause; a rarer abort at exit with the same message remains (docs/performance.md,
    "Launch matrix"). Only after a success: the barrier would wait for a rank that failed (under
    `accelerate launch`, the launcher then stops the others).
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()  # every rank done with every collective (rank 0 may still be writing the card)
        dist.destroy_process_group()


def _one_line(exc: BaseException) -> str:
    """`Type: message`; a multi-line message keeps its lines (they list what to fix), indented."""
    message = str(exc).strip() or repr(exc)
    return f"{type(exc).__name__}: " + message.replace("\n", "\n    ")
