"""The policy: a local folder or Hub id, or `tiny`, a tiny random model built once per machine."""

from __future__ import annotations

from pathlib import Path

#: `model_name_or_path` value that builds a tiny random model (`trl_rankreward.tiny.build_tiny_model`)
TINY_MODEL = "tiny"


def resolve_model(name: str, training_args) -> str:
    """`name`, or for `tiny` the folder of a tiny random model built under `output_dir/tiny_model`.

    The local main process of each machine builds it while the others wait at a barrier
    (`TrainingArguments.main_process_first`); the build itself is atomic, so machines that share
    a filesystem never read a half-written folder either.
    """
    if name != TINY_MODEL:
        check_local_model(name)
        return name
    from ..tiny import build_tiny_model

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
