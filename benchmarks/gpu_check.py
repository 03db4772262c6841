"""GPU check: RankBufferGRPOTrainer vs plain GRPOTrainer, and the in-process judge.

1. GRPO step time: a random-init Qwen3-style policy (`build_tiny_model`, ~42M parameters at
   the defaults) trains --steps GRPO steps in bf16 (TRL 1.16, no vLLM) twice, with the same
   model, data and generation settings: `trl.GRPOTrainer` with a plain TRL reward function
   (length relative to the batch's longest completion), and `RankBufferGRPOTrainer` as users
   run it (`RankBufferGRPOConfig`: Nectar init from the `references` column, K0 = 4, anchors
   in `{output_dir}/anchors.sqlite`, lambda_fmt 0.2) with a zero-latency deterministic judge
   (`OracleJudge`, quality = text length) passed as `judge=`. The reward path is timed from public
   parts: the plain run's reward function (wrapped here), and the time RankBufferGRPOTrainer logs
   as waiting for its rewards (`judge/wait_seconds`: judging, buffer updates, gathering). Reported:
   the ratio of median step times and each reward path's share of the step time, both over the
   steps after --warmup-steps.
2. Judge prefill: `TransformersBackend` on a random-init Qwen3-style judge in bf16, batched
   coarse-ranking prompts of realistic length (4 anchors + candidate of ~1.5 KB each, rendered
   with the paper's template), `max_tokens=1`: prompt tokens per second by batch size.

Needs torch, transformers (5.17 or later), accelerate, trl 1.16, datasets; not openai or wandb.
Prints a report and writes it as JSON to $OUT/gpu_check.json when $OUT is set.

    bash benchmarks/gpu_check.sh             # on a GPU machine (see the script for wheels)
    python benchmarks/gpu_check.py --tiny    # CPU smoke check: tiny sizes, not a measurement
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root: trl_rankreward
os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORDS = "write explain compare summarize the sea poem history science answer briefly".split()


def length_quality(query_id: str, text: str) -> float:
    """The zero-latency judge's latent quality: longer is better (deterministic, no model)."""
    return float(len(text))


def plain_reward(completions, **kwargs):
    """Plain TRL reward function: each completion's length relative to the longest in the batch."""
    lengths = [len(c if isinstance(c, str) else "".join(m.get("content", "") for m in c)) for c in completions]
    return [float(n) / max(max(lengths), 1) for n in lengths]


def training_columns(n: int) -> dict[str, list]:
    """Columns of `n` queries in our layout: chat `prompt`, `query_id`, `rubrics`, 7 `references` (best first).

    Reference r repeats a phrase 7 - r times, so the references are ranked best first under `length_quality`.
    """
    rng = random.Random(0)
    return {
        "prompt": [[{"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(8))}] for _ in range(n)],
        "query_id": [f"q{i}" for i in range(n)],
        "rubrics": [[{"text": "Answers the request", "weight": 1.0}] for _ in range(n)],
        "references": [[f"reference {r} " * (7 - r) for r in range(7)] for _ in range(n)],
    }


def shared_settings(args, config_class, cuda: bool) -> dict:
    """Model, batch and generation settings both runs share (CPU: fp32; GPU: bf16; no checkpointing).

    transformers 5.24 renamed `gradient_checkpointing` to `activation_checkpointing` (the old name is a
    deprecated alias there); 5.17 knows only the old name, so the name is taken from the config class.
    """
    names = {f.name for f in dataclasses.fields(config_class)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {
        "use_cpu": not cuda, "bf16": cuda, "report_to": "none", checkpointing: False,
        "per_device_train_batch_size": args.batch, "num_generations": args.group_size,
        "max_completion_length": args.completion_length, "max_steps": args.steps, "logging_steps": 1,
        "learning_rate": 1e-5, "save_strategy": "no", "seed": 0, "log_completions": False,
    }  # fmt: skip


def _cuda_sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def step_timer():
    """A `TrainerCallback` timing each optimizer step and the reward path's time in it: the calls of a reward
    function passed through `timed`, or the `judge/wait_seconds` the trainer logs for the step."""
    from transformers import TrainerCallback

    from trl_rankreward.trainers.judge_reward import WAIT_SECONDS

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.step_s: list[float] = []
            self.reward_s: list[float] = []
            self._start, self._reward = 0.0, 0.0

        def timed(self, reward_func):
            """`reward_func` (a TRL reward function, its name kept) with its calls counted as reward time."""

            @functools.wraps(reward_func)
            def wrapper(*a, **kw):
                start = time.perf_counter()
                try:
                    return reward_func(*a, **kw)
                finally:
                    self._reward += time.perf_counter() - start

            return wrapper

        def on_step_begin(self, *a, **kw):
            _cuda_sync()
            self._start, self._reward = time.perf_counter(), 0.0

        def on_step_end(self, *a, **kw):
            _cuda_sync()
            self.step_s.append(time.perf_counter() - self._start)
            self.reward_s.append(self._reward)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and WAIT_SECONDS in logs:  # logged right after the step's end (logging_steps=1)
                self.reward_s[-1] = logs[WAIT_SECONDS]

    return StepTimer()


def summarize(step_s: list[float], reward_s: list[float], warmup: int) -> dict:
    """Median step time and the reward path's share (sum of reward time / sum of step time) after `warmup` steps."""
    steps, rewards = step_s[warmup:], reward_s[warmup:]
    if not steps:
        raise ValueError(f"No step left after {warmup} warm-up steps (got {len(step_s)}); raise --steps")
    return {
        "step_s": step_s, "reward_s": reward_s, "median_step_s": statistics.median(steps),
        "median_reward_s": statistics.median(rewards), "reward_share": sum(rewards) / sum(steps),
    }  # fmt: skip


def grpo_compare(args, policy_dir: str, work_dir: str) -> dict:
    """Part 1: plain `GRPOTrainer` and `RankBufferGRPOTrainer` on the same policy, data and settings."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from trl_rankreward import RankBufferGRPOConfig, RankBufferGRPOTrainer
    from trl_rankreward.testing import OracleJudge

    cuda = torch.cuda.is_available()
    queries = max(64, args.steps * args.batch // args.group_size)  # every step's queries are new: first epoch
    data = Dataset.from_dict(training_columns(queries))
    report: dict = {"warmup_steps": args.warmup_steps, "queries": queries}

    plain_timer = step_timer()
    plain = GRPOTrainer(
        model=policy_dir, reward_funcs=plain_timer.timed(plain_reward), train_dataset=data,
        args=GRPOConfig(output_dir=f"{work_dir}/plain", **shared_settings(args, GRPOConfig, cuda)),
        processing_class=AutoTokenizer.from_pretrained(policy_dir), callbacks=[plain_timer],
    )  # fmt: skip
    plain.train()
    report["policy_parameters"] = sum(p.numel() for p in plain.model.parameters())
    report["plain"] = summarize(plain_timer.step_s, plain_timer.reward_s, args.warmup_steps)
    del plain
    if cuda:
        torch.cuda.empty_cache()

    judge = OracleJudge(length_quality)
    rank_args = RankBufferGRPOConfig(
        output_dir=f"{work_dir}/rank_buffer", k0=4, **shared_settings(args, RankBufferGRPOConfig, cuda)
    )
    rank_timer = step_timer()
    rank = RankBufferGRPOTrainer(
        policy_dir, args=rank_args, train_dataset=data, judge=judge,
        processing_class=AutoTokenizer.from_pretrained(policy_dir), callbacks=[rank_timer],
    )  # fmt: skip
    rank.train()
    report["rank_buffer"] = summarize(rank_timer.step_s, rank_timer.reward_s, args.warmup_steps)
    report["rank_buffer"].update(
        judge_calls=dict(judge.counts),
        buffers=sum(1 for q in data["query_id"] if rank.reward_method.anchors(q)),
        anchor_store=rank_args.anchor_store,
    )
    del rank
    if cuda:
        torch.cuda.empty_cache()
    report["step_time_ratio"] = report["rank_buffer"]["median_step_s"] / report["plain"]["median_step_s"]
    return report


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


def report_lines(report: dict) -> list[str]:
    """The printed summary of a report."""
    from trl_rankreward.trainers.judge_reward import WAIT_SECONDS

    g, plain, rank = report["grpo"], report["grpo"]["plain"], report["grpo"]["rank_buffer"]
    lines = [
        f"device {report['device']}; torch {report['torch']}, transformers {report['transformers']}, "
        f"trl {report['trl']}; policy {g['policy_parameters'] / 1e6:.1f}M parameters",
        f"GRPO median step (after {g['warmup_steps']} warm-up step(s)): plain GRPOTrainer {plain['median_step_s']:.3f} s, "
        f"RankBufferGRPOTrainer {rank['median_step_s']:.3f} s, ratio {g['step_time_ratio']:.3f}",
        f"reward path (plain: reward function; RankBuffer: {WAIT_SECONDS}) share of step time: "
        f"plain {100 * plain['reward_share']:.2f}%, "
        f"RankBuffer {100 * rank['reward_share']:.2f}% (median {1000 * rank['median_reward_s']:.1f} ms/step); "
        f"judge calls {rank['judge_calls']}, {rank['buffers']} buffers",
    ]  # fmt: skip
    for row in report["judge_prefill"]:
        lines.append(f"judge prefill batch {row['batch']:>3}: {row['prompt_tokens_mean']:.0f} prompt tokens/request, "
                     f"{row['prefill_tokens_per_s']:.0f} tokens/s")  # fmt: skip
    return lines


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="CPU smoke sizes (seconds, not a measurement)")
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup-steps", type=int, default=1, help="first steps left out of the medians and shares")
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
        args.hidden, args.layers, args.steps, args.batch, args.completion_length = 64, 2, 3, 8, 8
        args.group_size, args.judge_hidden, args.judge_layers = 4, 64, 2
        args.judge_batches, args.judge_requests, args.anchor_chars = [1, 4], 4, 200
    if not 0 <= args.warmup_steps < args.steps:
        p.error(f"--warmup-steps must be in [0, --steps={args.steps}), got {args.warmup_steps}")

    import torch
    import transformers
    import trl

    from trl_rankreward.testing import build_tiny_model

    cuda = torch.cuda.is_available()
    report: dict = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
                    "transformers": transformers.__version__, "trl": trl.__version__, "args": vars(args)}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        heads = max(2, args.hidden // 64)
        policy = str(
            build_tiny_model(f"{tmp}/policy", hidden_size=args.hidden, num_layers=args.layers, num_heads=heads)
        )
        report["grpo"] = grpo_compare(args, policy, tmp)
        judge_heads = max(2, args.judge_hidden // 64)
        judge = str(build_tiny_model(f"{tmp}/judge", hidden_size=args.judge_hidden, num_layers=args.judge_layers,
                                     num_heads=judge_heads))  # fmt: skip
        report["judge_prefill"] = judge_prefill(judge, args.judge_batches, args.judge_requests, args.anchor_chars)

    print("\n".join(report_lines(report)))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_check.json"), "w") as fh:
            json.dump(report, fh, indent=1)
    return report


if __name__ == "__main__":
    main()
