"""Which checkpoint to resume from when the user asks for "the latest".

Transformers writes `checkpoint-N` in place, `trainer_state.json` last; a process killed
while saving leaves a folder without it. `get_last_checkpoint` would pick that folder and
the resume would fail on a missing file, so we pick the newest folder that is complete.
"""

from __future__ import annotations

import os
import re

from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging

from ..rewards.state_files import METHOD_STATE_NAME
from ..user_errors import ConfigError

logger = logging.get_logger(__name__)

_CHECKPOINT = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


def checkpoint_folder(output_dir: str, step: int) -> str:
    """`output_dir/checkpoint-{step}`: where transformers saves step `step` (and a resume reads it)."""
    return os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")


def checkpoint_steps(output_dir: str) -> list[int]:
    """The steps N of the `checkpoint-N` folders in `output_dir`, newest first (none: empty)."""
    if not os.path.isdir(output_dir):
        return []
    return sorted((int(m.group(1)) for name in os.listdir(output_dir) if (m := _CHECKPOINT.match(name))), reverse=True)


def latest_complete_checkpoint(
    output_dir: str, required: tuple[str, ...] = (TRAINER_STATE_NAME, METHOD_STATE_NAME)
) -> str:
    """The newest `checkpoint-N` in `output_dir` holding every file of `required` (by default
    `trainer_state.json` and the reward method's state); half-written newer ones are skipped with
    a warning. Raises if there is none."""
    for step in checkpoint_steps(output_dir):
        path = checkpoint_folder(output_dir, step)
        missing = [f for f in required if not os.path.exists(os.path.join(path, f))]
        if not missing:
            return path
        logger.warning(f"Skipping {path}: it lacks {', '.join(missing)} (a save was interrupted)")
    raise ConfigError(
        f"resume_from_checkpoint=True (--resume_from_checkpoint latest), but {output_dir} holds no complete "
        f"checkpoint (a checkpoint-N folder with {' and '.join(required)}); pass a checkpoint path, or start "
        "without resuming"
    )
