"""`Group`, `GroupResult` and `GroupRewardMethod`: the contract every reward method keeps.

The base class does what every method shares: final-answer extraction (`AnswerFormat`; a rollout without a valid
answer is never judged and ranks below every valid one, RankBuffer Sec. 3.4); de-duplication (identical answers are
judged once and share a place); scoring a step's groups concurrently; the failure policy (`GroupJudgingFailed` -> a
neutral group, counted in `reward/neutral_groups`, never a made-up verdict); and the format reward,
`reward = semantic + lambda_fmt * format_reward(completion)`. Subclasses implement `score_group` and return a
`RankOutcome` (tie blocks over unique answers -> rank rewards in [-1, 1]) or a `ScoreOutcome` (one semantic reward
per unique answer).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence, TypeVar

from ..judging.parsing import strip_thinking
from ..judging.rendering import encodable
from ..judging.requests import Judge, JudgeFailure, Rubric, is_failure
from .options import MethodOptions
from .state_files import METHOD_STATE_NAME, read_method_state, write_method_state

R = TypeVar("R")


@dataclass(frozen=True)
class AnswerFormat:
    """The required output format: `thinking`, the policy must close a `</think>` block before its answer
    (Qwen3 thinking mode); `max_answer_chars`, answers are truncated to it before judging (None: no limit)."""

    thinking: bool = False
    max_answer_chars: int | None = None

    def final_answer(self, completion: str) -> str | None:
        """The text the judge sees, or None when the rollout has no valid final answer."""
        if "</think>" not in completion and (self.thinking or "<think>" in completion):
            return None  # required thinking missing, or thinking never closed: the answer was cut off
        answer = strip_thinking(completion)
        return answer[: self.max_answer_chars] if answer else None

    def format_reward(self, completion: str) -> float:
        """1.0 when the rollout follows the format (closed thinking if required, non-empty answer)."""
        return 1.0 if self.final_answer(completion) is not None else 0.0


def rank_reward(position: float, group_size: int) -> float:
    """RankBuffer Eq. 9: r = -1 + 2q/(G-1) for zero-based position q; 0 for G = 1."""
    return -1.0 + 2.0 * position / (group_size - 1) if group_size > 1 else 0.0


def tie_block_rewards(blocks: Sequence[Sequence[int]], group_size: int) -> list[float]:
    """Rank rewards for tie blocks (worst -> best); a block shares the mean of its positions (Eq. 10)."""
    seen = sorted(i for block in blocks for i in block)
    if seen != list(range(group_size)):
        raise ValueError(f"Tie blocks {list(map(list, blocks))} do not cover indices 0..{group_size - 1} exactly once")
    rewards = [0.0] * group_size
    start = 0
    for block in blocks:
        mean_position = start + (len(block) - 1) / 2
        for i in block:
            rewards[i] = rank_reward(mean_position, group_size)
        start += len(block)
    return rewards


@dataclass(frozen=True)
class Group:
    """The G completions of one query; `references`: ranked reference responses, best first. Texts are made
    encodable (a lone surrogate becomes U+FFFD), so every text can be hashed, stored and sent to a judge."""

    query_id: str
    query: str
    rubrics: tuple[Rubric, ...]
    completions: tuple[str, ...]
    references: tuple[str, ...] | None = None

    def __post_init__(self):
        if not isinstance(self.query_id, str) or not self.query_id:
            raise ValueError(f"Group.query_id must be a non-empty string, got {self.query_id!r}")
        object.__setattr__(self, "rubrics", tuple(Rubric.coerce(r) for r in (self.rubrics or ())))
        if isinstance(self.completions, str):
            raise TypeError("Group.completions must be a list of strings, got a single string")
        object.__setattr__(self, "completions", tuple(encodable(c) for c in self.completions))
        if not self.completions:
            raise ValueError(f"Group {self.query_id!r} has no completions")
        object.__setattr__(self, "query", encodable(self.query))
        if self.references is not None:
            object.__setattr__(self, "references", tuple(encodable(r) for r in self.references))

    @property
    def size(self) -> int:
        return len(self.completions)

    def request(self, kind: type[R], *, step: int, **fields) -> R:
        """A judge request of type `kind` about this group's query (query, rubrics, query_id and step filled in)."""
        return kind(query=self.query, rubrics=self.rubrics, query_id=self.query_id, step=step, **fields)


@dataclass
class GroupResult:
    """One reward per completion; `order`: indices worst -> best; `details`: per-group numbers for logging.

    A neutral group (its judging failed) has every reward NaN, TRL's own "no reward": the same value reaches
    TRL, which leaves those completions out of the advantages."""

    rewards: list[float]
    order: list[int] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def neutral(self) -> bool:
        return bool(self.rewards) and all(math.isnan(r) for r in self.rewards)


@dataclass
class Candidates:
    """A group's unique valid answers (`answers[u]`), the completion indices of each (`members[u]`), and
    the indices without a valid answer (`invalid`)."""

    answers: list[str]
    members: list[list[int]]
    invalid: list[int]
    size: int

    @classmethod
    def from_group(cls, group: Group, answer_format: AnswerFormat) -> Candidates:
        members: dict[str, list[int]] = {}  # in order of first appearance
        invalid = []
        for i, completion in enumerate(group.completions):
            answer = answer_format.final_answer(completion)
            if answer is None:
                invalid.append(i)
            else:
                members.setdefault(answer, []).append(i)
        return cls(list(members), list(members.values()), invalid, group.size)


@dataclass
class RankOutcome:
    """Tie blocks over unique-answer indices, worst -> best. Invalid rollouts go below all."""

    blocks: list[list[int]]
    details: dict[str, Any] = field(default_factory=dict)

    def expand(self, c: Candidates) -> tuple[list[float], list[int]]:
        full = [list(c.invalid)] if c.invalid else []
        full += [[i for u in block for i in c.members[u]] for block in self.blocks]
        return tie_block_rewards(full, c.size), [i for block in full for i in block]


@dataclass
class ScoreOutcome:
    """One semantic reward per unique answer; invalid rollouts get `invalid_reward`."""

    values: list[float]
    invalid_reward: float
    details: dict[str, Any] = field(default_factory=dict)

    def expand(self, c: Candidates) -> tuple[list[float], list[int]]:
        rewards = [self.invalid_reward] * c.size
        for value, members in zip(self.values, c.members):
            for i in members:
                rewards[i] = float(value)
        return rewards, sorted(range(c.size), key=lambda i: rewards[i])


class GroupJudgingFailed(RuntimeError):
    """Raised by a method when a call it needs failed after retries: the group goes neutral."""

    def __init__(self, failure: JudgeFailure | str):
        super().__init__(failure.message if isinstance(failure, JudgeFailure) else str(failure))
        self.kind = failure.kind if isinstance(failure, JudgeFailure) else "error"


def require(verdicts: Sequence[Any]) -> list[Any]:
    """Return `verdicts` unchanged, or raise `GroupJudgingFailed` for the first failure."""
    for v in verdicts:
        if is_failure(v):
            raise GroupJudgingFailed(v)
    return list(verdicts)


@dataclass(frozen=True)
class RunContext:
    """What a training run gives a method beside its judge and options; each method takes the parts it uses
    (`for_run`). `seed` (TRL's) seeds the method's own random choices; `length_fn`: the policy's token count."""

    answer_format: AnswerFormat = field(default_factory=AnswerFormat)
    seed: int = 0
    output_dir: str | None = None
    length_fn: Callable[[str], int] | None = None


class GroupRewardMethod(abc.ABC):
    """Base of every group reward method. `options`: an `options_class` instance, or its fields as keywords
    (`lambda_fmt=0.2`), not both; `format_reward` replaces `answer_format.format_reward`."""

    #: short name used by `JudgeRewardGRPOTrainer` and the benchmark
    name: str = "base"
    #: the dataclass of this method's knobs and their defaults (the single source of both)
    options_class: type[MethodOptions] = MethodOptions
    #: BibTeX of the paper the method implements (the model card cites it; docs/references.md); None: no paper
    citation: str | None = None

    def __init__(
        self,
        judge: Judge,
        options: MethodOptions | None = None,
        *,
        answer_format: AnswerFormat | None = None,
        format_reward: Callable[[str], float] | None = None,
        seed: int = 0,
        **option_values: Any,
    ):
        if not hasattr(judge, "judge"):
            raise TypeError(f"judge must have an async `judge(request)` method, got {type(judge).__name__}")
        self.judge = judge
        if options is None:
            options = self.options_class.from_values(option_values, source=f"{type(self).__name__}(...)")
        elif option_values:
            raise TypeError(f"{type(self).__name__} takes options or option keywords {sorted(option_values)}, not both")
        elif not isinstance(options, self.options_class):
            raise TypeError(f"{type(self).__name__} needs {self.options_class.__name__}, got {type(options).__name__}")
        self.options = options
        self.lambda_fmt = float(self.options.lambda_fmt)
        self.answer_format = answer_format or AnswerFormat()
        self.format_reward = format_reward or self.answer_format.format_reward
        self.seed = seed

    @classmethod
    def for_run(cls, judge: Judge, options: MethodOptions, run: RunContext) -> GroupRewardMethod:
        """The method a trainer builds: `options` plus the parts of `run` it uses (override to take more)."""
        return cls(judge, options, answer_format=run.answer_format, seed=run.seed)

    @abc.abstractmethod
    async def score_group(
        self, group: Group, candidates: Candidates, *, epoch: int, step: int
    ) -> RankOutcome | ScoreOutcome:
        """Judge one group's unique valid answers. Raise `GroupJudgingFailed` on failure."""

    async def score(self, groups: Sequence[Group], *, epoch: int, step: int) -> list[GroupResult]:
        """Score all groups of a step concurrently; one `GroupResult` per group, same order."""
        return list(await asyncio.gather(*(self._score_one(g, epoch=epoch, step=step) for g in groups)))

    async def _score_one(self, group: Group, *, epoch: int, step: int) -> GroupResult:
        candidates = Candidates.from_group(group, self.answer_format)
        try:
            outcome = await self.score_group(group, candidates, epoch=epoch, step=step)
        except GroupJudgingFailed as exc:
            return GroupResult([math.nan] * group.size, details={"failure": str(exc), "failure_kind": exc.kind})
        rewards, order = outcome.expand(candidates)
        if self.lambda_fmt:
            rewards = [r + self.lambda_fmt * float(self.format_reward(c)) for r, c in zip(rewards, group.completions)]
        details = dict(outcome.details)
        details.setdefault("invalid", len(candidates.invalid))
        details.setdefault("duplicates", group.size - len(candidates.invalid) - len(candidates.answers))
        return GroupResult(rewards, order=order, details=details)

    def step_metrics(self, results: Sequence[GroupResult]) -> dict[str, float]:
        """Metrics for one step's results (merged into the trainer's logs). Extend in subclasses."""
        n = max(len(results), 1)
        return {
            "reward/neutral_groups": float(sum(r.neutral for r in results)),
            "reward/invalid_rollouts": float(sum(r.details.get("invalid", 0) for r in results)),
            "reward/duplicate_rollouts_mean": sum(r.details.get("duplicates", 0) for r in results) / n,
        }

    @property
    def judges(self) -> list[Judge]:
        """Every judge this method calls (their ledgers are logged)."""
        return [self.judge]

    def state_dict(self) -> dict[str, Any]:
        """Plain JSON-able state saved with every checkpoint (stateless methods: empty)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} is stateless but got state with keys {sorted(state)}")

    def query_state(self, query_ids: Sequence[str]) -> dict[str, Any]:
        """The state that scoring groups of `query_ids` reads and writes, picklable (stateless methods: empty).
        A judging worker (`trainers.judge_workers`) gets it with the groups and hands back its new value,
        which `merge_query_state` writes over those queries' state here."""
        return {}

    def merge_query_state(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} is stateless but got query state with keys {sorted(state)}")

    def summary(self) -> dict[str, float]:
        """A few numbers that describe the method's state at the end of a run (for the model card)."""
        return {}

    def save_state(self, directory: str) -> None:
        """Write everything needed to resume into a checkpoint folder (`reward_method_state.json`, atomic)."""
        write_method_state(os.path.join(directory, METHOD_STATE_NAME), self.name, self.state_dict())

    def load_state(self, directory: str) -> None:
        """Resume from a folder written by `save_state` (`CheckpointStateError` for a bad file)."""
        self.load_state_dict(read_method_state(os.path.join(directory, METHOD_STATE_NAME), self.name))

    @contextlib.contextmanager
    def frozen_state(self) -> Iterator[None]:
        """Score without keeping state changes (evaluation): on exit, also on an exception, the state is as
        before. This default round-trips `state_dict()`; a stateful method overrides it with something cheaper."""
        state = json.loads(json.dumps(self.state_dict()))
        try:
            yield
        finally:
            self.load_state_dict(state)
