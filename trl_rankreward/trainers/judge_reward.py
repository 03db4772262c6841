"""`JudgeRewardGRPOTrainer`: TRL's GRPO with a group reward method judged by an LLM (or embedded) judge; its
config, each method's config class (`method_config(name)`: the method's options as flat fields), the builders of
the judge and the method, and the trainers of the papers. Rollouts are gathered into whole groups, scored once on
the main process and broadcast; with `overlap_judging` judging starts in `_generate`, while TRL computes the
log-probs. A method's epoch (RankBuffer's maintenance) is the floor of `state.epoch` at generation.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from dataclasses import dataclass, field

import torch
from accelerate import PartialState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.utils import logging
from trl import GRPOConfig

from ..judging.requests import Judge
from ..judging.server_settings import TRAINING_JUDGE, TrainingJudgeFields
from ..rewards.base import GroupRewardMethod
from ..rewards.matrix_reward import MatrixReward
from ..rewards.options import DataNeeds, MethodOptions, option_values
from ..rewards.pointwise import PointwiseRubricReward
from ..rewards.rank_buffer import RankBufferReward
from ..rewards.registry import REWARD_METHODS, reward_method_class
from ..rewards.state_files import METHOD_STATE_NAME
from .base import GRPOTrainerBase
from .dataset_checks import check_group_size
from .group_scoring import TOTAL_SUFFIX, GroupScorer, PendingScore, Scored, gather_rows, reward_row, share_from_main
from .hacking_monitor import ALARM, HackingMonitor, HackingMonitorConfig
from .judge_eval import JudgeEvalConfig
from .judge_workers import (
    JudgeWorkers,
    TrainingRecipe,
    check_shardable,
)
from .model_card import describe_judge, method_citation, redact_urls
from .ppo import CriticConfig, critic_card_settings
from .reward_state import (
    JUDGE_USAGE_NAME,
    JudgeCircuitBreaker,
    JudgeFailureError,
    RewardRunState,
    resume_message,
    startup_message,
)

logger = logging.get_logger(__name__)

WAIT_SECONDS = "judge/wait_seconds"  # the step waiting for its rewards in `_calculate_rewards`
OVERLAP_WINDOW_SECONDS = "judge/overlap_window_seconds"  # from the end of generation to that wait

__all__ = ["JUDGE_USAGE_NAME", "METHOD_STATE_NAME", "JudgeFailureError", "JudgeRewardGRPOConfig",
           "JudgeRewardGRPOTrainer", "MatrixRewardGRPOConfig", "MatrixRewardGRPOTrainer", "RankBufferGRPOConfig",
           "RankBufferGRPOTrainer", "build_reward_method", "build_training_judge", "method_config",
           "script_for_method"]  # fmt: skip


def build_training_judge(config) -> Judge:
    """The judge the config's `judge_*` fields describe, its servers checked now: an `LLMJudge`, the embedded
    `EmbeddingJudge` without `judge_base_urls`, or a `GenRMJudge` when `config.uses_genrm_judge()`."""
    return TrainingRecipe.of(config).build_judge()


def build_reward_method(config, judge: Judge, *, tokenizer=None) -> GroupRewardMethod:
    """The reward method the config names, with its options and the run's context (`TrainingRecipe.of`: the run's
    `seed`, not `judge_seed`; with `tokenizer` the policy's token count as the length)."""
    return TrainingRecipe.of(config, tokenizer).build_method(judge)


def name_the_run(args, method: str) -> None:
    """Name runs by method and judge unless the user did: `run_name` `<method>-<judge>-<output_dir name>`, and
    W&B's `WANDB_RUN_GROUP` (the method) and `WANDB_TAGS`."""
    judge = (args.judge_model or "embedded").rstrip("/").split("/")[-1]
    if not args.run_name:
        args.run_name = f"{method}-{judge}-{os.path.basename(os.path.normpath(args.output_dir))}"
    os.environ.setdefault("WANDB_RUN_GROUP", method)
    os.environ.setdefault("WANDB_TAGS", f"trl-rankreward,{method},judge:{judge}")


@dataclass
class JudgeRewardGRPOConfig(TrainingJudgeFields, JudgeEvalConfig, CriticConfig, HackingMonitorConfig, GRPOConfig):
    """`GRPOConfig` plus the judge, the win rate, PPO's critic, the hacking monitor and the group reward method,
    with its default options (and `lambda_fmt`); a method's options are fields of `method_config(name)`."""

    reward_method: str = field(
        default=PointwiseRubricReward.name,
        metadata={
            "help": "Group reward method by registry name (docs/methods.md). Its options are fields of its config "
            "class (method_config(name)); the training scripts pick that class from this value.",
            "choices": list(REWARD_METHODS),
        },
    )
    judge_stop_after_failed_batches: int = field(
        default=JudgeCircuitBreaker.max_failed_batches,
        metadata={
            "help": "Save a checkpoint and stop with an error when every group of this many consecutive generation "
            "batches is neutral (the judge failed; zero advantages). 0: never."
        },
    )
    judge_failure_window: int = field(
        default=JudgeCircuitBreaker.window,
        metadata={"help": "Generation batches over which judge_max_neutral_fraction is measured."},
    )
    judge_max_neutral_fraction: float = field(
        default=JudgeCircuitBreaker.max_neutral_fraction,
        metadata={
            "help": "Save a checkpoint and stop with an error when more than this fraction of the groups of the last "
            "judge_failure_window generation batches is neutral. 1.0: never."
        },
    )
    overlap_judging: bool = field(
        default=True,
        metadata={
            "help": "Start judging as soon as the completions exist, while TRL computes the old-policy and reference "
            "log-probs, instead of after them. Same rewards and judge calls either way."
        },
    )
    judge_workers: int = field(
        default=0,
        metadata={
            "help": "Judge in this many worker processes on the main node, each with its own event loop and judge "
            "client (judge_max_concurrency and judge_max_concurrency_per_replica are shared among them); groups go "
            "to a worker by a hash of their query id, so the training process only sends and receives them "
            "(docs/performance.md). Same rewards, state and checkpoints. 0: judge on the main process's event loop."
        },
    )
    resume_with_fresh_reward_state: bool = field(
        default=False,
        metadata={
            "help": "Resuming from a checkpoint without the reward method's state (e.g. written by plain TRL) is an "
            "error for methods with state (RankBuffer's buffers); set this to start them afresh instead."
        },
    )
    lambda_fmt: float | None = field(
        default=None,
        metadata={
            "help": "Weight of the format reward added to each reward. None: the method's default, the "
            "`lambda_fmt` of its options class (e.g. `RankBufferOptions`: 0.2)."
        },
    )
    thinking_format: bool = field(
        default=False,
        metadata={"help": "Rollouts must close a <think> block before the answer; the judge sees the answer only."},
    )
    genrm_format: bool = field(
        default=True,
        metadata={
            "help": "reward_method genrm with judge_base_urls: the judge is a GenRM answering \\boxed{A|B} "
            "(GenRMJudge, in the R-Align authors' layout with r_align_release). False: ask it with the JSON pairwise "
            "template (LLMJudge, any instruction model). Read by genrm only; false with another method is an error."
        },
    )

    def check_config(self) -> None:
        """This class's fields and the method's options (checked by their dataclass, values written back)."""
        if self.reward_method not in REWARD_METHODS:
            raise ValueError(f"reward_method={self.reward_method!r} is not one of {list(REWARD_METHODS)}")
        own = _own_method(type(self))
        if own is not None and self.reward_method != own:
            raise ValueError(
                f"{type(self).__name__} trains {own}, but reward_method={self.reward_method!r}; use "
                f"method_config({self.reward_method!r}) (or JudgeRewardGRPOConfig) for that method"
            )
        self.circuit_breaker()  # checks the thresholds
        if self.judge_workers < 0:
            raise ValueError(f"judge_workers must be >= 0 (0: judge on the main process), got {self.judge_workers}")
        self._warn_ddp_timeout()
        options = self.method_options()  # checked by the method's options class
        if own is not None:  # the option fields as checked (normalized)
            for name, value in option_values(options).items():
                setattr(self, name, value)
        self.lambda_fmt = options.lambda_fmt
        check_group_size(self.reward_method, options.data_needs(), self.num_generations)
        self._check_genrm_format(options)

    def _warn_ddp_timeout(self) -> None:
        if not self.judge_base_urls:
            return
        policy = TRAINING_JUDGE.settings(self).retry_policy()
        worst = policy.worst_case_s(self.judge_timeout_s)
        if worst > self.ddp_timeout:
            warnings.warn(
                f"One judge request can take up to {worst:g} s against a hung server (judge_max_attempts="
                f"{self.judge_max_attempts} x judge_timeout_s={self.judge_timeout_s:g}, plus the waits between tries: "
                f"backoff, or the server's Retry-After up to {policy.max_retry_after_s:g} s), longer "
                f"than ddp_timeout={self.ddp_timeout} s that the other processes wait while the main process "
                "judges: raise ddp_timeout or lower judge_timeout_s / judge_max_attempts",
                stacklevel=4,
            )

    def _check_genrm_format(self, options: MethodOptions) -> None:
        from ..rewards.genrm_reward import GenRMOptions

        if not isinstance(options, GenRMOptions):
            if not self.genrm_format:
                raise ValueError(
                    f"genrm_format=False is read only by the GenRM reward, not by reward_method={self.reward_method!r}; "
                    "drop it"
                )
        elif options.r_align_release and not self.uses_genrm_judge():
            raise ValueError(
                f"r_align_release={options.r_align_release!r} asks a served GenRM in the R-Align authors' layout: set "
                "judge_base_urls and judge_model, and keep genrm_format true"
            )

    def uses_genrm_judge(self) -> bool:
        """The training judge is a `GenRMJudge`: the GenRM reward, a judge server, and `genrm_format`."""
        from ..rewards.genrm_reward import GenRMOptions

        return bool(self.judge_base_urls) and self.genrm_format and issubclass(self.options_class(), GenRMOptions)

    def circuit_breaker(self) -> JudgeCircuitBreaker:
        """A fresh breaker with the config's thresholds (`judge_stop_after_failed_batches`, ...)."""
        return JudgeCircuitBreaker(
            self.judge_stop_after_failed_batches, self.judge_failure_window, self.judge_max_neutral_fraction
        )

    def options_class(self) -> type[MethodOptions]:
        return reward_method_class(self.reward_method).options_class

    def method_options(self) -> MethodOptions:
        """The reward method's options, built and checked by their dataclass: a method's config class holds them as
        fields; this class, the defaults and `lambda_fmt` (None: the method's default)."""
        options_class = self.options_class()
        values = option_values(self) if isinstance(self, options_class) else {"lambda_fmt": self.lambda_fmt}
        if values["lambda_fmt"] is None:
            del values["lambda_fmt"]
        return options_class.from_values(values, source=f"the config of reward_method={self.reward_method!r}")


def method_config(name: str) -> type[JudgeRewardGRPOConfig]:
    """`JudgeRewardGRPOConfig` plus the method's options as flat fields, `reward_method` fixed to `name`; named after
    the options class (`RankBufferGRPOConfig`), built once, a module attribute (so a config pickles)."""
    options_class = reward_method_class(name).options_class
    class_name = options_class.__name__.removesuffix("Options") + "GRPOConfig"
    cls = globals().get(class_name)
    if cls is None:
        namespace = {
            "__module__": __name__,
            "__qualname__": class_name,
            "__doc__": f"`JudgeRewardGRPOConfig` with `{options_class.__name__}`'s fields: the config of {name}.",
            "__annotations__": {"reward_method": "str"},
            "reward_method": field(
                default=name,
                metadata={"help": f"Fixed to {name} by this config class; other methods have their own."},
            ),
        }
        cls = globals()[class_name] = dataclass(type(class_name, (JudgeRewardGRPOConfig, options_class), namespace))
    return cls


def config_for_method(name: str | None) -> type[JudgeRewardGRPOConfig]:
    """The config class a YAML or command line with `reward_method: name` is read with (None: the default method)."""
    return method_config(name or JudgeRewardGRPOConfig.reward_method)


def _own_method(cls: type) -> str | None:
    """The method a config class is fixed to (`method_config`), or None for `JudgeRewardGRPOConfig` itself."""
    return cls.__dataclass_fields__["reward_method"].default if issubclass(cls, MethodOptions) else None


def __getattr__(name: str):
    """A method's config class by its name (`method_config`), built on first use."""
    if name.endswith("GRPOConfig"):
        for method in REWARD_METHODS:
            options_class = reward_method_class(method).options_class
            if options_class.__name__.removesuffix("Options") + "GRPOConfig" == name:
                return method_config(method)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class JudgeRewardGRPOTrainer(GRPOTrainerBase):
    """GRPO whose reward is a `GroupRewardMethod` applied to whole groups. `reward_method` (default: built from
    `args`) and `judge` (default: `build_training_judge(args)`) live on the main process, which alone scores."""

    #: a complete checkpoint also holds the reward method's state (`_save_state`), and the judge totals
    checkpoint_files = (TRAINER_STATE_NAME, METHOD_STATE_NAME)
    optional_checkpoint_files = (JUDGE_USAGE_NAME,)
    #: the config `args` must be (a subclass's is its method's config class)
    _config_class: type = JudgeRewardGRPOConfig
    #: the example script that trains with this trainer (`script_for_method`); it reads a config's `reward_method`
    example_script = "examples/train_baseline.py"

    def __init__(
        self,
        model,
        args: JudgeRewardGRPOConfig | None = None,
        *,
        reward_method: GroupRewardMethod | None = None,
        judge=None,
        **kwargs,
    ):
        if not isinstance(args, self._config_class):
            raise TypeError(
                f"{type(self).__name__} needs args={self._config_class.__name__}(...), got {type(args).__name__}"
            )
        extra = kwargs.pop("reward_funcs", None) or []
        extra = list(extra) if isinstance(extra, (list, tuple)) else [extra]
        # Fail fast, before TRL loads any model: bad data, then a judge that is down or misnamed.
        name = reward_method.name if reward_method is not None else args.reward_method
        self.check_datasets(args, kwargs.get("train_dataset"), kwargs.get("eval_dataset"), reward_method=reward_method)
        is_main = PartialState().is_main_process
        given = judge is not None or reward_method is not None  # objects a worker process cannot rebuild
        if reward_method is None and judge is None and is_main:
            judge = build_training_judge(args)
        name_the_run(args, name)
        self._tag_names = [*type(self)._tag_names, name]  # the method's name tags the card and the model
        citation = method_citation(name)
        self._paper = {"citation": citation} if citation else {}  # the method's paper
        super().__init__(model, reward_funcs=[_RewardColumn(name), *extra], args=args, **kwargs)
        if reward_method is None and is_main:
            reward_method = build_reward_method(args, judge, tokenizer=self.processing_class)
        self.reward_method = reward_method
        self._run_state = RewardRunState(reward_method, args.circuit_breaker(), fresh_setting="resume_with_fresh_reward_state=True")
        self._scorer = None if reward_method is None else GroupScorer(
            reward_method, self._run_state.usage, self._judge_workers(args, given))
        self._monitor = None if reward_method is None else HackingMonitor(
            args, reward_method.judge, self._scorer.run, reward_method.answer_format)  # fmt: skip
        self._batch_inputs = self._launched = None
        self._generated_at = time.perf_counter()  # when the last batch's completions were ready

    def _judge_workers(self, args, given: bool) -> JudgeWorkers | None:
        """The judging worker processes of `judge_workers` (main process), built from the config like the run's
        own judge and method; a judge or method object given to the trainer cannot be rebuilt there."""
        if not args.judge_workers:
            return None
        if given:
            raise ValueError(
                f"judge_workers={args.judge_workers} builds the judge and the reward method from the config in each "
                "worker process, but the trainer was given a judge or reward_method object; configure them with "
                "the config's judge_* fields and reward_method, or set judge_workers=0"
            )
        check_shardable(self.reward_method)
        recipe = TrainingRecipe.of(args, self.processing_class).for_workers(args.judge_workers)
        return JudgeWorkers(recipe, args.judge_workers)

    @staticmethod
    def _data_needs(args, reward_method) -> DataNeeds | None:
        """The config's method's needs (a ready method object of another name: none)."""
        if reward_method is None or reward_method.name == args.reward_method:
            return args.method_options().data_needs()
        return None

    def _reward_columns(self, inputs, prompts, completions, completion_ids_list):
        """Column 0: the group method's rewards; further columns: the TRL `reward_funcs` given beside it."""
        group_column = self._group_rewards(inputs, prompts, completions)
        if len(self.reward_funcs) == 1:
            return group_column.unsqueeze(1)
        columns = super()._reward_columns(inputs, prompts, completions, completion_ids_list)
        columns[:, 0] = group_column  # TRL left it NaN (`_RewardColumn` returns None)
        return columns

    def _generate_and_score_completions(self, inputs):
        self._batch_inputs = inputs  # for `_generate`, which TRL calls with the prompts only
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self._batch_inputs, self._launched = None, None

    def _generate(self, prompts):
        """TRL's generation; with `overlap_judging`, judging starts here, as soon as the completions exist."""
        output = super()._generate(prompts)
        if self.args.overlap_judging and self._batch_inputs is not None:
            self._launched = self._launch_judging(self._batch_inputs, prompts, output[3])
        self._generated_at = time.perf_counter()
        return output

    def _launch_judging(self, inputs, prompts, completions) -> PendingScore:
        """Every process: gather the rollouts; the main process starts scoring them (returns at once)."""
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        rows = [reward_row(x, p, c) for x, p, c in zip(inputs, prompts, completions, strict=True)]
        all_rows = gather_rows(rows, group_size, self.accelerator.process_index)
        if not self.accelerator.is_main_process:
            return PendingScore()  # a placeholder: the main process scores
        return self._scorer.start(all_rows, group_size, mode=mode, epoch=self.state.epoch or 0.0,
                                  step=self.state.global_step)  # fmt: skip

    def _group_rewards(self, inputs, prompts, completions) -> torch.Tensor:
        """This batch's group-method rewards (B_total,): judged on the main process, broadcast to all."""
        mode = "train" if self.model.training else "eval"
        waiting = time.perf_counter()
        pending, self._launched = self._launched, None
        if pending is None:  # not started early (overlap_judging off)
            pending = self._launch_judging(inputs, prompts, completions)
        is_main = self.accelerator.is_main_process
        scored: Scored = share_from_main(is_main, lambda: self._monitored(self._scorer.finish(pending), pending, mode))
        waited = time.perf_counter() - waiting
        self._record({**scored.metrics, WAIT_SECONDS: waited, OVERLAP_WINDOW_SECONDS: waiting - self._generated_at})
        self._run_state.record(scored, mode, step=self.state.global_step, is_main=is_main)
        tripped = self._run_state.breaker.tripped or (self.args.hacking_monitor_stop and scored.metrics.get(ALARM))
        if tripped:  # this step ends with a checkpoint, and the run stops (every rank)
            self.control.should_save = self.control.should_training_stop = True
        return torch.tensor(scored.rewards, dtype=torch.float32, device=self.accelerator.device)

    def _monitored(self, scored: Scored, pending: PendingScore, mode: str) -> Scored:
        """`scored` with the hacking monitor's metrics of this training step, warning of new findings."""
        if mode != "train" or self._monitor is None:
            return scored
        metrics = self._monitor.check(pending.groups, scored.rewards, self.state.global_step)
        for line in self._monitor.new_evidence():
            logger.warning(f"Judge-hacking alarm at step {self.state.global_step}: {line}. See docs/judging.md, "
                           "'What a rollout can and cannot do to its verdict'.")  # fmt: skip
        return dataclasses.replace(scored, metrics={**scored.metrics, **metrics})

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """TRL's log, with cumulative totals reported as their latest value instead of averaged."""
        mode = "train" if self.model.training else "eval"
        for key, values in self._metrics[mode].items():
            if key.endswith(TOTAL_SUFFIX) and values:
                self._metrics[mode][key] = values[-1:]
        super().log(logs, start_time)

    def _card_section(self, dataset: str | None) -> dict | None:
        if self.reward_method is None:
            return None
        args, method = self.args, self.reward_method
        totals = self._run_state.judge_totals()
        usage = {"judge calls": totals["calls"], "parsed judge calls": totals["parsed"],
                 "judge prompt tokens": totals["prompt_tokens"], "judge completion tokens": totals["completion_tokens"],
                 "failed judge calls": sum(totals["failures"].values()), "neutral groups": self._run_state.neutral_total,
                 "training steps": self.state.global_step}  # fmt: skip
        from ..judging.backends.openai_compatible import normalize_base_url  # openai: only with a judge server

        urls = [*args.judge_base_urls, *map(normalize_base_url, args.judge_base_urls)]
        own = {k: v for k, v in option_values(args.method_options()).items() if k != "lambda_fmt" and "path" not in k}
        settings = {"num_generations": args.num_generations, "loss_type": args.loss_type, "beta": args.beta,
                    "learning_rate": args.learning_rate, "lambda_fmt": args.lambda_fmt, "judge_model": args.judge_model,
                    "judge_max_tokens": args.judge_max_tokens, **critic_card_settings(args), **own}  # fmt: skip
        judge, dataset = redact_urls(_describe(method), urls), dataset or _dataset_name(self.train_dataset)
        state = method.summary()
        return dict(method=method.name, settings=settings, judge=judge, dataset=dataset, usage=usage, method_state=state)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """The base's `train`, after the start-up block (`startup_message`); a run stopped by the circuit breaker
        raises `JudgeFailureError` after its checkpoint is saved; judging workers are closed at the end."""
        args, dataset, method = self.args, self.train_dataset, self.reward_method
        if self.accelerator.is_main_process and method is not None:
            message = startup_message(
                processes=self.accelerator.num_processes,
                per_device_batch=args.per_device_train_batch_size,
                gradient_accumulation=args.gradient_accumulation_steps,
                num_generations=args.num_generations,
                num_iterations=args.num_iterations,
                queries=len(dataset) if hasattr(dataset, "__len__") else None,
                max_steps=args.max_steps,
                method=method.name,
                judge=_describe(method),
            )
            logger.warning(message)
        self._run_state.use_journal(args.output_dir, fresh=not resume_from_checkpoint)  # the judge bill
        try:
            output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        finally:
            if self._scorer is not None and self._scorer.workers is not None:
                self._scorer.workers.close()  # started again if the trainer judges once more (evaluate)
        if self._run_state.breaker.tripped:
            checkpoint = self._checkpoint_folder()
            raise JudgeFailureError(
                f"{self._run_state.breaker.reason()}\nThe run stopped at step {self.state.global_step} and saved {checkpoint}. "
                f"Fix the judge ({_describe(self.reward_method) if self.reward_method else 'see the main process'}), "
                f"then run the same command with --resume_from_checkpoint {checkpoint} (or latest)."
            )
        return output

    def _save_state(self, checkpoint: str) -> None:
        self._run_state.save(checkpoint)

    def _load_state(self, checkpoint: str) -> None:
        restored = self._run_state.load(checkpoint, fresh_allowed=self.args.resume_with_fresh_reward_state)
        if self.reward_method is not None:
            logger.warning(resume_message(restored, self.state.global_step, self.reward_method.name))


_PACKAGED_BUILDERS = {"json", "csv", "parquet", "arrow", "text", "pandas", "generator", "webdataset"}


def _dataset_name(dataset) -> str | None:
    """The Hub name a `datasets.Dataset` knows of itself (not a packaged loader's name like "json")."""
    name = getattr(getattr(dataset, "info", None), "dataset_name", None)
    return None if name in _PACKAGED_BUILDERS else name


def _describe(method: GroupRewardMethod) -> str:
    return "; ".join(describe_judge(j) for j in method.judges)


class _RewardColumn:
    """Stands first in `reward_funcs` so TRL names and weights the group method's column, which the trainer fills;
    called by TRL beside other reward functions, it returns None per completion."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *, completions, **kwargs):
        return [None] * len(completions)


RankBufferGRPOConfig = method_config(RankBufferReward.name)
MatrixRewardGRPOConfig = method_config(MatrixReward.name)


class RankBufferGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `RankBufferReward` (RankBuffer paper, Sections 3.1-3.5). Anchor texts and buffers live in
    a content-addressed SQLite file (`{output_dir}/anchors.sqlite` by default); every checkpoint holds a snapshot."""

    _config_class = RankBufferGRPOConfig
    example_script = "examples/train_rankbuffer.py"


class MatrixRewardGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `MatrixReward` (MatrixReward paper, Algorithm 1), stateless across steps. Defaults are
    the paper's method (Sec. 3); the other choices are its ablations."""

    _config_class = MatrixRewardGRPOConfig
    example_script = "examples/train_matrixreward.py"


def trainer_for_method(name: str) -> type[JudgeRewardGRPOTrainer]:
    """The subclass whose config is method `name`'s (`RankBufferGRPOTrainer`, ...), else `JudgeRewardGRPOTrainer`."""
    reward_method_class(name)  # an unknown name is an error listing the valid ones
    for trainer in JudgeRewardGRPOTrainer.__subclasses__():
        if _own_method(trainer._config_class) == name:
            return trainer
    return JudgeRewardGRPOTrainer


def script_for_method(name: str) -> str:
    """The example script (a path from the repository root) that trains the reward method `name`."""
    return trainer_for_method(name).example_script
