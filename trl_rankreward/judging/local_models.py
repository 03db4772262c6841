"""Loading the judge side's in-process models whole, outside DeepSpeed ZeRO-3's partitioning.

Under `accelerate launch` with a ZeRO-3 config, transformers holds a live `HfDeepSpeedConfig`
(`transformers.integrations.is_deepspeed_zero3_enabled()` is true) and `from_pretrained` builds
every model inside `deepspeed.zero.Init`: its weights are split across the processes, and every
forward pass gathers them with collectives that all processes must join. That is right for the
policy, its reference and critic, which every process runs. It is wrong for the models the judge
side loads in this process (`EmbeddingJudge`'s sentence encoder, a `TransformersBackend` GenRM,
MetaRM or judge, the evaluation judge): only the main process judges, so the first call of a
partitioned copy waits for processes that never join (a hang on GPUs; gloo aborts on CPU with
"Received data size doesn't match expected size").

`outside_zero3()` hides the DeepSpeed config from transformers while such a model loads, so it is
built whole on the process that runs it, and restores it afterwards. The switch is process-wide:
a lock keeps two judge loads from interleaving, and the judge side loads its models while the main
thread builds the trainer, awaits the rewards or computes log-probabilities, none of which reads
the config (loading a model and `generate`'s `synced_gpus` do).
`is_partitioned(model)` tells a model that was loaded partitioned anyway (handed in by a caller).
transformers is imported inside, on first use, so `judging` stays importable without torch.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_LOCK = threading.Lock()


@contextlib.contextmanager
def outside_zero3() -> Iterator[None]:
    """Within the block, `from_pretrained` does not partition (transformers sees no ZeRO-3 config)."""
    with _LOCK:
        from transformers.integrations import deepspeed as hf_deepspeed

        saved = hf_deepspeed._hf_deepspeed_config_weak_ref  # the one place transformers keeps it
        hf_deepspeed.unset_hf_deepspeed_config()
        try:
            yield
        finally:
            hf_deepspeed._hf_deepspeed_config_weak_ref = saved


def is_partitioned(model) -> bool:
    """True when any of the model's parameters is a ZeRO-3 partition (DeepSpeed tags those with `ds_id`)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


__all__ = ["is_partitioned", "outside_zero3"]
