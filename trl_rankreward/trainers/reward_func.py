"""`as_reward_func`: a group reward method as a reward function of a plain `trl.GRPOTrainer`.

    fn = trl_rankreward.as_reward_func(method, num_generations=8)
    trainer = trl.GRPOTrainer(model, reward_funcs=[fn], args=GRPOConfig(num_generations=8, ...),
                              train_dataset=dataset, callbacks=[fn.callback])

What `JudgeRewardGRPOTrainer` does, from the same parts: whole groups scored once on the main process, neutral
groups as None, the circuit breaker, the method's state and judge totals in every checkpoint, `judge/*` metrics.
"""

from __future__ import annotations

import math
import os
from typing import Any

from accelerate import PartialState
from transformers import TrainerCallback
from transformers.utils import logging

from ..rewards.base import GroupRewardMethod
from .base import checkpoint_folder
from .group_scoring import TOTAL_SUFFIX, GroupScorer, Scored, gather_rows, reward_row, share_from_main
from .reward_state import JudgeCircuitBreaker, JudgeFailureError, RewardRunState, resume_message

logger = logging.get_logger(__name__)

#: dataset columns a reward row reads (`group_scoring.reward_row`), passed by TRL as per-row lists
_ROW_COLUMNS = ("query_id", "rubrics", "references")


def as_reward_func(
    method: GroupRewardMethod,
    *,
    num_generations: int,
    num_generations_eval: int | None = None,
    judge_stop_after_failed_batches: int = JudgeCircuitBreaker.max_failed_batches,
    judge_failure_window: int = JudgeCircuitBreaker.window,
    judge_max_neutral_fraction: float = JudgeCircuitBreaker.max_neutral_fraction,
    resume_with_fresh_state: bool = False,
) -> GroupRewardFunction:
    """`method` (built on every process; only the main one scores) as a TRL reward function; pass
    `callbacks=[fn.callback]` too. `num_generations_eval` defaults to the trainer's, else G; the other arguments
    mean what `JudgeRewardGRPOConfig`'s fields of those names mean."""
    breaker = JudgeCircuitBreaker(judge_stop_after_failed_batches, judge_failure_window, judge_max_neutral_fraction)
    return GroupRewardFunction(method, num_generations, num_generations_eval, breaker, resume_with_fresh_state)


class GroupRewardFunction:
    """The reward function `as_reward_func` returns (module docstring); TRL names its column `method.name`."""

    def __init__(self, method, num_generations, num_generations_eval, breaker, resume_with_fresh_state):
        if num_generations < 1:
            raise ValueError(f"as_reward_func: num_generations must be >= 1, got {num_generations}")
        self.__name__ = method.name
        self.method = method
        self.num_generations = num_generations
        self.num_generations_eval = num_generations_eval
        self.resume_with_fresh_state = resume_with_fresh_state
        self._breaker = breaker
        self._run_state: RewardRunState | None = None  # built on first use, once the process is known
        self._scorer: GroupScorer | None = None
        self._calls = 0  # batches scored, the step number outside a trainer
        self.totals: dict[str, float] = {}  # the latest judge/*_total metrics
        self.callback = GroupRewardCallback(self)

    @property
    def run_state(self) -> RewardRunState:
        """Judge totals, breaker and neutral count; the method only on the main process."""
        if self._run_state is None:
            is_main = PartialState().is_main_process
            fresh = "as_reward_func(..., resume_with_fresh_state=True)"
            self._run_state = RewardRunState(self.method if is_main else None, self._breaker, fresh_setting=fresh)
            self._scorer = GroupScorer(self.method, self._run_state.usage) if is_main else None
        return self._run_state

    def __call__(self, prompts, completions, trainer_state=None, log_metric=None, **columns) -> list[float | None]:
        """One reward per completion of this process (None for an unscorable one), from whole groups."""
        if trainer_state is not None and not self.callback.attached:
            raise ValueError(
                f"The reward function {self.__name__!r} was called by a trainer that does not have its callback: "
                "pass callbacks=[fn.callback] to GRPOTrainer beside reward_funcs=[fn] (it saves and restores the "
                "method's state with the checkpoints and stops on judge failure)"
            )
        state = PartialState()
        run_state = self.run_state
        mode = self.callback.mode()
        group_size = self.num_generations
        if mode == "eval":
            group_size = self.num_generations_eval or self.callback.num_generations_eval or self.num_generations
        rows = [reward_row(example, p, c) for example, p, c in zip(_examples(columns, len(prompts)), prompts,
                                                                      completions, strict=True)]  # fmt: skip
        all_rows = gather_rows(rows, group_size, state.process_index)
        step = trainer_state.global_step if trainer_state is not None else self._calls
        epoch = (trainer_state.epoch or 0.0) if trainer_state is not None else 0.0
        scored = share_from_main(state.is_main_process, lambda: self._score(all_rows, group_size, mode, epoch, step))
        self._calls += 1
        run_state.record(scored, mode, step=step, is_main=state.is_main_process)
        self.totals = {k: v for k, v in scored.metrics.items() if k.endswith(TOTAL_SUFFIX)}
        if log_metric is not None:
            for key, value in scored.metrics.items():
                if not key.endswith(TOTAL_SUFFIX):
                    log_metric(key, value)
        mine = scored.rewards[state.process_index * len(rows) : (state.process_index + 1) * len(rows)]
        return [None if math.isnan(r) else r for r in mine]

    def _score(self, rows, group_size, mode, epoch, step) -> Scored:
        return self._scorer.finish(self._scorer.start(rows, group_size, mode=mode, epoch=epoch, step=step))


class GroupRewardCallback(TrainerCallback):
    """`fn.callback`; it also checks the trainer's G against the function's."""

    def __init__(self, reward_func: GroupRewardFunction):
        self.reward_func = reward_func
        self.attached = False
        self.num_generations_eval: int | None = None
        self._model = None

    def mode(self) -> str:
        """The batch's mode: "eval" while the trainer evaluates, else "train" (outside a trainer too)."""
        return "eval" if self._model is not None and not self._model.training else "train"

    def on_init_end(self, args, state, control, model=None, **kwargs):
        fn = self.reward_func
        trainer_g = getattr(args, "num_generations", None)
        if trainer_g is not None and trainer_g != fn.num_generations:
            raise ValueError(
                f"as_reward_func({fn.__name__!r}, num_generations={fn.num_generations}) but the trainer's "
                f"num_generations is {trainer_g}: give the reward function the trainer's group size"
            )
        self.num_generations_eval = getattr(args, "num_generations_eval", None)
        self.attached, self._model = True, model

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._model = model if model is not None else self._model
        self.reward_func.run_state.use_journal(args.output_dir, fresh=state.global_step == 0)  # the judge bill
        if state.global_step == 0:
            return
        checkpoint = _resumed_checkpoint(args, state)
        restored = self.reward_func.run_state.load(checkpoint, fresh_allowed=self.reward_func.resume_with_fresh_state)
        if state.is_world_process_zero:
            logger.warning(resume_message(restored, state.global_step, self.reward_func.__name__))

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            checkpoint = checkpoint_folder(args.output_dir, state.global_step)
            os.makedirs(checkpoint, exist_ok=True)
            self.reward_func.run_state.save(checkpoint)

    def on_log(self, args, state, control, logs=None, **kwargs):
        totals = self.reward_func.totals
        if not logs or not totals or any(key.startswith("eval_") for key in logs):
            return
        logs.update(totals)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(totals)  # the entry Trainer.log appended just before calling back

    def on_step_end(self, args, state, control, **kwargs):
        if self.reward_func.run_state.breaker.tripped:
            control.should_save = control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        breaker = self.reward_func.run_state.breaker
        if breaker.tripped:
            raise JudgeFailureError(
                f"{breaker.reason()}\nThe run stopped at step {state.global_step} and saved "
                f"{checkpoint_folder(args.output_dir, state.global_step)}. Fix the judge, "
                "then resume with trainer.train(resume_from_checkpoint=True)."
            )


def _examples(columns: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Per-row dicts of the dataset columns a reward row reads, from TRL's per-row lists."""
    present = {key: columns[key] for key in _ROW_COLUMNS if columns.get(key) is not None}
    return [{key: values[i] for key, values in present.items()} for i in range(n)]


def _resumed_checkpoint(args, state) -> str:
    """`args.resume_from_checkpoint` when it is a folder, else the `checkpoint-{global_step}` a resume picks."""
    given = getattr(args, "resume_from_checkpoint", None)
    if isinstance(given, str) and os.path.isdir(given):
        return given
    checkpoint = checkpoint_folder(args.output_dir, state.global_step)
    if not os.path.isdir(checkpoint):
        raise ValueError(
            f"Training resumed at step {state.global_step}, but {checkpoint} is not a folder, so the reward method's "
            "state cannot be restored; set GRPOConfig(resume_from_checkpoint=PATH) to the checkpoint you resume from"
        )
    return checkpoint
