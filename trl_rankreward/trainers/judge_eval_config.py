"""`JudgeEvalConfig`, the fields of the judge win rate during training (`judge_eval`), and their checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..judging.server_settings import EVAL_JUDGE, EvalJudgeFields
from .model_card import redact_server_urls

BASELINES = ("initial_policy", "reference")


@dataclass
class JudgeEvalConfig(EvalJudgeFields):
    """A mixin of TRL configs: `class MyConfig(JudgeEvalConfig, GRPOConfig)`. Its `__post_init__` runs the
    other bases' (TRL's, then the judge's `EVAL_JUDGE.check`), then checks the baseline and the count; a
    config whose own `__post_init__` does not chain to it calls `check_judge_eval(self)`. The judge's fields
    (`eval_judge_*`) are `EvalJudgeFields`'."""

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

    def __post_init__(self):
        super().__post_init__()  # EvalJudgeFields': the bases after it, then the judge's settings
        _check_eval_options(self)

    def to_dict(self) -> dict[str, Any]:
        """`TrainingArguments.to_dict()` (what W&B and the other loggers store as the run's config) with the
        judge server URLs of every role redacted, as the model card redacts them (they can be private hosts)."""
        return redact_server_urls(super().to_dict())


def check_judge_eval(config: JudgeEvalConfig) -> None:
    """The evaluation's fields: its judge server's (`eval_judge_*`, URLs written back as a list), the baseline, the count."""
    EVAL_JUDGE.check(config)
    _check_eval_options(config)


def _check_eval_options(config: JudgeEvalConfig) -> None:
    if config.eval_baseline not in BASELINES:
        raise ValueError(f"eval_baseline must be one of {list(BASELINES)}, got {config.eval_baseline!r}")
    if config.eval_num_prompts is not None and config.eval_num_prompts < 1:
        raise ValueError(f"eval_num_prompts must be >= 1 or None, got {config.eval_num_prompts}")
