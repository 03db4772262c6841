"""Per-step time and peak memory of PPO with a critic (`advantage_estimator="gae"`) against GRPO.

Same policy, prompts, batch (completions per step) and completion length for every row; a
plain TRL reward function (no judge), so the numbers are the trainer's own cost: generation,
log-probs, the critic's extra forward at rollout time, its forward and backward in training,
and its optimizer step. Each row runs in a fresh process so that its peak memory is its own
(resident set size on CPU; `torch.cuda.max_memory_allocated` on a GPU). The first step (model
loading, warm-up) is left out of the step time.

    python benchmarks/ppo_vs_grpo.py                       # tiny model on CPU, 8 steps per row
    python benchmarks/ppo_vs_grpo.py --hidden 256 --layers 4 --steps 12 --markdown
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

ROWS = {
    "GRPO (group, G=4)": {"advantage_estimator": "group", "num_generations": 4},
    "PPO (gae, G=4)": {"advantage_estimator": "gae", "num_generations": 4},
    "PPO (gae, G=1)": {"advantage_estimator": "gae", "num_generations": 1},
}


def run_row(options: dict, args) -> dict:
    """One training run in this process; returns its timings and peak memory."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    from trl_rankreward.testing import build_tiny_model
    from trl_rankreward.trainers.base import CriticPPOConfig, CriticPPOTrainer

    model = str(build_tiny_model(os.path.join(args.work_dir, f"model-{args.hidden}-{args.layers}"),
                                 hidden_size=args.hidden, num_layers=args.layers))  # fmt: skip

    def low_token_share(completion_ids, **_):
        return [sum(t < 128 for t in ids) / max(len(ids), 1) for ids in completion_ids]

    class StepClock(TrainerCallback):
        def __init__(self):
            self.ends = []

        def on_step_end(self, *_, **__):
            self.ends.append(time.perf_counter())

    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = CriticPPOConfig(
        output_dir=os.path.join(args.work_dir, "out"), per_device_train_batch_size=args.batch,
        max_completion_length=args.completion_tokens, max_steps=args.steps, learning_rate=1e-4,
        critic_learning_rate=1e-4, loss_type="bnpo", beta=0.0, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=device == "cpu", bf16=device == "cuda", activation_checkpointing=False, seed=0, **options,
    )  # fmt: skip
    prompts = Dataset.from_list([{"prompt": f"Question {i}: say something."} for i in range(64)])
    trainer = CriticPPOTrainer(model, reward_funcs=low_token_share, args=config, train_dataset=prompts)
    clock = StepClock()
    trainer.add_callback(clock)
    trainer.train()
    steps = [b - a for a, b in zip(clock.ends, clock.ends[1:])]  # step 1 (warm-up) left out
    if device == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    return {"step_s": sum(steps) / len(steps), "peak_mb": peak_mb, "device": device, "steps_timed": len(steps)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16, help="completions per step (every row)")
    parser.add_argument("--completion_tokens", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--row", help=argparse.SUPPRESS)  # internal: run one row, print JSON
    parser.add_argument("--work_dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        print("RESULT " + json.dumps(run_row(ROWS[args.row], args)))
        return 0

    from trl_rankreward.testing import run_in_group

    work_dir = args.work_dir or tempfile.mkdtemp(prefix="ppo_vs_grpo-")
    results = {}
    for name in ROWS:
        command = [sys.executable, __file__, "--row", name, "--work_dir", work_dir,
                   *(f"--{k}={getattr(args, k)}" for k in ("steps", "batch", "completion_tokens", "hidden", "layers"))]  # fmt: skip
        # its own process group, killed whole when the row ends (or on Ctrl-C): no process outlives its row
        done = run_in_group(command, timeout=None, capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
        line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        if done.returncode or not line:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        results[name] = json.loads(line[0].removeprefix("RESULT "))
    base = results["GRPO (group, G=4)"]
    header = ["row", "s/step", "vs GRPO", "peak MB", "vs GRPO"]
    lines = [[name, f"{r['step_s']:.3f}", f"{r['step_s'] / base['step_s']:.2f}x", f"{r['peak_mb']:.0f}",
              f"{r['peak_mb'] / base['peak_mb']:.2f}x"] for name, r in results.items()]  # fmt: skip
    device = base["device"]
    print(f"{device}; hidden {args.hidden}, {args.layers} layers; {args.batch} completions of "
          f"{args.completion_tokens} tokens per step; mean of {base['steps_timed']} steps after the first")  # fmt: skip
    if args.markdown:
        print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        print("\n".join("| " + " | ".join(row) + " |" for row in lines))
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
        for row in [header, *lines]:
            print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
