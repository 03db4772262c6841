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

import dataclasses
import time
from dataclasses import fields
from typing import Any

import torch
from accelerate import PartialState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.utils import logging

from ..rewards.base import GroupRewardMethod
from ..rewards.state_files import METHOD_STATE_NAME
from .base import GRPOTrainerBase
from .builders import build_reward_method, build_training_judge
from .circuit_breaker import JudgeFailureError
from .critic_config import critic_card_settings, training_algorithm
from .dataset_checks import check_group_size, check_training_dataset
from .group_scoring import GroupScorer, PendingScore, Scored, gather_rows, share_from_main
from .grouping import reward_row
from .hacking_monitor import ALARM, HackingMonitor
from .judge_eval import evaluation_summary
from .judge_reward_config import JudgeRewardGRPOConfig
from .judge_usage import TOTAL_SUFFIX
from .model_card import CITATIONS, describe_judge, redact_urls, training_section
from .reward_state import JUDGE_USAGE_NAME, RewardRunState
from .run_naming import name_the_run
from .run_summary import resume_message, startup_message

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
        self._monitor = None if reward_method is None else HackingMonitor(
            args, reward_method.judge, self._scorer.run, reward_method.answer_format)  # fmt: skip
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
