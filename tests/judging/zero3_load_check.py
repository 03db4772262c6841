"""Run by test_local_models.py in a fresh process: loads judge-side models under a live ZeRO-3 config.

One CPU process (gloo, world size 1) with a live `HfDeepSpeedConfig` at stage 3, as `accelerate launch
--config_file accelerate_configs/zero3_cpu.yaml` leaves it. Prints one JSON line: for a plain
`from_pretrained` (the control: it must come out partitioned, else the setup proves nothing), the
EmbeddingJudge's encoder and a TransformersBackend loaded from a path, whether each came out
partitioned and its parameter count; whether ZeRO-3 is still on afterwards; what a partitioned model
object handed to TransformersBackend raised.

    python tests/judging/zero3_load_check.py TINY_MODEL_DIR
"""

import asyncio
import json
import os
import socket
import sys

os.environ["DS_ACCELERATOR"] = "cpu"  # before deepspeed is imported


def main(model_dir: str) -> None:
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from transformers.integrations import HfDeepSpeedConfig, is_deepspeed_zero3_enabled

    from trl_rankreward.judging.backends.transformers_backend import TransformersBackend, is_partitioned
    from trl_rankreward.judging.quality_judge import EmbeddingJudge

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # what accelerate launch sets for each process (deepspeed.zero.Init reads LOCAL_RANK)
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    live = HfDeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})  # noqa: F841

    def described(model) -> dict:
        return {"partitioned": is_partitioned(model), "numel": sum(p.numel() for p in model.parameters())}

    report = {"zero3_before": is_deepspeed_zero3_enabled()}
    control = AutoModelForCausalLM.from_pretrained(model_dir)
    report["control"] = described(control)
    judge = EmbeddingJudge()
    judge.set_references("q", ["The sky is blue.", "It is grey."])
    report["embedding"] = described(judge._load_model())
    report["embedding_vector_norm"] = float((asyncio.run(judge.embed(["a blue sky"])) ** 2).sum())
    backend = TransformersBackend(model_dir, device="cpu")
    report["backend"] = described(backend.model)
    answer = asyncio.run(backend.complete([{"role": "user", "content": "hi"}], max_tokens=4))
    report["backend_generated_tokens"] = answer.completion_tokens
    report["zero3_after"] = is_deepspeed_zero3_enabled()
    try:
        TransformersBackend(control, tokenizer=backend.tokenizer)
        report["partitioned_object"] = "accepted"
    except ValueError as exc:
        report["partitioned_object"] = str(exc)
    print("REPORT " + json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
