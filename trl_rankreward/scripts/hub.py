"""The Hub: reachable before training with `--push_to_hub`, and the names the model card uses."""

from __future__ import annotations

import os
import re
from pathlib import Path


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


def card_model_name(args) -> str:
    """As TRL names the model in its cards: the Hub repo's name, else the output folder's."""
    return args.hub_model_id.split("/")[-1] if args.hub_model_id else Path(args.output_dir).name


def hub_dataset_id(dataset_name: str | None) -> str | None:
    """`dataset_name` when it is a Hub id (the model card links it), None for a local file or folder."""
    if not dataset_name or os.path.exists(dataset_name) or dataset_name.startswith((".", "/", "~")):
        return None
    return dataset_name if re.fullmatch(r"[\w.-]+(/[\w.-]+)?", dataset_name) else None
