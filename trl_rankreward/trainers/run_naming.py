"""How a judge-reward run is named for W&B and the other loggers: by its method and its judge."""

from __future__ import annotations

import os


def name_the_run(args, method: str) -> None:
    """Name runs by method and judge for W&B (and other loggers), unless the user did: `run_name`
    defaults to `<method>-<judge>-<output_dir name>`; W&B's group and tags come from the
    environment variables `WANDB_RUN_GROUP` (default: the method) and `WANDB_TAGS`."""
    judge = (args.judge_model or "embedded").rstrip("/").split("/")[-1]
    if not args.run_name:
        args.run_name = f"{method}-{judge}-{os.path.basename(os.path.normpath(args.output_dir))}"
    os.environ.setdefault("WANDB_RUN_GROUP", method)
    os.environ.setdefault("WANDB_TAGS", f"trl-rankreward,{method},judge:{judge}")
