"""`run_script`: what an example script's `if __name__ == "__main__"` runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from ..trainers.extension_builds import check_build_locks
from ..user_errors import run_reporting_errors


def run_script(main: Callable, make_parser: Callable, argv: Sequence[str] | None = None) -> int:
    """Parse the command line with `make_parser()` (a `ScriptParser`), run `main(*parsed)`; return the exit status.

    Errors follow `trl_rankreward.user_errors`, as in the `trl-rankreward` CLI. Before `main`, a build lock
    left by a killed DeepSpeed op build stops the run, naming the file (`trainers.extension_builds`). After a
    successful `main` the process group of a distributed launch is destroyed (`end_process_group`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "train"

    def body() -> None:
        parsed = make_parser().parse_args_and_config(argv)
        check_build_locks()  # before DeepSpeed builds an op: a killed build's lock would hang it, silently
        main(*parsed)
        end_process_group()

    return run_reporting_errors(prog, body, argv)


def end_process_group() -> None:
    """Destroy the launch's process group, if there is one, before the interpreter exits, as PyTorch asks.

    Call it once the trainer is released: the trainer's DDP or DeepSpeed wrapper holds the group, and
    a trainer lives in reference cycles (its callbacks point back at it), hence the garbage collection
    first. Then nothing else holds the group (`trainers.base.WORLD_GROUP_DEFAULTS` says what once did),
    and destroying it stops gloo's threads here, in order, instead of leaving them to the interpreter's
    exit, where a finished rank could abort ("terminate called without an active exception", exit -6).
    Only after a success: the barrier would wait for a rank that failed (under `accelerate launch`, the
    launcher then stops the others).
    """
    import gc

    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.barrier()  # every rank done with every collective (rank 0 may still be writing the card)
        dist.destroy_process_group()
