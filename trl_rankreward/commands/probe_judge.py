"""`trl-rankreward probe-judge --config TRAIN.yaml`: before training, which reward method gives signal.

    trl-rankreward probe-judge --config examples/configs/rankbuffer_cpu_quickstart.yaml
    trl-rankreward probe-judge --config my_run.yaml --queries 16 --methods pointwise,rrc_scr,rank_buffer_plus

Reads the training config (judge settings, dataset, policy, G, sampling), samples `--queries`
queries, generates G rollouts each with the starting policy (and G more to warm up the stateful
methods' buffers), runs `evaluation.probe_judge` with the config's judge, prints the table and the
recommendation, writes the report as JSON and says how to switch the config (docs/evaluation.md).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HELP = "Probe the training config's judge on rollouts of its starting policy: which reward method gives signal"
CONFIG_FILE = True
CONFIG_HELP = "the training config (YAML) of the run to probe, as examples/train_*.py read it (required)"


def config_values(path: str, values: dict) -> dict:
    """`--config TRAIN.yaml` names the run to probe; its keys are the run's (`parse_training_config`)."""
    return {"training_config": path}


@dataclass
class ProbeJudgeArguments:
    training_config: str | None = field(
        default=None, metadata={"help": "the training config to probe; `--config` sets it", "metavar": "PATH"}
    )
    queries: int = field(default=8, metadata={"help": "queries sampled from the config's dataset"})
    repeats: int = field(default=2, metadata={"help": "independent judgings per method (>= 2)"})
    methods: str = field(
        default="", metadata={"help": "comma-separated reward methods; empty: every method the data allows"}
    )
    margin: float = field(
        default=0.1, metadata={"help": "reliability a cheaper method may lose to the best and still be recommended"}
    )
    budget_tokens: int = field(
        default=2_000_000, metadata={"help": "the most judge tokens the probe may spend (0: no bound)"}
    )
    swap_pairs: int = field(default=2, metadata={"help": "pairs per query judged in both display orders (0: none)"})
    warmup: bool = field(
        default=True, metadata={"help": "G more rollouts per query warm up stateful methods' buffers (else the same)"}
    )
    num_processes: int = field(default=1, metadata={"help": "training processes, for the per-step cost columns"})
    seed: int = field(default=0, metadata={"help": "seed of the query sample, the rollouts and the probe"})
    output_file: str | None = field(
        default=None, metadata={"help": "the report as JSON (default: the config's output_dir/judge_probe.json)"}
    )


def arguments():
    return (ProbeJudgeArguments,)


def run(args: ProbeJudgeArguments) -> int:
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer

    from ..evaluation.judge_probe import probe_judge
    from ..evaluation.step_counts import step_counts
    from ..judging.server_settings import TRAINING_JUDGE, build_judge
    from ..rewards.base import AnswerFormat
    from ..rewards.options import option_values
    from ..scripts.data import check_prompt_lengths, load_train_dataset
    from ..scripts.model import resolve_model
    from ..scripts.probe import parse_training_config, sample_groups, switch_hint
    from ..trainers.judge_reward import TokenLength
    from ..user_errors import UsageError

    if args.training_config is None:
        raise UsageError("need --config TRAIN.yaml: the training config of the run to probe")
    if args.repeats < 2 or args.queries < 1 or args.num_processes < 1 or args.budget_tokens < 0:
        raise UsageError(f"need --repeats >= 2, --queries >= 1, --num_processes >= 1 and --budget_tokens >= 0; got "
                         f"{args.repeats}, {args.queries}, {args.num_processes}, {args.budget_tokens}")  # fmt: skip
    config = args.training_config
    script_args, training_args, model_args = parse_training_config(config)
    if training_args.num_generations < 2:
        raise UsageError(f"{config} has num_generations={training_args.num_generations} (PPO's one rollout per "
                         "prompt): the probe compares the rewards within a group; probe a copy of the config with the G of "
                         "the GRPO run you consider, e.g. num_generations: 4")  # fmt: skip
    start = time.perf_counter()
    model = resolve_model(model_args.model_name_or_path, training_args)
    dataset = check_prompt_lengths(load_train_dataset(script_args), model, script_args, training_args)
    judge = build_judge(TRAINING_JUDGE.settings(training_args), embedded_without_urls=True)
    print(f"sampling {min(args.queries, len(dataset))} queries x {2 if args.warmup else 1} x G={training_args.num_generations} rollouts "
          f"from {model_args.model_name_or_path}", file=sys.stderr)  # fmt: skip
    groups, warm = sample_groups(
        model, dataset, training_args, queries=args.queries, seed=args.seed, warmup=args.warmup
    )
    methods = [m for m in args.methods.split(",") if m] or None
    current = training_args.reward_method
    options = {current: {k: v for k, v in option_values(training_args.method_options()).items() if k != "lambda_fmt"}}
    with tqdm(total=None, unit="judging", desc="probe", file=sys.stderr) as bar:

        def progress(done: int, total: int, label: str) -> None:
            bar.total = total
            bar.set_postfix_str(label)
            bar.update(done - bar.n)

        report = probe_judge(
            judge, groups, methods=methods, repeats=args.repeats,
            margin=args.margin, options=options, warmup_groups=warm,
            groups_per_step=step_counts(
                per_device_batch=training_args.per_device_train_batch_size, processes=args.num_processes,
                gradient_accumulation=training_args.gradient_accumulation_steps,
                num_generations=training_args.num_generations, num_iterations=training_args.num_iterations,
            ).queries,
            budget_tokens=args.budget_tokens or None, swap_pairs=args.swap_pairs, seed=training_args.seed,
            answer_format=AnswerFormat(thinking=training_args.thinking_format),
            length_fn=TokenLength(AutoTokenizer.from_pretrained(model)), progress=progress,
        )  # fmt: skip
    print(report.table())
    hint = switch_hint(config, training_args, report.recommended) if report.recommended else ""
    if hint:
        print(hint)
    output = Path(args.output_file or Path(training_args.output_dir) / "judge_probe.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    data = {**report.to_dict(), "config": config, "current_method": current, "switch": hint,
            "queries": len(groups), "group_size": training_args.num_generations,
            "wall_s": time.perf_counter() - start}  # fmt: skip
    output.write_text(json.dumps(data, indent=1))
    print(f"wrote {output} ({data['wall_s']:.0f} s)")
    return 0
