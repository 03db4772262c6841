"""Judge win rate during training: `JudgeWinRateCallback` and `JudgeEvalConfig`, its config fields.

Every `eval_steps` (None: `logging_steps`) and at the last step, the policy answers fixed prompts greedily and
the main process's judge compares each answer with the prompt's baseline (its best reference, or the starting
policy's answer cached in `output_dir/eval_baselines.json`) in both display orders; every process logs the
broadcast `eval/*` metrics. A judge that keeps failing trips a `JudgeCircuitBreaker`. Works with any Trainer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers import Trainer, TrainerCallback
from transformers.utils import logging
from trl.data_utils import maybe_apply_chat_template
from trl.models.utils import unwrap_model_for_generation

from ..config_checks import CheckedConfig
from ..evaluation.win_rate import PREFIX, EvalPrompt, evaluation_metrics, judge_against_baselines
from ..judging.calls import LedgerSnapshot
from ..judging.parsing import strip_thinking
from ..judging.server_settings import EVAL_JUDGE, TRAINING_JUDGE, EvalJudgeFields, build_judge
from ..rewards.state_files import write_json_atomic
from ..user_errors import ConfigError
from .group_scoring import combined_snapshot, register_references, share_from_main
from .model_card import describe_judge, redact_server_urls, redact_urls
from .reward_state import JudgeCircuitBreaker, JudgeFailureError

BASELINES = ("initial_policy", "reference")


@dataclass
class JudgeEvalConfig(CheckedConfig, EvalJudgeFields):
    """A mixin of TRL configs: `class MyConfig(JudgeEvalConfig, GRPOConfig)`; the judge's `eval_judge_*` fields are
    `EvalJudgeFields`'."""

    eval_prompts: str | None = field(
        default=None,
        metadata={
            "help": "Evaluation prompts of the judge win rate: a .json/.jsonl/.parquet file, a save_to_disk folder or "
            "a Hub id, with the training data's columns (prompt; query_id, rubrics, references optional). None: no "
            "win-rate evaluation. It runs every eval_steps (None: logging_steps) and at the last step."
        },
    )
    eval_num_prompts: int | None = field(
        default=None, metadata={"help": "Evaluate on the first this many of eval_prompts (None: all)."}
    )
    eval_baseline: str = field(
        default="initial_policy",
        metadata={
            "help": "What each answer is compared with: 'initial_policy' (the starting policy's greedy answer, "
            "generated at step 0 and cached in output_dir/eval_baselines.json for resumes) or 'reference' (the "
            "prompt's best reference).",
            "choices": list(BASELINES),
        },
    )

    def check_config(self) -> None:
        if self.eval_baseline not in BASELINES:
            raise ValueError(f"eval_baseline must be one of {list(BASELINES)}, got {self.eval_baseline!r}")
        if self.eval_num_prompts is not None and self.eval_num_prompts < 1:
            raise ValueError(f"eval_num_prompts must be >= 1 or None, got {self.eval_num_prompts}")

    def to_dict(self) -> dict[str, Any]:
        """`TrainingArguments.to_dict()` (what the loggers store) with every judge server URL redacted."""
        return redact_server_urls(super().to_dict())


def generate_answers(trainer, prompts: Sequence, *, max_new_tokens: int, batch_size: int) -> list[str]:
    """Every process: the policy's greedy answer to each prompt (text or chat messages), in prompt order."""
    accelerator = trainer.accelerator
    mine = list(range(accelerator.process_index, len(prompts), accelerator.num_processes))
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    template_kwargs = getattr(trainer.args, "chat_template_kwargs", None) or {}
    texts = [maybe_apply_chat_template({"prompt": prompts[i]}, tokenizer, **template_kwargs)["prompt"] for i in mine]
    answers: list[str] = []
    with unwrap_model_for_generation(trainer.model_wrapped, accelerator) as model:
        was_training = model.training
        model.eval()
        try:
            for start in range(0, len(texts), batch_size):
                answers += _generate_batch(model, tokenizer, texts[start : start + batch_size], max_new_tokens)
        finally:
            model.train(was_training)
    gathered = gather_object(list(zip(mine, answers, strict=True)))
    return [answer for _, answer in sorted(gathered)]


def _generate_batch(model, tokenizer, texts: list[str], max_new_tokens: int) -> list[str]:
    side, tokenizer.padding_side = tokenizer.padding_side, "left"  # new tokens start at one column for all rows
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    finally:
        tokenizer.padding_side = side
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        output = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad,
                                use_cache=True)  # fmt: skip
    return tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)


logger = logging.get_logger(__name__)

BASELINE_FILE = "eval_baselines.json"
_BASELINE_TEXT = {
    "initial_policy": "the starting policy's greedy answers",
    "reference": "the dataset's best references",
}


def add_judge_evaluation(trainer) -> None:
    """Attach the win-rate evaluation the config asks for (`eval_prompts` set); nothing otherwise."""
    if getattr(trainer.args, "eval_prompts", None):
        trainer.add_callback(JudgeWinRateCallback.from_args(trainer))


def evaluation_summary(trainer) -> str | None:
    """The model card's line on the win rate (`JudgeWinRateCallback.card_text`), None without the evaluation."""
    callbacks = trainer.callback_handler.callbacks
    return next((c.card_text() for c in callbacks if isinstance(c, JudgeWinRateCallback)), None)


def load_eval_prompts(source: str, limit: int | None = None) -> list[EvalPrompt]:
    """The first `limit` rows (None: all) of a dataset in the training layout, as `EvalPrompt`s."""
    from ..data.sources import load_source

    rows = load_source(source, split="train")
    if "prompt" not in rows.column_names:
        raise ConfigError(
            f"eval_prompts={source!r} has columns {rows.column_names}, no `prompt`; it needs the training data's "
            "layout (prompt; query_id, rubrics, references optional)"
        )
    rows = rows.select(range(min(limit, len(rows)))) if limit is not None else rows
    return [EvalPrompt.from_row(row) for row in rows]


def eval_judge_settings(args):
    """The evaluation judge's settings: `eval_judge_*`, else the training judge's `judge_*` (an error without)."""
    if args.eval_judge_base_urls:
        return EVAL_JUDGE.settings(args)
    if hasattr(args, "judge_base_urls"):
        return TRAINING_JUDGE.settings(args)
    raise ConfigError(
        f"eval_prompts={args.eval_prompts!r} needs an evaluation judge, and {type(args).__name__} has no training "
        "judge (judge_*) to stand in: set eval_judge_base_urls and eval_judge_model"
    )


class JudgeWinRateCallback(TrainerCallback):
    """Logs the policy's judge win rate against fixed baseline answers (`judge`: main process only); `max_new_tokens`
    defaults to `max_completion_length`, `batch_size` (prompts per generate call) to `per_device_eval_batch_size`."""

    def __init__(
        self,
        trainer,
        prompts: Sequence[EvalPrompt],
        *,
        judge,
        baseline: str = "initial_policy",
        max_new_tokens: int | None = None,
        batch_size: int | None = None,
        breaker: JudgeCircuitBreaker | None = None,
        judge_text: str | None = None,
    ):
        if baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {list(BASELINES)}, got {baseline!r}")
        if not prompts:
            raise ValueError("the win-rate evaluation needs at least one prompt; got none")
        if baseline == "reference":
            missing = [p.query_id for p in prompts if p.best_reference is None]
            if missing:
                raise ConfigError(
                    f"eval_baseline='reference' needs each evaluation prompt's `references` (best first); queries "
                    f"{missing[:5]} have none. Add them, or use eval_baseline='initial_policy'"
                )
        self.max_new_tokens = max_new_tokens or getattr(trainer.args, "max_completion_length", None)
        if not self.max_new_tokens:
            raise ConfigError("give max_new_tokens: the config has no max_completion_length to take it from")
        self.trainer, self.prompts, self.judge, self.baseline = trainer, list(prompts), judge, baseline
        self.batch_size = batch_size or trainer.args.per_device_eval_batch_size
        self.breaker = breaker or JudgeCircuitBreaker()
        self.judge_text = judge_text or (describe_judge(judge) if judge is not None else "the evaluation judge")
        self.baselines: list[str] | None = None
        self.evaluations: list[dict[str, float]] = []  # the logged metrics of each evaluation, with "step"
        self.answers: list[str] = []  # the latest evaluation's answers, for scoring them otherwise (a benchmark)
        self._ledger = LedgerSnapshot()  # the judge's ledger after the previous evaluation
        register_references([judge], self.prompts)

    @classmethod
    def from_args(cls, trainer) -> JudgeWinRateCallback:
        """Built from a `JudgeEvalConfig`'s fields (the judge built and checked on the main process)."""
        args = trainer.args
        settings = eval_judge_settings(args)  # raises on every process alike
        judge = judge_text = None
        if trainer.accelerator.is_main_process:
            judge = build_judge(settings, embedded_without_urls=settings.prefix == TRAINING_JUDGE.prefix)
            judge_text = redact_urls(describe_judge(judge), list(settings.base_urls))
        breaker = args.circuit_breaker() if hasattr(args, "circuit_breaker") else JudgeCircuitBreaker()
        prompts = load_eval_prompts(args.eval_prompts, args.eval_num_prompts)
        return cls(trainer, prompts, judge=judge, baseline=args.eval_baseline, breaker=breaker, judge_text=judge_text)

    def on_train_begin(self, args, state, control, **kwargs):
        self._restore(state.log_history)
        self.baselines = self._baseline_answers(args, state)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        every = state.eval_steps if args.eval_steps is not None else state.logging_steps
        if state.global_step % max(int(every), 1) == 0 or state.global_step >= state.max_steps:
            should_log = control.should_log
            self.evaluate(state)
            control.should_log = should_log  # logging resets it; the step's own training log must still happen
            if self.breaker.tripped:
                logger.error(
                    f"trl-rankreward: evaluation judge: {self.breaker.reason()}\nSaving a checkpoint, stopping."
                )
                control.should_save = control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.breaker.tripped:
            raise JudgeFailureError(
                f"Evaluation judge ({self.judge_text}): {self.breaker.reason()}\nThe run stopped at step "
                f"{state.global_step} and saved a checkpoint. Fix the evaluation judge (eval_judge_*), then resume "
                "with --resume_from_checkpoint latest."
            )
        return control

    def evaluate(self, state) -> dict[str, float]:
        """Every process: answer, gather; the main process judges; every process logs the broadcast metrics."""
        answers = self.answers = self._answers()
        is_main = self.trainer.accelerator.is_main_process
        metrics, messages = share_from_main(is_main, lambda: self._judge(answers), what="Win-rate judging")
        self._record(metrics, messages)
        # transformers' own log, not a subclass's: TRL's log() would fold in and clear its running averages
        Trainer.log(self.trainer, dict(metrics))
        self.evaluations.append({**metrics, "step": state.global_step})
        return metrics

    def _answers(self) -> list[str]:
        """The policy's greedy answers (every process), without a closed thinking block as in training."""
        answers = generate_answers(self.trainer, [p.prompt for p in self.prompts],
                                   max_new_tokens=self.max_new_tokens, batch_size=self.batch_size)  # fmt: skip
        return [strip_thinking(a) for a in answers]

    def _judge(self, answers: list[str]) -> tuple[dict[str, float], list[str]]:
        scores, messages = asyncio.run(judge_against_baselines(self.judge, self.prompts, answers, self.baselines))
        now = combined_snapshot([self.judge])
        usage, self._ledger = now - self._ledger, now
        return evaluation_metrics(scores, usage), messages

    def _record(self, metrics: dict[str, float], messages: list[str]) -> None:
        failed = int(metrics[f"{PREFIX}prompts_failed"])
        self.breaker.record(failed, failed + int(metrics[f"{PREFIX}prompts_judged"]), messages)

    def _restore(self, log_history: list[dict]) -> None:
        """After a resume: the evaluations so far, from the log history (the breaker replays them)."""
        self.evaluations = [dict(e) for e in log_history if f"{PREFIX}prompts_judged" in e]
        self.breaker = dataclasses.replace(self.breaker)  # the same thresholds, no batches seen
        for entry in self.evaluations:
            self._record(entry, [])

    def _baseline_answers(self, args, state) -> list[str]:
        if self.baseline == "reference":
            return [p.best_reference for p in self.prompts]
        path = os.path.join(args.output_dir, BASELINE_FILE)
        ids = [p.query_id for p in self.prompts]
        if state.global_step == 0:  # the model is the starting policy: answer now, keep the answers for resumes
            answers = self._answers()
            if self.trainer.accelerator.is_main_process:
                write_json_atomic(path, {"query_ids": ids, "max_new_tokens": self.max_new_tokens, "answers": answers})
            return answers
        payload = [
            _read_baselines(path, ids, self.max_new_tokens) if self.trainer.accelerator.is_main_process else None
        ]
        broadcast_object_list(payload, from_process=0)
        if isinstance(payload[0], str):
            raise ValueError(payload[0])
        return payload[0]

    def card_text(self) -> str:
        """One line: the final win rate, its interval, against what, by which judge, and what judging it cost."""
        rated = [e for e in self.evaluations if f"{PREFIX}win_rate" in e]
        if not rated:
            return f"no judge win rate was measured ({len(self.evaluations)} evaluations, none judged)"
        last = rated[-1]
        calls = sum(e.get(f"{PREFIX}judge_calls", 0.0) for e in self.evaluations)
        tokens = sum(e.get(f"{PREFIX}judge_prompt_tokens", 0.0) + e.get(f"{PREFIX}judge_completion_tokens", 0.0)
                     for e in self.evaluations)  # fmt: skip
        return (
            f"win rate {last[f'{PREFIX}win_rate']:.3f} (95% Wilson interval {last[f'{PREFIX}win_rate_low']:.3f}-"
            f"{last[f'{PREFIX}win_rate_high']:.3f}) at step {int(last['step'])} against {_BASELINE_TEXT[self.baseline]} "
            f"on {int(last[f'{PREFIX}prompts_judged'])} prompts, judged by {self.judge_text} in both display orders "
            f"(ties count half); evaluation judging cost {int(calls):,} calls and {int(tokens):,} tokens, kept apart "
            "from the training judge's cost"
        )

    def add_to_model_card(self, card_path: str) -> None:
        """Append an Evaluation section to a model card (plain TRL trainers; the package's trainers write it)."""
        text = self.card_text()
        with open(card_path, "a", encoding="utf-8") as f:
            f.write(f"\n## Evaluation\n\n{text[:1].upper()}{text[1:]}.\n")


def _read_baselines(path: str, ids: list[str], max_new_tokens: int) -> list[str] | str:
    """The cached starting-policy answers, or the error message (a resume cannot answer as the starting policy)."""
    fix = ("the starting policy's answers cannot be regenerated on resume; start the run again, or use "
           "eval_baseline='reference'")  # fmt: skip
    if not os.path.exists(path):
        return f"{path} not found: it holds the baseline answers written when this run started; {fix}"
    try:
        with open(path, encoding="utf-8") as f:
            cached = json.load(f)
    except (OSError, ValueError) as exc:  # a message, so that the other processes hear of it too
        return f"{path} cannot be read ({exc}); {fix}"
    if not isinstance(cached, dict) or not isinstance(cached.get("answers"), list):
        return f"{path} holds no list of answers; {fix}"
    if cached.get("query_ids") != ids or cached.get("max_new_tokens") != max_new_tokens:
        return (
            f"{path} holds baseline answers for other evaluation prompts or another answer length "
            f"(max_new_tokens {cached.get('max_new_tokens')} vs {max_new_tokens}); {fix}"
        )
    return list(cached["answers"])
