"""Public builders from a `JudgeRewardGRPOConfig`: the training judge and the reward method.

The trainers build theirs with these, and so do the examples and benchmarks that need a judge
or a method outside a trainer (a GenRM judge for `examples/train_genrm_rlhf.py`, one method
scored by hand in `benchmarks/fault_suite.py`):

    judge = build_training_judge(config)                      # LLMJudge, or the embedded judge without URLs
    method = build_reward_method(config, judge, tokenizer=tokenizer)
"""

from __future__ import annotations

from ..judging.requests import Judge
from ..judging.server_settings import TRAINING_JUDGE, build_judge
from ..rewards.base import AnswerFormat, GroupRewardMethod, RunContext
from ..rewards.registry import reward_method_class


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
