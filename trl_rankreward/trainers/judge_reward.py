"""`JudgeRewardGRPOTrainer`: TRL's GRPO with a group reward method judged by an LLM (or embedded) judge; its
config, each method's config class, the builders of the judge and the method, and the trainers of the papers.

Configs. `JudgeRewardGRPOConfig` is `GRPOConfig` plus the judge, the win rate, the critic and the method's
name; `method_config(name)` is the config class of one method: the same plus the method's options dataclass
as flat fields (`RankBufferGRPOConfig`, `MatrixRewardGRPOConfig`, ...), so every method is configured one
way, by fields a YAML or a flag sets, and every check runs through `config_checks.CheckedConfig`.
`script_for_method(name)` names the example script of the trainer that serves a method.

The trainer overrides `_reward_columns`, what its base (`base.GRPOTrainerBase`) returns from
TRL's `_calculate_rewards`: it gathers every process's rollouts, rebuilds whole groups (a group
may be split across processes), has the main process score all groups of the step once with the
reward method, broadcasts the rewards and returns the gathered reward columns (the method's
first, then any TRL `reward_funcs`) that TRL turns into advantages. It also logs judge usage
and the method's metrics, and saves the method's state with every checkpoint
(`reward_method_state.json`) so a resume continues exactly.

Overlap. TRL computes the old-policy and reference log-probs between generation and
`_calculate_rewards`, in one long method (`_generate_and_score_completions`) with no hook in
between. Rather than copy it, the trainer starts judging in `_generate` (`GroupScorer.start`) and
`_calculate_rewards` only waits (`GroupScorer.finish`). Every process gathers at the same point
either way, so results are identical with `overlap_judging` on or off.

Epochs. Reward methods with state (RankBuffer's maintenance, Algorithm 2) count epochs as
passes over the training queries. TRL's dataloader visits every query once per trainer
epoch (each query G times in a row, reused `num_iterations` times), and `state.epoch` is
the fraction of trainer epochs finished when the batch is generated; its floor is the
paper's epoch index (0-based).
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate import PartialState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.utils import logging
from trl import GRPOConfig

from ..judging.requests import Judge
from ..judging.server_settings import TRAINING_JUDGE, TrainingJudgeFields, build_judge
from ..rewards.base import AnswerFormat, GroupRewardMethod, RunContext
from ..rewards.matrix_reward import MatrixReward
from ..rewards.options import MethodOptions, option_values
from ..rewards.pointwise import PointwiseRubricReward
from ..rewards.rank_buffer import RankBufferReward
from ..rewards.registry import REWARD_METHODS, reward_method_class
from ..rewards.state_files import METHOD_STATE_NAME
from .base import GRPOTrainerBase
from .dataset_checks import check_group_size, check_training_dataset
from .group_scoring import TOTAL_SUFFIX, GroupScorer, PendingScore, Scored, gather_rows, reward_row, share_from_main
from .hacking_monitor import ALARM, HackingMonitor, HackingMonitorConfig
from .judge_eval import JudgeEvalConfig, evaluation_summary
from .model_card import describe_judge, method_citation, redact_urls, training_section
from .ppo import CriticConfig, critic_card_settings, training_algorithm
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

# ---- builders from a config: the training judge and the reward method --------------------------------------

def build_training_judge(config) -> Judge:
    """The judge the config's `judge_*` fields describe, its servers checked now: an `LLMJudge`, the
    embedded `EmbeddingJudge` when `judge_base_urls` is empty, or for the GenRM reward with `genrm_format`
    (`config.uses_genrm_judge()`) a `GenRMJudge` (a GenRM answering \\boxed{A|B}, in the R-Align authors'
    layout when the options set `r_align_release`)."""
    settings = TRAINING_JUDGE.settings(config)
    if config.uses_genrm_judge():
        from ..rewards.genrm_reward import GenRMJudge

        release = getattr(config.method_options(), "r_align_release", None)
        return GenRMJudge.from_settings(settings, r_align_release=release)
    return build_judge(settings, embedded_without_urls=True)


def build_reward_method(config, judge: Judge, *, tokenizer=None) -> GroupRewardMethod:
    """The reward method the config names, with its options (`config.method_options()`) and what the run
    provides (`RunContext`): the answer format, the run's `seed` (not `judge_seed`, which seeds only the
    judge's display shuffles), `output_dir`, and with `tokenizer` the policy's token count (methods that
    weigh length count tokens in any language)."""
    run = RunContext(
        answer_format=AnswerFormat(thinking=config.thinking_format),
        seed=config.seed,
        output_dir=config.output_dir,
        length_fn=TokenLength(tokenizer) if tokenizer is not None else None,
    )
    return reward_method_class(config.reward_method).for_run(judge, config.method_options(), run)


class TokenLength:
    """`str -> int`: the number of tokens of a text under `tokenizer` (a processor's tokenizer too)."""

    def __init__(self, tokenizer):
        self.tokenizer = getattr(tokenizer, "tokenizer", tokenizer)

    def __call__(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


# ---- run names for W&B and the other loggers ---------------------------------------------------------------

def name_the_run(args, method: str) -> None:
    """Name runs by method and judge for W&B (and other loggers), unless the user did: `run_name`
    defaults to `<method>-<judge>-<output_dir name>`; W&B's group and tags come from the
    environment variables `WANDB_RUN_GROUP` (default: the method) and `WANDB_TAGS`."""
    judge = (args.judge_model or "embedded").rstrip("/").split("/")[-1]
    if not args.run_name:
        args.run_name = f"{method}-{judge}-{os.path.basename(os.path.normpath(args.output_dir))}"
    os.environ.setdefault("WANDB_RUN_GROUP", method)
    os.environ.setdefault("WANDB_TAGS", f"trl-rankreward,{method},judge:{judge}")


# ---- the config --------------------------------------------------------------------------------------------

@dataclass
class JudgeRewardGRPOConfig(TrainingJudgeFields, JudgeEvalConfig, CriticConfig, HackingMonitorConfig, GRPOConfig):
    """`GRPOConfig` plus the judge and the group reward method (and PPO's critic, `trainers.ppo`).

    Every field is in sight: its own below, the judge server's (`judge_*`) in
    `judging.server_settings.TrainingJudgeFields`, the win rate's in `judge_eval.JudgeEvalConfig`,
    the critic's in `ppo.CriticConfig`, the judge-hacking monitor's in `hacking_monitor.HackingMonitorConfig`.
    The judge is an `LLMJudge` over an OpenAI-compatible
    server (vLLM, SGLang, `transformers serve`, ...), or without URLs the offline `EmbeddingJudge` (it ranks
    by similarity to the query's `references`).

    A method's options are flat fields of its config class, `method_config(name)` (`RankBufferGRPOConfig`,
    `MatrixRewardGRPOConfig`, ...: this class plus the method's options dataclass, `reward_method` fixed).
    This class itself trains any method with its default options (and `lambda_fmt`). Every check of every
    base runs through `config_checks.CheckedConfig`; the method's options are checked by their dataclass.
    """

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
        """This class's fields and the method's options (built and checked by their dataclass, values written back)."""
        if self.reward_method not in REWARD_METHODS:
            raise ValueError(f"reward_method={self.reward_method!r} is not one of {list(REWARD_METHODS)}")
        own = _own_method(type(self))
        if own is not None and self.reward_method != own:
            raise ValueError(
                f"{type(self).__name__} trains {own}, but reward_method={self.reward_method!r}; use "
                f"method_config({self.reward_method!r}) (or JudgeRewardGRPOConfig) for that method"
            )
        self.circuit_breaker()  # checks the thresholds
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
        # The other processes wait in a collective while the main process judges one round.
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
        """The reward method's options this config describes, built (and checked) by the method's options
        dataclass: a method's config class holds them as fields; this class, the defaults and `lambda_fmt`
        (None: the method's default)."""
        options_class = self.options_class()
        values = option_values(self) if isinstance(self, options_class) else {"lambda_fmt": self.lambda_fmt}
        if values["lambda_fmt"] is None:
            del values["lambda_fmt"]
        return options_class.from_values(values, source=f"the config of reward_method={self.reward_method!r}")


def method_config(name: str) -> type[JudgeRewardGRPOConfig]:
    """The config class of the reward method `name`: `JudgeRewardGRPOConfig` with the method's options
    dataclass as flat fields (same names, defaults, help and checks) and `reward_method` fixed to `name`.
    Named after the options class (`RankBufferOptions` -> `RankBufferGRPOConfig`), built once, and
    reachable as an attribute of this module (so a config pickles, as transformers saves it)."""
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


# ---- the trainer -------------------------------------------------------------------------------------------


class JudgeRewardGRPOTrainer(GRPOTrainerBase):
    """GRPO whose reward is a `GroupRewardMethod` applied to whole groups (see the module docstring).

    Args:
        model, args, train_dataset, ...: as `trl.GRPOTrainer` (all keyword arguments pass through).
        reward_method: a ready `GroupRewardMethod`; by default one is built from `args` on the main
            process (`build_reward_method`).
        judge: the judge for a method built from `args` (default: the one `args.judge_*` describe,
            `build_training_judge`).

    Only the main process scores; on other processes `reward_method` is None unless given.
    """

    #: a complete checkpoint also holds the reward method's state (`_save_state`)
    checkpoint_files = (TRAINER_STATE_NAME, METHOD_STATE_NAME)
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
        # Fail fast, before TRL loads any model: bad data (`dataset_checks`), then a judge that is down or
        # misnamed (`judging.server_settings.build_judge`).
        name = reward_method.name if reward_method is not None else args.reward_method
        self._check_datasets(name, args, kwargs.get("train_dataset"), kwargs.get("eval_dataset"))
        is_main = PartialState().is_main_process
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
        self._scorer = GroupScorer(reward_method, self._run_state.usage) if reward_method is not None else None
        self._monitor = None if reward_method is None else HackingMonitor(
            args, reward_method.judge, self._scorer.run, reward_method.answer_format)  # fmt: skip
        self._batch_inputs = self._launched = None
        self._generated_at = time.perf_counter()  # when the last batch's completions were ready

    def _check_datasets(self, name: str, args, train_dataset, eval_dataset) -> None:
        """Before TRL's `__init__`: every dataset row against what the method needs (its options'
        `data_needs()`, see `dataset_checks`; the config checked G); a ready method object other than the
        config's gets the row checks without requirements."""
        needs = args.method_options().data_needs() if name == args.reward_method else None
        evals = eval_dataset.values() if isinstance(eval_dataset, dict) else [eval_dataset]
        for dataset in [train_dataset, *evals]:
            if dataset is not None:
                check_training_dataset(dataset, needs)

    # ---- rewards: gather whole groups, score once on the main process, broadcast -------------------

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
        """TRL's generation; with `overlap_judging`, judging starts here, as soon as the completions exist,
        and runs while TRL computes the old-policy and reference log-probs (`_calculate_rewards` waits)."""
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
        """`scored` with the hacking monitor's metrics of this training step (`hacking_monitor`), warning of new
        findings (main process)."""
        if mode != "train" or self._monitor is None:
            return scored
        metrics = self._monitor.check(pending.groups, scored.rewards, self.state.global_step)
        for line in self._monitor.new_evidence():
            logger.warning(f"Judge-hacking alarm at step {self.state.global_step}: {line}. See docs/judging.md, "
                           "'What a rollout can and cannot do to its verdict'.")  # fmt: skip
        return dataclasses.replace(scored, metrics={**scored.metrics, **metrics})

    # ---- logging: cumulative totals are reported as their latest value, the rest as TRL averages -----

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        mode = "train" if self.model.training else "eval"
        for key, values in self._metrics[mode].items():
            if key.endswith(TOTAL_SUFFIX) and values:
                self._metrics[mode][key] = values[-1:]
        super().log(logs, start_time)

    # ---- model card: TRL's, plus how this model was trained (method, judge, data, cost) -------------

    def _card_section(self, dataset: str | None) -> str | None:
        """How this model was trained: the method, the judge, the data, the judge's cost (main process)."""
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
        return training_section(
            method=method.name,
            algorithm=training_algorithm(args),
            settings=self._card_settings(),
            judge=redact_urls(_describe(method), urls),
            base_model=getattr(self.model.config, "_name_or_path", None) or None,
            dataset=dataset or _dataset_name(self.train_dataset),
            usage=usage,
            method_state=method.summary(),
            evaluation=evaluation_summary(self),
        )

    def _card_settings(self) -> dict[str, Any]:
        """The settings a reader needs to reproduce the reward: GRPO's main ones and the method's own."""
        args = self.args
        own = {k: v for k, v in option_values(args.method_options()).items() if k != "lambda_fmt" and "path" not in k}
        return {"num_generations": args.num_generations, "loss_type": args.loss_type, "beta": args.beta,
                "learning_rate": args.learning_rate, "lambda_fmt": args.lambda_fmt, "judge_model": args.judge_model,
                "judge_max_tokens": args.judge_max_tokens, **critic_card_settings(args), **own}  # fmt: skip

    # ---- stopping on judge failure ----------------------------------------------------------------

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """The base's `train`; a run stopped by the judge circuit breaker raises `JudgeFailureError` after its
        checkpoint is saved. The main process prints the start-up block first (`startup_message`)."""
        if self.accelerator.is_main_process and self.reward_method is not None:
            logger.warning(self._startup_message())
        self._run_state.use_journal(self.args.output_dir, fresh=not resume_from_checkpoint)  # the judge bill
        output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        if self._run_state.breaker.tripped:
            checkpoint = self._checkpoint_folder()
            raise JudgeFailureError(
                f"{self._run_state.breaker.reason()}\nThe run stopped at step {self.state.global_step} and saved {checkpoint}. "
                f"Fix the judge ({_describe(self.reward_method) if self.reward_method else 'see the main process'}), "
                f"then run the same command with --resume_from_checkpoint {checkpoint} (or latest)."
            )
        return output

    # ---- checkpoints: the method's state (and judge usage totals) travel with every checkpoint ------

    def _save_state(self, checkpoint: str) -> None:
        self._run_state.save(checkpoint)

    def _load_state(self, checkpoint: str) -> None:
        restored = self._run_state.load(checkpoint, fresh_allowed=self.args.resume_with_fresh_reward_state)
        if self.reward_method is not None:
            logger.warning(resume_message(restored, self.state.global_step, self.reward_method.name))

    def _startup_message(self) -> str:
        args = self.args
        dataset = self.train_dataset
        return startup_message(
            processes=self.accelerator.num_processes,
            per_device_batch=args.per_device_train_batch_size,
            gradient_accumulation=args.gradient_accumulation_steps,
            num_generations=args.num_generations,
            num_iterations=args.num_iterations,
            queries=len(dataset) if hasattr(dataset, "__len__") else None,
            max_steps=args.max_steps,
            method=self.reward_method.name,
            judge=_describe(self.reward_method),
        )


_PACKAGED_BUILDERS = {"json", "csv", "parquet", "arrow", "text", "pandas", "generator", "webdataset"}


def _dataset_name(dataset) -> str | None:
    """The Hub name a `datasets.Dataset` knows of itself (not a packaged loader's name like "json")."""
    name = getattr(getattr(dataset, "info", None), "dataset_name", None)
    return None if name in _PACKAGED_BUILDERS else name


def _describe(method: GroupRewardMethod) -> str:
    return "; ".join(describe_judge(j) for j in method.judges)


class _RewardColumn:
    """Stands first in `reward_funcs` so TRL names and weights the group method's column; the trainer
    fills it. Called by TRL beside other reward functions, it returns None (no reward) per completion."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *, completions, **kwargs):
        return [None] * len(completions)


# ---- the trainers of RankBuffer and MatrixReward, and which trainer and script serve a method ----------------

RankBufferGRPOConfig = method_config(RankBufferReward.name)
MatrixRewardGRPOConfig = method_config(MatrixReward.name)


class RankBufferGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `RankBufferReward` (RankBuffer paper, Sections 3.1-3.5); everything else as
    `JudgeRewardGRPOTrainer`. Anchor texts live in a content-addressed SQLite file (`{output_dir}/anchors.sqlite`
    by default) that holds the buffer structures too; every checkpoint holds a snapshot of it.

        args = RankBufferGRPOConfig(output_dir="out", num_generations=8, k0=4, inactivity_epochs=3)
        trainer = RankBufferGRPOTrainer("path/to/policy", args=args, train_dataset=dataset)
    """

    _config_class = RankBufferGRPOConfig
    example_script = "examples/train_rankbuffer.py"


class MatrixRewardGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `MatrixReward` (MatrixReward paper, Algorithm 1); everything else as
    `JudgeRewardGRPOTrainer`. MatrixReward keeps no state across steps, so a resume needs nothing beyond
    TRL's own checkpoint. Defaults are the paper's method (Sec. 3); the other choices are its ablations.

        args = MatrixRewardGRPOConfig(output_dir="out", num_generations=8, protocol="explicit")
        trainer = MatrixRewardGRPOTrainer("path/to/policy", args=args, train_dataset=dataset)
    """

    _config_class = MatrixRewardGRPOConfig
    example_script = "examples/train_matrixreward.py"


def trainer_for_method(name: str) -> type[JudgeRewardGRPOTrainer]:
    """The trainer that serves the reward method `name`: the subclass whose config is that method's
    (`RankBufferGRPOTrainer`, ...), else `JudgeRewardGRPOTrainer`, which trains every method."""
    reward_method_class(name)  # an unknown name is an error listing the valid ones
    for trainer in JudgeRewardGRPOTrainer.__subclasses__():
        if _own_method(trainer._config_class) == name:
            return trainer
    return JudgeRewardGRPOTrainer


def script_for_method(name: str) -> str:
    """The example script (a path from the repository root) that trains the reward method `name`."""
    return trainer_for_method(name).example_script
