"""GPU check for issue 9: RankBuffer reward vs a plain TRL reward in GRPO, and the in-process judge.

1. GRPO step time: a random-init Qwen3-style policy (`build_tiny_model`, ~42M parameters at
   the defaults) trains --steps GRPO steps in bf16 (TRL 1.16 `GRPOTrainer`, no vLLM) twice:
   with a plain TRL reward function (rank by length), and with `RankBufferReward` behind a
   zero-latency judge (`OracleJudge` answering from the same length quality). The RankBuffer
   reward is called through a TRL reward function that cuts the (single-process) batch into
   whole groups, so it runs on any branch state; the ratio of median step times (first step
   excluded: warm-up) is the share our reward path adds.
2. Judge prefill: `TransformersBackend` on a random-init Qwen3-style judge in bf16, batched
   coarse-ranking prompts of realistic length (4 anchors + candidate of ~1.5 KB each, rendered
   with the paper's template), `max_tokens=1`: prompt tokens per second by batch size.

Prints a report and writes it as JSON to $OUT/gpu_check.json when $OUT is set.

    bash benchmarks/gpu_check.sh             # on the GPU machine (see the script for wheels)
    python benchmarks/gpu_check.py --tiny    # CPU smoke check: tiny sizes, seconds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _text(completion) -> str:
    return completion if isinstance(completion, str) else "".join(m.get("content", "") for m in completion)


def plain_reward(completions, **kwargs):
    """Plain TRL reward: rank rewards by length within each group of G consecutive rows."""
    lengths = [len(_text(c)) for c in completions]
    return [float(n) / max(max(lengths), 1) for n in lengths]


class RankBufferTRLReward:
    """RankBufferReward as a TRL reward function (single process: rows are whole groups)."""

    __name__ = "rank_buffer"

    def __init__(self, group_size: int):
        from trl_rankreward.rewards.rank_buffer import RankBufferReward
        from trl_rankreward.testing import OracleJudge

        self.G, self.epoch, self.step = group_size, 0, 0
        self.method = RankBufferReward(OracleJudge(lambda qid, text: float(len(text))), k0=4)
        self.seconds: list[float] = []

    def __call__(self, prompts, completions, query_id, references, **kwargs):
        from trl_rankreward.rewards.base import Group

        start = time.perf_counter()
        texts = [_text(c) for c in completions]
        groups = [Group(str(query_id[i]), _text(prompts[i]), (), texts[i : i + self.G], references=references[i])
                  for i in range(0, len(texts), self.G)]  # fmt: skip
        results = asyncio.run(self.method.score(groups, epoch=self.epoch, step=self.step))
        self.method.step_metrics(results)
        self.step += 1
        self.seconds.append(time.perf_counter() - start)
        return [r for res in results for r in res.rewards]


def grpo_step_times(reward, model_dir: str, tokenizer_dir: str, args, out_dir: str) -> tuple[list[float], int]:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class Timer(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []

        def on_step_begin(self, *a, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, *a, **kw):
            self.times.append(time.perf_counter() - self.t)

    cuda = torch.cuda.is_available()
    rng = random.Random(0)
    words = "write explain compare summarize the sea poem history science answer briefly".split()
    n = 64
    ds = Dataset.from_dict({
        "prompt": [[{"role": "user", "content": " ".join(rng.choice(words) for _ in range(8))}] for _ in range(n)],
        "query_id": [f"q{i}" for i in range(n)],
        "references": [[f"reference {r} " * (7 - r) for r in range(7)] for _ in range(n)],
    })  # fmt: skip
    config = GRPOConfig(
        output_dir=out_dir, use_cpu=not cuda, bf16=cuda, report_to="none", gradient_checkpointing=False,
        per_device_train_batch_size=args.batch, num_generations=args.group_size,
        max_completion_length=args.completion_length, max_steps=args.steps, logging_steps=1, learning_rate=1e-5,
        save_strategy="no", seed=0, log_completions=False,
    )  # fmt: skip
    timer = Timer()
    trainer = GRPOTrainer(model=model_dir, reward_funcs=reward, args=config, train_dataset=ds,
                          processing_class=AutoTokenizer.from_pretrained(tokenizer_dir), callbacks=[timer])  # fmt: skip
    trainer.train()
    params = sum(p.numel() for p in trainer.model.parameters())
    del trainer
    if cuda:
        torch.cuda.empty_cache()
    return timer.times, params


def judge_prefill(model_dir: str, batch_sizes: list[int], requests: int, anchor_chars: int) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_rankreward.judging.backends.transformers_backend import TransformersBackend
    from trl_rankreward.judging.rendering import render_messages
    from trl_rankreward.judging.requests import CoarseRequest

    cuda = torch.cuda.is_available()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if cuda else torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rng = random.Random(0)
    words = "the answer follows because each step checks units and states assumptions clearly".split()

    def text(i: int) -> str:
        return f"response {i}: " + " ".join(rng.choice(words) for _ in range(anchor_chars // 6))

    messages = [
        render_messages(
            CoarseRequest(
                query="Explain the result.",
                rubrics=({"text": "Correct", "weight": 1},),
                query_id=f"q{i}",
                step=0,
                anchors=tuple(text(k) for k in range(4)),
                candidate=text(99),
            )
        )  # fmt: skip
        for i in range(requests)
    ]
    rows = []
    for bs in batch_sizes:
        backend = TransformersBackend(model, tokenizer, device="cuda" if cuda else "cpu", max_batch_size=bs)

        async def run(backend=backend):
            return await asyncio.gather(*(backend.complete(m, max_tokens=1) for m in messages))

        asyncio.run(run())  # warm-up
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        done = asyncio.run(run())
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        tokens = sum(c.prompt_tokens for c in done)
        rows.append({"batch": bs, "requests": requests, "prompt_tokens_mean": tokens / requests,
                     "seconds": wall, "prefill_tokens_per_s": tokens / wall})  # fmt: skip
    return rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="CPU smoke sizes (seconds, not a measurement)")
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=32, help="completions per step (per_device_train_batch_size)")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--completion-length", type=int, default=128)
    p.add_argument("--judge-hidden", type=int, default=1024)
    p.add_argument("--judge-layers", type=int, default=16)
    p.add_argument("--judge-batches", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--judge-requests", type=int, default=64)
    p.add_argument("--anchor-chars", type=int, default=1500)
    args = p.parse_args(argv)
    if args.tiny:
        args.hidden, args.layers, args.steps, args.batch, args.completion_length = 64, 2, 2, 8, 8
        args.group_size, args.judge_hidden, args.judge_layers = 4, 64, 2
        args.judge_batches, args.judge_requests, args.anchor_chars = [1, 4], 4, 200

    import torch

    from trl_rankreward.testing import build_tiny_model

    report: dict = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                    "torch": torch.__version__, "args": vars(args)}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        heads = max(2, args.hidden // 64)
        policy = str(
            build_tiny_model(f"{tmp}/policy", hidden_size=args.hidden, num_layers=args.layers, num_heads=heads)
        )
        plain_times, params = grpo_step_times(plain_reward, policy, policy, args, f"{tmp}/plain")
        rank = RankBufferTRLReward(args.group_size)
        rank_times, _ = grpo_step_times(rank, policy, policy, args, f"{tmp}/rank")
        median = lambda xs: statistics.median(xs[1:] or xs)  # noqa: E731 - first step is warm-up
        report["grpo"] = {
            "policy_parameters": params,
            "plain_step_s": plain_times, "rank_buffer_step_s": rank_times,
            "rank_buffer_reward_s": rank.seconds,
            "plain_median_s": median(plain_times), "rank_buffer_median_s": median(rank_times),
            "step_time_ratio": median(rank_times) / median(plain_times),
            "reward_share": median(rank.seconds) / median(rank_times),
        }  # fmt: skip
        judge_heads = max(2, args.judge_hidden // 64)
        judge = str(build_tiny_model(f"{tmp}/judge", hidden_size=args.judge_hidden, num_layers=args.judge_layers,
                                     num_heads=judge_heads))  # fmt: skip
        report["judge_prefill"] = judge_prefill(judge, args.judge_batches, args.judge_requests, args.anchor_chars)

    g = report["grpo"]
    print(f"device {report['device']}; policy {g['policy_parameters'] / 1e6:.1f}M parameters")
    print(f"GRPO median step: plain {g['plain_median_s']:.3f} s, rank_buffer {g['rank_buffer_median_s']:.3f} s, "
          f"ratio {g['step_time_ratio']:.3f}; RankBuffer reward {100 * g['reward_share']:.2f}% of its step")  # fmt: skip
    for row in report["judge_prefill"]:
        print(f"judge prefill batch {row['batch']:>3}: {row['prompt_tokens_mean']:.0f} prompt tokens/request, "
              f"{row['prefill_tokens_per_s']:.0f} tokens/s")  # fmt: skip
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_check.json"), "w") as fh:
            json.dump(report, fh, indent=1)
    return report


if __name__ == "__main__":
    main()
