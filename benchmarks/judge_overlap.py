"""Step time with and without overlapping judging and TRL's log-prob passes (`overlap_judging`), on CPU.

A RankBuffer GRPO run (G=4, 4 groups per step, `beta > 0` so TRL runs the reference pass)
against a real OpenAI-compatible judge on loopback (the scripted judge of
`trl_rankreward.testing`) that waits `latency` seconds per call. RankBuffer judges in two
dependent rounds (coarse, then fine), so a step's judging takes about 2 x latency. For each
latency and each setting the script reports the mean step time (steps after the first) and two
timings the trainer logs (docs/metrics.md): the log-prob passes' time, `judge/overlap_window_seconds`
(from the end of generation to the reward wait: TRL's passes), and the time the reward path held the
training step, `judge/wait_seconds` (the step time itself varies more than that). The judge server
runs in this process (threads), so on a small CPU it competes with the passes for the cores.

With overlap, judging runs while the log-prob passes do, so the time the reward path adds over
a zero-latency judge should not exceed what the passes cannot cover: `max(0, judging -
passes)`, where `judging` is that added time measured without overlap. The `bound` column is
that, plus 5%.

    PYTHONPATH=. python benchmarks/judge_overlap.py                    # latencies 0, 0.5, 2 s
    PYTHONPATH=. python benchmarks/judge_overlap.py --layers 12 --steps 5 --latencies 0 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

from trl_rankreward.trainers.judge_reward import OVERLAP_WINDOW_SECONDS, WAIT_SECONDS

TIMINGS = {"passes": OVERLAP_WINDOW_SECONDS, "wait": WAIT_SECONDS}


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step, and the trainer's logged timings of it (`TIMINGS`)."""

    def __init__(self):
        self.times, self._start = [], None
        self.logged = {name: [] for name in TIMINGS}

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._start)

    def on_log(self, args, state, control, logs=None, **kwargs):
        for name, metric in TIMINGS.items():
            if metric in (logs or {}):
                self.logged[name].append(logs[metric])


def write_dataset(path: Path, queries: int) -> str:
    with open(path, "w") as f:
        for i in range(queries):
            row = {
                "prompt": [{"role": "user", "content": f"Question {i}: describe the colour of the sky at dusk."}],
                "query_id": f"q{i}",
                "rubrics": [{"text": "Names colours", "weight": 2.0}],
                "references": [f"Orange, pink and purple ({i}).", "Red and dark blue.", "Dark."],
            }
            f.write(json.dumps(row) + "\n")
    return str(path)


def run(model_dir: str, dataset: str, out: Path, judge_url: str, *, overlap: bool, steps: int, batch: int) -> dict:
    from datasets import load_dataset

    from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

    args = RankBufferGRPOConfig(
        output_dir=str(out), judge_base_urls=[judge_url], judge_model="scripted-judge", overlap_judging=overlap,
        num_generations=4, per_device_train_batch_size=batch, max_completion_length=32, max_steps=steps, beta=0.04,
        k0=3, learning_rate=1e-5, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
        activation_checkpointing=False, seed=0,
    )  # fmt: skip
    timer = StepTimer()
    RankBufferGRPOTrainer(
        model_dir, args=args, train_dataset=load_dataset("json", data_files=dataset)["train"], callbacks=[timer]
    ).train()
    return {
        "step": statistics.mean(timer.times[1:]),
        **{name: statistics.mean(values[1:]) for name, values in timer.logged.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.5, 2.0], help="judge seconds per call")
    parser.add_argument("--layers", type=int, default=8, help="policy layers (hidden size 512): sets the pass time")
    parser.add_argument("--batch", type=int, default=16, help="rollouts per step (G=4)")
    parser.add_argument("--steps", type=int, default=4, help="steps per run; the first is left out")
    args = parser.parse_args()
    if 0.0 not in args.latencies:
        args.latencies = [0.0, *args.latencies]

    from trl_rankreward.testing import build_tiny_model, serve_scripted_judge

    work = Path(tempfile.mkdtemp(prefix="judge-overlap-"))
    model = str(build_tiny_model(work / "policy", hidden_size=512, num_layers=args.layers, num_heads=8))
    dataset = write_dataset(work / "data.jsonl", queries=args.batch // 4 * (args.steps + 1))
    results = {}
    with serve_scripted_judge() as judge:
        for latency in args.latencies:
            judge.latency_s = latency
            for overlap in (False, True):
                out = work / f"run-{latency}-{overlap}"
                results[latency, overlap] = run(model, dataset, out, judge, overlap=overlap, steps=args.steps,
                                                batch=args.batch)  # fmt: skip
                print(f"latency {latency:g} s, overlap {overlap}: {results[latency, overlap]}", flush=True)
    print_table(results, args)


def print_table(results: dict, args) -> None:
    print(f"\nRankBuffer GRPO on CPU ({os.cpu_count()} cores), policy 512 x {args.layers} layers, "
          f"{args.batch} rollouts per step (G=4), beta=0.04; mean over steps 2..{args.steps}.\n")  # fmt: skip
    print("| judge latency (s/call) | overlap | step (s) | log-prob passes (s) | reward path waited (s) "
          "| added over a 0 s judge (s) | bound: max(0, judging - passes) x 1.05 (s) | within |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for (latency, overlap), r in results.items():
        added = r["wait"] - results[0.0, overlap]["wait"]
        judging = results[latency, False]["wait"] - results[0.0, False]["wait"]  # judging alone, no overlap
        bound = max(0.0, judging - r["passes"]) * 1.05
        within = "yes" if added <= bound + 0.02 else "no"  # 20 ms: the timer's resolution here
        print(f"| {latency:g} | {'on' if overlap else 'off'} | {r['step']:.2f} | {r['passes']:.2f} | {r['wait']:.2f} "
              f"| {added:.2f} | {f'{bound:.2f}' if overlap else ''} | {within if overlap else ''} |")  # fmt: skip


if __name__ == "__main__":
    main()
