"""Judge cost of a training config before training: `trl-rankreward bench --config TRAIN.yaml`.

The config fixes the run's shape (steps as `step_counts` counts them; `--num_processes` the process count); the
benchmark's machinery (`reward_bench.run_method`) simulates the rest for the config's reward method and options:
texts are the dataset's own when `dataset_name` is readable here, else the simulation's, with completions of
`max_completion_length` judge tokens (an upper bound) or `--completion_tokens`; verdicts come from a simulated
judge (`ESTIMATE_NOTE`). The first epoch (RankBuffer's starts its buffers) and the later ones are reported apart;
a sample of the queries is simulated for every epoch, up to `MAX_EPOCHS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..parsing import training_overrides_field
from ..rewards.options import option_values
from ..user_errors import ConfigError, UsageError
from .bench_config import BenchMethod, RewardBenchConfig, selected_methods
from .reward_bench import MethodResult, run_method, sum_results
from .step_counts import step_counts
from .win_rate import EvalPrompt

#: keys that make a `--config` file a training config (every training config has one of them)
TRAINING_KEYS = ("model_name_or_path", "num_generations", "per_device_train_batch_size", "dataset_name")
MAX_EPOCHS = 20
SAMPLE_QUERIES = 16  # at least this many queries simulated (all of a smaller dataset)


@dataclass
class ConfigCostArguments:
    """Options of `bench` for a training config (`--config TRAIN.yaml` sets `training_config`)."""

    _argument_group_name = "cost of a training config"

    training_config: str | None = field(
        default=None,
        metadata={
            "help": "a training config (examples/configs/*.yaml) whose judge cost to estimate per step and per "
            "epoch; `--config` with a training config sets it. --methods then defaults to the config's method",
            "metavar": "PATH",
        },
    )
    num_processes: int = field(
        default=1, metadata={"help": "training processes the run will have (accelerate launch --num_processes)"}
    )
    completion_tokens: int | None = field(
        default=None,
        metadata={"help": "judge tokens of a completion's answer (default: the config's max_completion_length)"},
    )

    overrides: list[str] = training_overrides_field()

    def __post_init__(self):
        if self.num_processes < 1:
            raise ConfigError(f"num_processes must be >= 1, got {self.num_processes}")
        if self.completion_tokens is not None and self.completion_tokens < 1:
            raise ConfigError(f"completion_tokens must be >= 1, got {self.completion_tokens}")


@dataclass(frozen=True)
class RunShape:
    """How many completions and queries the run judges per optimizer step, and its steps per epoch."""

    group_size: int
    queries_per_batch: int  # groups judged together (one generation batch)
    batches_per_step: float
    steps: int | None  # the run's optimizer steps (None: not known without the dataset size)
    epochs: float

    @property
    def queries_per_step(self) -> float:
        return self.queries_per_batch * self.batches_per_step


def run_shape(
    values: Mapping[str, Any], defaults: Mapping[str, Any], num_processes: int, dataset_size: int | None
) -> tuple[RunShape, str]:
    """The run's shape from the config's values (`defaults` where unset), and one line saying how."""
    get = _with_defaults(values, defaults)
    g, per_device = get("num_generations"), get("per_device_train_batch_size")
    accumulation = get("gradient_accumulation_steps")
    per_generation, iterations = get("steps_per_generation") or accumulation, get("num_iterations")
    batch = get("generation_batch_size") or per_device * num_processes * per_generation
    if batch % g:
        raise ConfigError(
            f"a generation batch of {batch} completions (per_device_train_batch_size={per_device} x {num_processes} "
            f"process(es) x steps_per_generation={per_generation}) is not a multiple of num_generations={g}; "
            "set --num_processes to the run's process count"
        )
    counts = step_counts(per_device_batch=per_device, processes=num_processes, gradient_accumulation=accumulation,
                         num_generations=g, num_iterations=iterations, dataset_queries=dataset_size)  # fmt: skip
    steps, epochs, per_epoch = None, float(get("num_train_epochs")), counts.steps_per_epoch
    if per_epoch is not None and get("max_steps") and get("max_steps") > 0:
        steps, epochs = int(get("max_steps")), get("max_steps") / per_epoch
    elif per_epoch is not None:
        steps = math.ceil(per_epoch * epochs)
    shape = RunShape(g, batch // g, counts.queries / (batch // g), steps, epochs)
    how = (
        f"{per_device} completions per device x {num_processes} process(es) (assumed; --num_processes sets it) x "
        f"{accumulation} accumulation step(s) / {iterations} iteration(s) = {shape.queries_per_step * g:g} completions = "
        f"{shape.queries_per_step:g} queries x G={g} judged per step, in {shape.batches_per_step:g} scoring call(s) of "
        f"{shape.queries_per_batch} groups"
    )
    if dataset_size:
        how += f"; {dataset_size} queries: {counts.steps_per_epoch:g} steps per epoch, "
        how += f"{shape.steps} steps = {shape.epochs:g} epochs"
    return shape, how


def _with_defaults(values: Mapping[str, Any], defaults: Mapping[str, Any]):
    """`get(name)`: the config's value, else the training config's default."""
    return lambda name: values[name] if values.get(name) is not None else defaults[name]


def config_values(script_args, training_args, keys: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the values a training config sets for its `keys`; its classes' own defaults, not the parsed ones: TRL
    derives `generation_batch_size` from this process's count, the estimate from `--num_processes`)."""
    configs = (script_args, training_args)
    values = {k: getattr(c, k) for k in keys for c in configs if k in {f.name for f in dataclasses.fields(c)}}
    defaults = {f.name: f.default for c in configs for f in dataclasses.fields(c)}
    return values, defaults


def config_methods(training_args, spec: str) -> list[BenchMethod]:
    """The methods to cost: `spec`'s or, for "all", the config's `reward_method` with its options (none for a
    config without one, R-Align's)."""
    name = getattr(training_args, "reward_method", None)
    if spec.strip() == "all":
        return [] if name is None else [_own_method(training_args)]
    return [_own_method(training_args) if m.label == name else m for m in selected_methods(spec)]


def _own_method(training_args) -> BenchMethod:
    name, kwargs = training_args.reward_method, option_values(training_args.method_options())
    if "anchor_store" in kwargs:
        kwargs.update(anchor_store="memory", anchor_store_path=None)  # no file for an estimate
    return BenchMethod(name, name, {k: v for k, v in kwargs.items() if v is not None})


def dataset_queries(values: Mapping[str, Any]) -> tuple[list[dict] | None, str]:
    """The dataset's rows as `win_rate.EvalPrompt` field dicts (read as training reads them), or None and why not."""
    name = values.get("dataset_name")
    if not name:
        return None, "no dataset_name in the config"
    try:
        from ..data.sources import load_source

        split = values.get("dataset_train_split") or "train"
        data = load_source(str(name), split=split, config=values.get("dataset_config"))
        if hasattr(data, "keys") and split in data:
            data = data[split]
    except Exception as exc:  # noqa: BLE001 - any reason the data is not here: fall back and say why
        return None, f"dataset {name} not readable here ({type(exc).__name__}: {str(exc)[:120]})"
    rows = [dict(vars(EvalPrompt.from_row(row))) for row in data]
    return rows, f"{len(rows)} queries of {name}"


@dataclass(frozen=True)
class RunCost:
    """The whole run's judge cost for one method (the first epoch's cost per step for its steps, then the later's)."""

    method: str
    steps: int
    calls: float
    tokens: float


def estimate(
    path: str, config: tuple, keys: Iterable[str], args: ConfigCostArguments, bench: RewardBenchConfig
) -> tuple[str, list[RunCost]]:
    """The report of `bench --config TRAIN.yaml` and each method's whole-run cost (none when the run's length is
    not known); `config`: `scripts.read_training_config`'s, `keys`: the settings the file and command line gave."""
    script_args, training_args = config[:2]
    values, defaults = config_values(script_args, training_args, keys)
    rows, data_note = dataset_queries(values)
    try:
        shape, how = run_shape(values, defaults, args.num_processes, len(rows) if rows else bench.queries)
    except ValueError as exc:  # a batch the config and --num_processes cannot make: refused, exit 2
        raise UsageError(f"{path}: {exc}") from None
    if shape.group_size < 2:
        raise UsageError(
            f"{path} has num_generations={shape.group_size} (one rollout per prompt, PPO): bench --config simulates "
            "groups of at least 2 rollouts; docs/methods.md gives the method's judge calls per completion"
        )
    methods = config_methods(training_args, bench.methods)
    if not methods:
        raise UsageError(
            f"{path} trains no reward method (an R-Align config trains a GenRM); pass --methods NAME (a registry "
            "name, e.g. rank_buffer) to cost that method on this run"
        )
    completion = args.completion_tokens or _with_defaults(values, defaults)("max_completion_length")
    sample = min(len(rows) if rows else bench.queries, max(SAMPLE_QUERIES, 2 * shape.queries_per_batch))
    epochs = min(MAX_EPOCHS, max(1, math.ceil(shape.epochs)))
    settings = dataclasses.replace(
        bench, queries=sample, epochs=epochs, group_size=shape.group_size, response_tokens=completion,
        queries_per_step=min(sample, shape.queries_per_batch), methods="all",
    )  # fmt: skip
    lines = [f"Judge cost of {path}, estimated (how: the note at the end)", ""]
    lines.append(f"- per step: {how}")
    thinks = bool(values.get("thinking_format") or (values.get("chat_template_kwargs") or {}).get("enable_thinking"))
    lines.append(f"- texts: {_texts_note(rows, data_note, bench, completion, args, thinks)}")
    lines.append(
        f"- simulated: {sample} queries x {epochs} epoch(s) of the run"
        + (f" (the run has {shape.epochs:g}; capped at {MAX_EPOCHS})" if shape.epochs > epochs else "")
    )
    lines += ["", _TABLE_HEADER]
    totals = []
    for method in methods:
        result = run_method(settings, method, given_queries=_sample(rows, sample, bench.rubrics_per_query))
        if isinstance(result, MethodResult):
            lines += _method_rows(method, result, shape)
            totals.append((method.label, run_cost(method, result, shape)))
        else:
            lines.append(f"| {method.label} | could not run: {result} | | | | | |")
    lines += ["", *(_total_line(label, total) for label, total in totals), "", ESTIMATE_NOTE]
    return "\n".join(lines), [total for _, total in totals if total is not None]


ESTIMATE_NOTE = (
    "Calls and rounds: the method's rules on simulated verdicts (RankBuffer's listwise calls depend on how rollouts "
    "fall among its anchors). Tokens: the method's prompts rendered with the default templates from the texts above, "
    "counted with the benchmark's tokenizer (MiniLM; a judge's own tokenizer differs), plus JSON answers. Rounds: "
    "sequential judge calls per step (latency). A real run logs the same counts as judge/calls and "
    "judge/prompt_tokens + judge/completion_tokens."
)


def _texts_note(rows, data_note: str, bench: RewardBenchConfig, completion: int, args, thinks: bool) -> str:
    assumed = "max_completion_length; every completion assumed to reach it"
    text = f"completions {completion} tokens ({'--completion_tokens' if args.completion_tokens else assumed}); "
    if thinks and not args.completion_tokens:
        text += (
            "THIS RUN THINKS: the judge sees only the answer after the thinking, far shorter than "
            "max_completion_length, so these tokens are an upper bound; set --completion_tokens to the answers' "
            "length (the paper_table8 preset assumes 300); "
        )
    if rows:
        rubrics = sum(len(r["rubrics"]) for r in rows) / len(rows)
        references = sum(len(r["references"]) for r in rows) / len(rows)
        text += f"queries, rubrics ({rubrics:g} per query) and references ({references:g} per query) of {data_note}"
        if not rubrics:
            text += f"; simulated rubrics ({bench.rubrics_per_query or '3 to 5'} per query) stand in"
        return text
    rubrics = bench.rubrics_per_query or "3 to 5"
    return (
        f"{data_note}: {bench.queries} simulated queries assumed (--queries: the dataset's size), about 60 tokens "
        f"each, with {rubrics} rubrics and {bench.references_per_query} references of {bench.reference_tokens} "
        "tokens (--rubrics_per_query, --references_per_query, --reference_tokens set them)"
    )


def _sample(rows: list[dict] | None, n: int, rubrics_per_query: int | None) -> list[dict] | None:
    """The first `n` rows; with `rubrics_per_query`, each row's rubrics repeated or cut to that many."""
    if rows is None:
        return None
    rows = rows[:n]
    if rubrics_per_query:
        rows = [
            {**r, "rubrics": tuple(r["rubrics"][i % len(r["rubrics"])] for i in range(rubrics_per_query))}
            if r["rubrics"] else r
            for r in rows
        ]  # fmt: skip
    return rows


_TABLE_HEADER = (
    "| method | epochs | judge calls / step | judge tokens / step | judge rounds / step | judge calls / epoch "
    "| judge tokens / epoch |\n|---|---|---:|---:|---:|---:|---:|"
)


def _per_step(part: MethodResult, shape: RunShape) -> tuple[float, float]:
    """Parsed judge calls and judge tokens per optimizer step of `part`'s groups."""
    calls = part.parsed / part.groups * shape.queries_per_step
    return calls, (part.prompt_tokens + part.completion_tokens) / part.groups * shape.queries_per_step


def _method_rows(method: BenchMethod, result: MethodResult, shape: RunShape) -> list[str]:
    """Per step and per epoch, for the first epoch and the epochs after it."""
    rows = []
    steps_per_epoch = _steps_per_epoch(result, shape)
    options = ", ".join(f"{k}={v!r}" for k, v in method.kwargs.items() if k != "anchor_store")
    name = f"{method.label} ({options})" if options else method.label
    for label, part in (("first epoch", result.epochs[:1]), ("after epoch 1", result.epochs[1:])):
        if not part:
            continue
        sums = sum_results(part)
        calls, tokens = _per_step(sums, shape)
        rounds = sums.rounds / sums.steps * shape.batches_per_step
        rows.append(
            f"| {name} | {label} | {calls:,.1f} | {tokens:,.0f} | {rounds:.1f} | {calls * steps_per_epoch:,.0f} "
            f"| {tokens * steps_per_epoch:,.0f} |"
        )
    return rows


def _steps_per_epoch(result: MethodResult, shape: RunShape) -> float:
    return shape.steps / shape.epochs if shape.steps and shape.epochs else result.epochs[0].steps


def run_cost(method: BenchMethod, result: MethodResult, shape: RunShape) -> RunCost | None:
    """The whole run's calls and tokens (`RunCost`); None when the run's length is not known."""
    if not shape.steps:
        return None
    first, later = result.epochs[0], sum_results(result.epochs[1:]) if len(result.epochs) > 1 else result.epochs[0]
    steps = min(shape.steps, _steps_per_epoch(result, shape))
    (calls, tokens), (later_calls, later_tokens) = _per_step(first, shape), _per_step(later, shape)
    rest = shape.steps - steps
    return RunCost(method.label, shape.steps, calls * steps + later_calls * rest, tokens * steps + later_tokens * rest)


def _total_line(label: str, total: RunCost | None) -> str:
    if total is None:
        return f"{label}: the run's length is not known without the dataset size"
    return f"{label}, whole run ({total.steps} steps): {total.calls:,.0f} judge calls, {total.tokens:,.0f} judge tokens"
