"""`--resume_from_checkpoint`: a checkpoint path, `latest` (the newest complete checkpoint) or nothing.

Resolved here, before any model loads, so a missing checkpoint fails at once, and `latest`
becomes a path the trainer is handed (it then does not look, and warn, a second time).
"""

from __future__ import annotations

import os
import sys

#: values of `--resume_from_checkpoint` meaning "the newest complete checkpoint in output_dir" / "do not resume"
RESUME_LATEST = ("latest", "true", "last")
RESUME_NONE = ("false", "none", "no", "")


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


def resume_argument(trainer_class, training_args) -> str | None:
    """What to pass to `trainer.train(resume_from_checkpoint=...)`: a checkpoint path or None (module docstring).

    Starting afresh in a folder that holds checkpoints is allowed (they get overwritten), with a note
    naming the resume flag.
    """
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
