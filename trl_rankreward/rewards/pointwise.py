"""Pointwise rubric baselines: one holistic score per answer, or one score per rubric (GDPO).

RankBuffer App. E (pointwise reward methods) and MatrixReward App. D (GRPO, Dr. GRPO, DAPO,
GDPO). Both methods send one sequential judge round per group.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import fmean

from ..judging.requests import Judge, JudgeFailure, PointwiseRequest, ask
from .base import Candidates, Group, GroupJudgingFailed, GroupRewardMethod, ScoreOutcome, require
from .options import DataNeeds, MethodOptions


async def judge_points(
    judge: Judge, group: Group, answers: Sequence[str], rubric_index: int | None, step: int
) -> list[float]:
    """0-10 scores of `answers` (holistic when `rubric_index` is None), judged concurrently."""
    requests = [group.request(PointwiseRequest, step=step, response=a, rubric_index=rubric_index) for a in answers]
    return check_points(require(await asyncio.gather(*(ask(judge, r) for r in requests))))


def check_points(verdicts: Sequence) -> list[float]:
    """Pointwise verdicts as floats; `GroupJudgingFailed` (invalid) for any that is not a number in [0, 10]."""
    for v in verdicts:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 10.0:
            raise GroupJudgingFailed(
                JudgeFailure("invalid", f"Pointwise verdict must be a number in [0, 10], got {v!r}")
            )
    return [float(v) for v in verdicts]


@dataclass
class PointwiseOptions(MethodOptions):
    """`PointwiseRubricReward`'s options: only `lambda_fmt`; each rollout is scored on its own, so G = 1 works."""

    def data_needs(self) -> DataNeeds:
        return DataNeeds(min_group_size=1)


@dataclass
class GDPOOptions(MethodOptions):
    """`GDPOReward`'s options; it judges per rubric and normalizes within the group."""

    eps: float = field(default=1e-4, metadata={"help": "Added to each rubric's within-group std (GDPO: 1e-4)."})

    def __post_init__(self):
        super().__post_init__()
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")

    def data_needs(self) -> DataNeeds:
        return DataNeeds(rubrics=True)


class PointwiseRubricReward(GroupRewardMethod):
    """One holistic 0-10 score per answer under the weighted rubrics; reward r = 2s/10 - 1.

    RankBuffer App. E: "each valid rollout is independently scored once by the judge on a
    0-10 scale using the query-specific weighted rubrics. The score s is mapped to 2s/10-1
    before adding the format reward." Invalid rollouts (no final answer) are not judged
    and get -1 (the score 0).

    Judge cost per group: one `PointwiseRequest` per unique valid answer (G without
    duplicates or invalid rollouts; identical answers are judged once), one sequential round.

    The papers' pointwise baselines (GRPO, Dr. GRPO, DAPO, GPG) differ only in the policy loss, which
    TRL has: docs/methods.md lists the `JudgeRewardGRPOConfig` settings of each.
    """

    name = "pointwise"
    options_class = PointwiseOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        scores = await judge_points(self.judge, group, candidates.answers, None, step)
        mean = fmean(scores) if scores else 0.0
        details = {"requests": len(scores), "rounds": 1 if scores else 0, "score_mean": mean}
        return ScoreOutcome([2.0 * s / 10.0 - 1.0 for s in scores], invalid_reward=-1.0, details=details)


class GDPOReward(GroupRewardMethod):
    """GDPO: one pointwise score per rubric, each rubric normalized within the group, then summed.

    GDPO (Liu et al., 2026, arXiv:2601.05242) as adapted in MatrixReward App. D and
    RankBuffer App. E: the judge scores every answer on each rubric k separately (s_ik in
    0..10); each rubric dimension is normalized within the G rollouts of the group,
        z_ik = (s_ik - mean_k) / (std_k + eps),   std_k the sample (Bessel) std, eps = 1e-4,
    and the reward is the rubric-weighted sum r_i = sum_k w_k z_ik with w_k = weight_k / sum(weight).
    Normalization runs over all G rollouts: duplicates count with their multiplicity, invalid
    rollouts take s_ik = 0 on every rubric (the pointwise methods' -1). A rubric on which all
    rollouts tie contributes 0.

    TRL's GDPO (`multi_objective_aggregation="normalize_then_sum"`) weights fixed reward functions with one
    global vector, which query-specific rubrics are not (docs/methods.md); so this method normalizes and
    weights per rubric, and `scale_rewards="batch"` adds GDPO's batch-level normalization of the sum.

    Judge cost per group: K `PointwiseRequest`s per unique valid answer (G x K without
    duplicates or invalid rollouts), all in one sequential round.
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
        values = [0.0] * len(candidates.answers)
        invalid_value = 0.0
        for rubric, scores in zip(group.rubrics, per_rubric, strict=True):
            z, z_invalid = self._normalize(scores, [len(m) for m in candidates.members], len(candidates.invalid))
            w = rubric.weight / total_weight
            values = [v + w * x for v, x in zip(values, z, strict=True)]
            invalid_value += w * z_invalid
        requests = len(group.rubrics) * len(candidates.answers)
        return ScoreOutcome(
            values, invalid_reward=invalid_value, details={"requests": requests, "rounds": 1 if requests else 0}
        )

    def _normalize(self, scores: list[float], counts: list[int], invalid: int) -> tuple[list[float], float]:
        """z-scores of unique answers' scores and of the invalid score 0, over the whole group."""
        eps = self.options.eps
        population = [(s, c) for s, c in zip(scores, counts, strict=True)] + [(0.0, invalid)]
        n = sum(c for _, c in population)
        mean = sum(s * c for s, c in population) / n
        std = math.sqrt(sum(c * (s - mean) ** 2 for s, c in population) / (n - 1)) if n > 1 else 0.0
        return [(s - mean) / (std + eps) for s in scores], (0.0 - mean) / (std + eps)
