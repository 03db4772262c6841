"""Pointwise rubric baselines (RankBuffer App. E, MatrixReward App. D): one holistic score per answer, or
one score per rubric (GDPO); one judge round per group."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from ..judging.requests import Judge, JudgeFailure, PointwiseRequest, ask
from .base import Candidates, Group, GroupJudgingFailed, GroupRewardMethod, ScoreOutcome, require
from .options import DataNeeds, MethodOptions, option


async def judge_points(
    judge: Judge, group: Group, answers: Sequence[str], rubric_index: int | None, step: int
) -> list[float]:
    """0-10 scores of `answers` (holistic when `rubric_index` is None), judged concurrently;
    `GroupJudgingFailed` (invalid) for a verdict that is not a number in [0, 10]."""
    requests = [group.request(PointwiseRequest, step=step, response=a, rubric_index=rubric_index) for a in answers]
    verdicts = require(await asyncio.gather(*(ask(judge, r) for r in requests)))
    for v in verdicts:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 10.0:
            raise GroupJudgingFailed(
                JudgeFailure("invalid", f"Pointwise verdict must be a number in [0, 10], got {v!r}")
            )
    return [float(v) for v in verdicts]


@dataclass
class PointwiseOptions(MethodOptions):
    """`PointwiseRubricReward`'s options; each rollout is scored on its own, so G = 1 works."""

    def data_needs(self) -> DataNeeds:
        return DataNeeds(min_group_size=1)


@dataclass
class GDPOOptions(MethodOptions):
    eps: float = option(1e-4, "Added to each rubric's within-group std (GDPO: 1e-4).")

    def __post_init__(self):
        super().__post_init__()
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")

    def data_needs(self) -> DataNeeds:
        return DataNeeds(rubrics=True)


class PointwiseRubricReward(GroupRewardMethod):
    """One holistic 0-10 score s per unique answer under the weighted rubrics; r = 2s/10 - 1 (RankBuffer
    App. E), invalid rollouts -1. GRPO, Dr. GRPO, DAPO and GPG differ only in TRL's loss (docs/methods.md)."""

    name = "pointwise"
    options_class = PointwiseOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        scores = await judge_points(self.judge, group, candidates.answers, None, step)
        mean = fmean(scores) if scores else 0.0
        details = {"requests": len(scores), "rounds": 1 if scores else 0, "score_mean": mean}
        return ScoreOutcome([2.0 * s / 10.0 - 1.0 for s in scores], invalid_reward=-1.0, details=details)


class GDPOReward(GroupRewardMethod):
    """GDPO (Liu et al., 2026, arXiv:2601.05242; MatrixReward App. D, RankBuffer App. E).

    Each answer is scored on each rubric k (s_ik in 0..10), normalized over the G rollouts (duplicates with
    their multiplicity, invalid ones at s_ik = 0):
        z_ik = (s_ik - mean_k) / (std_k + eps),   std_k the sample (Bessel) std,
    r_i = sum_k w_k z_ik with w_k = weight_k / sum(weight). TRL's own GDPO weights fixed reward functions,
    which per-query rubrics are not; `scale_rewards="batch"` adds its batch normalization. Cost: K x U requests.
    """

    name = "gdpo"
    options_class = GDPOOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        if not group.rubrics:
            raise ValueError(f"GDPO needs rubrics, but group {group.query_id!r} has none; add a 'rubrics' column")
        per_rubric = await asyncio.gather(
            *(judge_points(self.judge, group, candidates.answers, k, step) for k in range(len(group.rubrics)))
        )
        total_weight = sum(r.weight for r in group.rubrics)
        counts = [len(m) for m in candidates.members] + [len(candidates.invalid)]
        n, values, invalid_value = sum(counts), [0.0] * len(candidates.answers), 0.0
        for rubric, scores in zip(group.rubrics, per_rubric, strict=True):
            # z-scores over the whole group of the unique answers' scores and of the invalid score 0
            population = list(zip(scores + [0.0], counts, strict=True))
            mean = sum(s * c for s, c in population) / n
            std = math.sqrt(sum(c * (s - mean) ** 2 for s, c in population) / (n - 1)) if n > 1 else 0.0
            z = [(s - mean) / (std + self.options.eps) for s, _ in population]
            w = rubric.weight / total_weight
            values = [v + w * x for v, x in zip(values, z)]  # z[-1]: the invalid score
            invalid_value += w * z[-1]
        requests = len(group.rubrics) * len(candidates.answers)
        return ScoreOutcome(
            values, invalid_reward=invalid_value, details={"requests": requests, "rounds": 1 if requests else 0}
        )
