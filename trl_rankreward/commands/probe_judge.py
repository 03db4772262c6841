"""`trl-rankreward probe-judge --config TRAIN.yaml`: before training, which reward method gives signal.

Samples G rollouts (and G more to warm up stateful methods) per query from the config's starting policy, runs
`evaluation.judge_probe.probe_judge` with the config's judge, prints the table and recommendation, writes the
JSON report and says how to switch the config (docs/judge_probe.md)."""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..parsing import training_overrides_field

HELP = "Probe the training config's judge on rollouts of its starting policy: which reward method gives signal"
CONFIG_FILE = True
TRAINING_OVERRIDES = True
CONFIG_HELP = "the training config (YAML) of the run to probe, as examples/train_*.py read it (required)"


def config_values(path: str, values: dict) -> dict:
    """`--config TRAIN.yaml` names the run to probe; its keys are the run's."""
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
    audit_queries: int = field(
        default=4, metadata={"help": "queries of the judge-hacking audit (docs/judging.md), 2 rollouts each (0: none)"}
    )
    warmup: bool = field(
        default=True, metadata={"help": "G more rollouts per query warm up stateful methods' buffers (else the same)"}
    )
    num_processes: int = field(default=1, metadata={"help": "training processes, for the per-step cost columns"})
    seed: int = field(default=0, metadata={"help": "seed of the query sample, the rollouts and the probe"})
    output_file: str | None = field(
        default=None, metadata={"help": "the report as JSON (default: the config's output_dir/judge_probe.json)"}
    )
    overrides: list[str] = training_overrides_field()


def arguments():
    return (ProbeJudgeArguments,)


def run(args: ProbeJudgeArguments) -> int:
    from ..scripts.train import check_prompt_lengths, load_train_dataset, read_training_config, resolve_model
    from ..user_errors import UsageError

    if args.training_config is None:
        raise UsageError("need --config TRAIN.yaml: the training config of the run to probe")
    if args.repeats < 2 or args.queries < 1 or args.num_processes < 1 or args.budget_tokens < 0:
        raise UsageError(f"need --repeats >= 2, --queries >= 1, --num_processes >= 1 and --budget_tokens >= 0; got "
                         f"{args.repeats}, {args.queries}, {args.num_processes}, {args.budget_tokens}")  # fmt: skip
    config = args.training_config
    parsed, values = read_training_config(config, args.overrides, prog=f"trl-rankreward probe-judge ({config})")
    script_args, training_args, model_args = parsed
    if not hasattr(training_args, "reward_method"):
        raise UsageError(f"{config} trains a GenRM (R-Align) and has no reward method to probe; probe-judge reads "
                         "the config of a run with a judge reward (examples/configs/rankbuffer_*, baseline_*, "
                         "...)")  # fmt: skip
    if training_args.num_generations < 2:
        raise UsageError(f"{config} has num_generations={training_args.num_generations} (PPO's one rollout per "
                         "prompt): the probe compares the rewards within a group; probe a copy of the config with the "
                         "G of the GRPO run you consider, e.g. num_generations: 4")  # fmt: skip
    start = time.perf_counter()
    model = resolve_model(model_args.model_name_or_path, training_args)
    dataset = check_prompt_lengths(load_train_dataset(script_args), model, script_args, training_args)
    g, n = training_args.num_generations, min(args.queries, len(dataset))
    print(f"sampling {n} queries x {2 if args.warmup else 1} x G={g} rollouts from {model_args.model_name_or_path}",
          file=sys.stderr)  # fmt: skip
    groups, warm = sample_groups(
        model, dataset, training_args, queries=args.queries, seed=args.seed, warmup=args.warmup
    )
    report = _probe(args, training_args, model, groups, warm)
    report.planned_run = _planned_run(args, parsed, values)
    print(report.table())
    hint = switch_hint(config, training_args, report.recommended, set(values)) if report.recommended else ""
    if hint:
        print(hint)
    output = Path(args.output_file or Path(training_args.output_dir) / "judge_probe.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    data = {**report.to_dict(), "config": config, "current_method": training_args.reward_method, "switch": hint,
            "queries": len(groups), "group_size": training_args.num_generations,
            "wall_s": time.perf_counter() - start}  # fmt: skip
    output.write_text(json.dumps(data, indent=1))
    print(f"wrote {output} ({data['wall_s']:.0f} s)")
    return 0


def switch_hint(config_path: str, training_args, recommended: str, keys: set[str]) -> str:
    """The probe's advice, one line: the config (whose YAML has `keys`) already trains `recommended`, or what to
    change in it to train that method and the example script that trains it."""
    from ..rewards.options import MethodOptions, option_fields
    from ..trainers.judge_reward import script_for_method

    current = training_args.reward_method
    if recommended == current:
        return f"{Path(config_path).name} already trains {recommended}: keep it."
    options = option_fields(type(training_args)) if isinstance(training_args, MethodOptions) else []
    own = [f.name for f in options if f.name != "lambda_fmt" and f.name in keys]
    drop = f"; drop {current}'s options ({', '.join(own)})" if own else ""
    how = (f"set `reward_method: {recommended}` (its options are config fields, docs/methods.md){drop}, and train "
           f"with {script_for_method(recommended)}")  # fmt: skip
    return f"to train {recommended} instead of {current}: {how}."


def _probe(args: ProbeJudgeArguments, training_args, model: str, groups, warm):
    """`probe_judge` with the config's judge, method options and run settings, with a progress bar."""
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer

    from ..evaluation.judge_probe import probe_judge
    from ..evaluation.step_counts import step_counts
    from ..judging.server_settings import TRAINING_JUDGE, build_judge
    from ..rewards.base import AnswerFormat
    from ..rewards.options import option_values
    from ..trainers.judge_workers import TokenLength

    judge = build_judge(TRAINING_JUDGE.settings(training_args), embedded_without_urls=True)
    methods = [m for m in args.methods.split(",") if m] or None
    current = training_args.reward_method
    options = {current: {k: v for k, v in option_values(training_args.method_options()).items() if k != "lambda_fmt"}}
    with tqdm(total=None, unit="judging", desc="probe", file=sys.stderr) as bar:

        def progress(done: int, total: int, label: str) -> None:
            bar.total = total
            bar.set_postfix_str(label)
            bar.update(done - bar.n)

        return probe_judge(
            judge, groups, methods=methods, repeats=args.repeats,
            margin=args.margin, options=options, warmup_groups=warm,
            groups_per_step=step_counts(
                per_device_batch=training_args.per_device_train_batch_size, processes=args.num_processes,
                gradient_accumulation=training_args.gradient_accumulation_steps,
                num_generations=training_args.num_generations, num_iterations=training_args.num_iterations,
            ).queries,
            budget_tokens=args.budget_tokens or None, swap_pairs=args.swap_pairs, audit_groups=args.audit_queries,
            seed=training_args.seed,
            answer_format=AnswerFormat(thinking=training_args.thinking_format),
            length_fn=TokenLength(AutoTokenizer.from_pretrained(model)), progress=progress,
        )  # fmt: skip


def _planned_run(args: ProbeJudgeArguments, parsed: tuple, values: dict) -> dict | None:
    """The whole run's judge cost for the config's own method, as `bench --config` estimates it; None when the
    run's length or batch is not known without more (the probe then says nothing of it)."""
    from ..evaluation.bench_config import RewardBenchConfig
    from ..evaluation.config_cost import ConfigCostArguments, estimate
    from ..scripts import config_keys
    from ..user_errors import UsageError

    keys, cost = config_keys(values, args.overrides), ConfigCostArguments(num_processes=args.num_processes)
    try:
        _, totals = estimate(args.training_config, parsed, keys, cost, RewardBenchConfig())
    except UsageError:  # a batch --num_processes cannot make: bench --config says why
        return None
    return dataclasses.asdict(totals[0]) if totals else None


def sample_groups(model_name: str, dataset, training_args, *, queries: int, seed: int, warmup: bool):
    """(groups, warm-up groups or None): `queries` rows of `dataset` drawn with `seed`, G rollouts each (and
    G more for the warm-up) sampled from the policy `model_name` with the config's generation settings."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..trainers.group_scoring import reward_row, rows_to_groups

    rows = [dataset[i] for i in random.Random(seed).sample(range(len(dataset)), min(queries, len(dataset)))]
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    device = "cuda" if torch.cuda.is_available() and not training_args.use_cpu else "cpu"
    model = AutoModelForCausalLM.from_pretrained(model_name, **(training_args.model_init_kwargs or {})).to(device)
    model.eval()
    g = training_args.num_generations
    names = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
    sampling = {k: getattr(training_args, k) for k in names if getattr(training_args, k) is not None}
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(seed)
    measured, warm = [], []
    for row in rows:
        prompt = row["prompt"]
        if not isinstance(prompt, str):
            prompt = tokenizer.apply_chat_template(
                prompt, tokenize=False, add_generation_prompt=True, **(training_args.chat_template_kwargs or {})
            )
        batch = tokenizer([prompt], return_tensors="pt", add_special_tokens=False).to(device)
        with torch.no_grad():
            output = model.generate(**batch, do_sample=True, num_return_sequences=2 * g if warmup else g,
                                    pad_token_id=tokenizer.pad_token_id,
                                    max_new_tokens=training_args.max_completion_length,
                                    **sampling, **(training_args.generation_kwargs or {}))  # fmt: skip
        completions = tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        measured += [reward_row(row, row["prompt"], c) for c in completions[:g]]
        warm += [reward_row(row, row["prompt"], c) for c in completions[g:]]
    return rows_to_groups(measured, g), rows_to_groups(warm, g) if warmup else None
