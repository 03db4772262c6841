"""`JudgeRewardGRPOConfig`: the config of `judge_reward.JudgeRewardGRPOTrainer`."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from ..judging.server_settings import TRAINING_JUDGE, TrainingJudgeFields
from ..rewards.options import MethodOptions, option_values
from ..rewards.registry import REWARD_METHODS, reward_method_class
from .circuit_breaker import JudgeCircuitBreaker
from .critic_config import CriticConfig, critic_post_init
from .judge_eval_config import JudgeEvalConfig, check_judge_eval


@dataclass
class JudgeRewardGRPOConfig(TrainingJudgeFields, JudgeEvalConfig, CriticConfig, GRPOConfig):
    """`GRPOConfig` plus the judge and the group reward method (and PPO's critic, `trainers.ppo`).

    Every field is in sight: its own below, the judge server's (`judge_*`) in
    `judging.server_settings.TrainingJudgeFields`, the win rate's in `judge_eval_config.JudgeEvalConfig`,
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
