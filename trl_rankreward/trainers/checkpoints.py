"""Which checkpoint to resume from when the user asks for "the latest".

Transformers writes `checkpoint-N` in place, `trainer_state.json` last; a process killed
while saving leaves a folder without it. `get_last_checkpoint` would pick that folder and
the resume would fail on a missing file, so we pick the newest folder that is complete.
"""

from __future__ import annotations

import os
import re

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import logging

from ..rewards.state_files import METHOD_STATE_NAME

logger = logging.get_logger(__name__)

TRAINER_STATE_NAME = "trainer_state.json"
_CHECKPOINT = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


def latest_complete_checkpoint(output_dir: str) -> str:
    """The newest `checkpoint-N` in `output_dir` holding `trainer_state.json` and the reward method's
    state; half-written newer ones are skipped with a warning. Raises if there is none."""
    found = []
    if os.path.isdir(output_dir):
        found = [(int(m.group(1)), name) for name in os.listdir(output_dir) if (m := _CHECKPOINT.match(name))]
    for _, name in sorted(found, reverse=True):
        path = os.path.join(output_dir, name)
        missing = [f for f in (TRAINER_STATE_NAME, METHOD_STATE_NAME) if not os.path.exists(os.path.join(path, f))]
        if not missing:
            return path
        logger.warning(f"Skipping {path}: it lacks {', '.join(missing)} (a save was interrupted)")
    raise ValueError(
        f"resume_from_checkpoint=True, but {output_dir} holds no complete checkpoint (a checkpoint-N folder with "
        f"{TRAINER_STATE_NAME} and {METHOD_STATE_NAME}); pass a checkpoint path, or start without resuming"
    )
