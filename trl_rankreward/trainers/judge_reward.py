"""`JudgeRewardGRPOTrainer`: TRL's GRPO with a group reward method judged by an LLM (or embedded) judge.

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

import json
import os
import time
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from accelerate import PartialState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.utils import logging
from trl import GRPOConfig

from ..judging.protocol import Judge
from ..judging.server_fields import TrainingJudgeFields
from ..judging.server_settings import TRAINING_JUDGE, build_judge
from ..rewards.answers import AnswerFormat
from ..rewards.base import GroupRewardMethod, RunContext
from ..rewards.matrix_reward import MatrixRewardOptions
from ..rewards.options import MethodOptions, option_values
from ..rewards.rank_buffer import RankBufferOptions
from ..rewards.registry import REWARD_METHODS, reward_method_class
from ..rewards.state_files import METHOD_STATE_NAME
from .base import GRPOTrainerBase
from .dataset_checks import check_group_size, check_training_dataset
from .group_scoring import TOTAL_SUFFIX, GroupScorer, PendingScore, Scored, gather_rows, reward_row, share_from_main
from .judge_eval import JudgeEvalConfig, check_judge_eval, evaluation_summary
from .model_card import CITATIONS, describe_judge, redact_urls, training_section
from .ppo import CriticConfig, critic_card_settings, critic_post_init, training_algorithm
from .reward_state import (
    JUDGE_USAGE_NAME,
    JudgeCircuitBreaker,
    JudgeFailureError,
    RewardRunState,
    resume_message,
    startup_message,
)

# ---- from builders.py ----------------------------------------------------------------------------------

def build_training_judge(config, *, genrm_format: bool = False) -> Judge:
    """The judge the config's `judge_*` fields describe, its servers checked now: an `LLMJudge`, the
    embedded `EmbeddingJudge` when `judge_base_urls` is empty, or with `genrm_format` a `GenRMJudge`
    (a GenRM answering \\boxed{A|B}, in the R-Align authors' layout when the options set `r_align_release`)."""
    settings = TRAINING_JUDGE.settings(config)
    if genrm_format:
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


# ---- from run_naming.py --------------------------------------------------------------------------------

def name_the_run(args, method: str) -> None:
    """Name runs by method and judge for W&B (and other loggers), unless the user did: `run_name`
    defaults to `<method>-<judge>-<output_dir name>`; W&B's group and tags come from the
    environment variables `WANDB_RUN_GROUP` (default: the method) and `WANDB_TAGS`."""
    judge = (args.judge_model or "embedded").rstrip("/").split("/")[-1]
    if not args.run_name:
        args.run_name = f"{method}-{judge}-{os.path.basename(os.path.normpath(args.output_dir))}"
    os.environ.setdefault("WANDB_RUN_GROUP", method)
    os.environ.setdefault("WANDB_TAGS", f"trl-rankreward,{method},judge:{judge}")


# ---- from judge_reward_config.py -----------------------------------------------------------------------

@dataclass
class JudgeRewardGRPOConfig(TrainingJudgeFields, JudgeEvalConfig, CriticConfig, GRPOConfig):
    """`GRPOConfig` plus the judge and the group reward method (and PPO's critic, `trainers.ppo`).

    Every field is in sight: its own below, the judge server's (`judge_*`) in
    `judging.server_fields.TrainingJudgeFields`, the win rate's in `judge_eval_config.JudgeEvalConfig`,
    the critic's in `critic_config.CriticConfig`. The judge is an `LLMJudge` over an OpenAI-compatible
    server (vLLM, SGLang, `transformers serve`, ...), or without URLs the offline `EmbeddingJudge` (it ranks
    by similarity to the query's `references`).

    The method's options are `reward_method_kwargs` and `lambda_fmt`, checked by the method's
    options dataclass (`rewards.options`; `method_options()` builds it). A config for one method
    (`MatrixRewardGRPOConfig`, `RankBufferGRPOConfig`) inherits that dataclass, so its options
    are its own fields, with the same names and defaults.
    """

    reward_method: str = field(
        default="pointwise",
        metadata={"help": "Group reward method by registry name.", "choices": list(REWARD_METHODS)},
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
            "`lambda_fmt` of its options class (e.g. `RankBufferOptions`)."
        },
    )
    thinking_format: bool = field(
        default=False,
        metadata={"help": "Rollouts must close a <think> block before the answer; the judge sees the answer only."},
    )
    reward_method_kwargs: dict[str, Any] | str | None = field(
        default_factory=dict,
        metadata={
            "help": "The reward method's options other than lambda_fmt (a dict, or a JSON string on the CLI), e.g. "
            "'{\"brackets\": 3}'; a name the method does not have is an error listing its options."
        },
    )

    def __post_init__(self):
        """The config's one validation path: TRL's and the critic's checks, the evaluation's, the judge
        server's, then this class's fields and the method's options (a config for one method runs this too)."""
        critic_post_init(self)
        check_judge_eval(self)
        judge = TRAINING_JUDGE.check(self)
        if isinstance(self.reward_method_kwargs, str):
            try:
                self.reward_method_kwargs = json.loads(self.reward_method_kwargs)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"reward_method_kwargs (--reward_method_kwargs) is not valid JSON: {exc}; got "
                    f"{self.reward_method_kwargs!r}, expected an object such as '{{\"k0\": 4}}'"
                ) from None
        if not isinstance(self.reward_method_kwargs, (dict, type(None))):
            raise ValueError(
                f"reward_method_kwargs (--reward_method_kwargs) must be a JSON object of keyword arguments, got "
                f"{type(self.reward_method_kwargs).__name__} {self.reward_method_kwargs!r}"
            )
        self.reward_method_kwargs = dict(self.reward_method_kwargs or {})
        if self.reward_method not in REWARD_METHODS:
            raise ValueError(f"reward_method={self.reward_method!r} is not one of {list(REWARD_METHODS)}")
        self.circuit_breaker()  # checks the thresholds
        if self.judge_base_urls:
            # The other processes wait in a collective while the main process judges one round.
            worst = judge.retry_policy().worst_case_s(self.judge_timeout_s)
            if worst > self.ddp_timeout:
                warnings.warn(
                    f"One judge request can take up to {worst:g} s against a hung server (judge_max_attempts="
                    f"{self.judge_max_attempts} x judge_timeout_s={self.judge_timeout_s:g}, plus backoff), longer "
                    f"than ddp_timeout={self.ddp_timeout} s that the other processes wait while the main process "
                    "judges: raise ddp_timeout or lower judge_timeout_s / judge_max_attempts",
                    stacklevel=2,
                )
        clash = sorted({"lambda_fmt", "answer_format", "judge"} & set(self.reward_method_kwargs))
        if clash:
            raise ValueError(
                f"reward_method_kwargs sets {clash}, which come from the config's own fields (lambda_fmt, "
                "thinking_format, judge_*); set those fields instead"
            )
        self._check_own_method()
        options = self.method_options()  # checked by the method's options class
        if isinstance(self, MethodOptions):  # a config for one method: its option fields as checked
            for name, value in option_values(options).items():
                setattr(self, name, value)
        self.lambda_fmt = options.lambda_fmt  # None: the method's default

    def circuit_breaker(self) -> JudgeCircuitBreaker:
        """A fresh breaker with the config's thresholds (`judge_stop_after_failed_batches`, ...)."""
        return JudgeCircuitBreaker(
            self.judge_stop_after_failed_batches, self.judge_failure_window, self.judge_max_neutral_fraction
        )

    def method_options(self) -> MethodOptions:
        """The reward method's options this config describes, built (and checked) by the method's options
        dataclass: a config for one method holds them as fields; otherwise `reward_method_kwargs` and
        `lambda_fmt` (None: the method's default)."""
        options_class = reward_method_class(self.reward_method).options_class
        if isinstance(self, options_class):
            values = option_values(self)
        else:
            values = {**self.reward_method_kwargs, "lambda_fmt": self.lambda_fmt}
        if values["lambda_fmt"] is None:
            del values["lambda_fmt"]
        return options_class.from_values(values, source=f"reward_method_kwargs of reward_method={self.reward_method!r}")

    def _check_own_method(self) -> None:
        """A config for one method (it inherits the method's options): `reward_method` stays that method,
        and its options are fields, not `reward_method_kwargs`."""
        if not isinstance(self, MethodOptions):
            return
        name, own = type(self).__name__, self.__dataclass_fields__["reward_method"].default
        if self.reward_method != own:
            raise ValueError(
                f"{name} trains {own}, but reward_method={self.reward_method!r}; use JudgeRewardGRPOConfig for "
                "other methods"
            )
        if self.reward_method_kwargs:
            raise ValueError(
                f"reward_method_kwargs={self.reward_method_kwargs} is not used by {name}: {own}'s options are its "
                f"own fields ({', '.join(option_values(self))})"
            )


# ---- from judge_reward.py ------------------------------------------------------------------------------

logger = logging.get_logger(__name__)

WAIT_SECONDS = "judge/wait_seconds"  # the step waiting for its rewards in `_calculate_rewards`
OVERLAP_WINDOW_SECONDS = "judge/overlap_window_seconds"  # from the end of generation to that wait

__all__ = ["JUDGE_USAGE_NAME", "METHOD_STATE_NAME", "JudgeFailureError", "JudgeRewardGRPOConfig",
           "JudgeRewardGRPOTrainer"]  # fmt: skip


class JudgeRewardGRPOTrainer(GRPOTrainerBase):
    """GRPO whose reward is a `GroupRewardMethod` applied to whole groups (see the module docstring).

    Args:
        model, args, train_dataset, ...: as `trl.GRPOTrainer` (all keyword arguments pass through).
        reward_method: a ready `GroupRewardMethod`; by default one is built from `args` on the main
            process (`builders.build_reward_method`).
        judge: the judge for a method built from `args` (default: the one `args.judge_*` describe,
            `builders.build_training_judge`).

    Only the main process scores; on other processes `reward_method` is None unless given.
    """

    #: a complete checkpoint also holds the reward method's state (`_save_state`)
    checkpoint_files = (TRAINER_STATE_NAME, METHOD_STATE_NAME)
    #: the config `args` must be (a subclass's adds its method's options)
    _config_class: type = JudgeRewardGRPOConfig

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
        self._paper = {"citation": CITATIONS[name]} if name in CITATIONS else {}  # the method's paper
        super().__init__(model, reward_funcs=[_RewardColumn(name), *extra], args=args, **kwargs)
        if reward_method is None and is_main:
            reward_method = build_reward_method(args, judge, tokenizer=self.processing_class)
        self.reward_method = reward_method
        self._run_state = RewardRunState(reward_method, args.circuit_breaker(), fresh_setting="resume_with_fresh_reward_state=True")
        self._scorer = GroupScorer(reward_method, self._run_state.usage) if reward_method is not None else None
        self._batch_inputs = self._launched = None
        self._generated_at = time.perf_counter()  # when the last batch's completions were ready

    def _check_datasets(self, name: str, args, train_dataset, eval_dataset) -> None:
        """Before TRL's `__init__`: G and every dataset row against what the method needs (its options'
        `data_needs()`, see `dataset_checks`); a ready method object other than the config's gets the row
        checks without requirements."""
        needs = args.method_options().data_needs() if name == args.reward_method else None
        if needs is not None:
            check_group_size(name, needs, args.num_generations)
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
        scored: Scored = share_from_main(is_main, lambda: self._scorer.finish(pending))
        waited = time.perf_counter() - waiting
        self._record({**scored.metrics, WAIT_SECONDS: waited, OVERLAP_WINDOW_SECONDS: waiting - self._generated_at})
        self._run_state.record(scored, mode, step=self.state.global_step, is_main=is_main)
        if self._run_state.breaker.tripped:  # this step ends with a checkpoint, and the run stops (every rank)
            self.control.should_save = self.control.should_training_stop = True
        return torch.tensor(scored.rewards, dtype=torch.float32, device=self.accelerator.device)

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
        common = {f.name for f in fields(JudgeRewardGRPOConfig)}
        own = {f.name: getattr(args, f.name) for f in fields(args) if f.name not in common and "path" not in f.name}
        return {"num_generations": args.num_generations, "loss_type": args.loss_type, "beta": args.beta,
                "learning_rate": args.learning_rate, "lambda_fmt": args.lambda_fmt, "judge_model": args.judge_model,
                "judge_max_tokens": args.judge_max_tokens, **critic_card_settings(args), **args.reward_method_kwargs,
                **own}  # fmt: skip

    # ---- stopping on judge failure ----------------------------------------------------------------

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """The base's `train`; a run stopped by the judge circuit breaker raises `JudgeFailureError` after its
        checkpoint is saved. The main process prints the start-up block first (`run_summary`)."""
        if self.accelerator.is_main_process and self.reward_method is not None:
            logger.warning(self._startup_message())
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


# ---- from rank_buffer.py -------------------------------------------------------------------------------

@dataclass
class RankBufferGRPOConfig(RankBufferOptions, JudgeRewardGRPOConfig):
    """`JudgeRewardGRPOConfig` with `RankBufferOptions`'s fields; `reward_method` is always "rank_buffer"."""

    reward_method: str = field(default="rank_buffer", metadata={"help": "Fixed to 'rank_buffer' for this trainer."})

    def __post_init__(self):
        JudgeRewardGRPOConfig.__post_init__(self)  # the one path: TRL's, the judges', RankBufferOptions' checks
        if self.buffer_init == "bootstrap" and self.k0 > self.num_generations:
            raise ValueError(
                f"buffer_init='bootstrap' takes k0={self.k0} anchors from the first group, but num_generations="
                f"{self.num_generations}; lower k0 or raise num_generations"
            )


class RankBufferGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `RankBufferReward`; everything else as `JudgeRewardGRPOTrainer`."""

    _config_class = RankBufferGRPOConfig


# ---- from matrix_reward.py -----------------------------------------------------------------------------

@dataclass
class MatrixRewardGRPOConfig(MatrixRewardOptions, JudgeRewardGRPOConfig):
    """`JudgeRewardGRPOConfig` with MatrixReward's options (`MatrixRewardOptions`) as fields;
    `reward_method` is always "matrix".

    Defaults are the paper's method (Sec. 3); the other choices are its ablations
    (Sec. 4.2-4.5, App. F). Options that would be silently ignored by the chosen setting
    (e.g. `mixture_alpha` without `fusion="additive"`) are rejected.
    """

    reward_method: str = field(default="matrix", metadata={"help": "Fixed to 'matrix' for this trainer."})

    def __post_init__(self):
        JudgeRewardGRPOConfig.__post_init__(self)  # the one path: TRL's, the judges', MatrixRewardOptions' checks


class MatrixRewardGRPOTrainer(JudgeRewardGRPOTrainer):
    """GRPO trainer with `MatrixReward`; everything else as `JudgeRewardGRPOTrainer`."""

    _config_class = MatrixRewardGRPOConfig
