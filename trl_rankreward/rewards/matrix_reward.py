"""MatrixReward: a reward from the rollout-by-rubric win-rate matrix (MatrixReward paper).

Per group: judge every pair of unique answers under each rubric (Sec. 3.1), fill the win-rate matrix M, derive
rubric weights from M and fuse them with the rubrics' prior weights (Sec. 3.2), and reward each answer by its
closeness to the ideal profiles (Sec. 3.3); the math is `matrix_math`'s. Choices the paper leaves open:

- Duplicates: M is built over the U unique answers with 1/(U-1) normalization (an answer against its own copy
  would be a free tie pulling win rates toward 1/2); every copy gets its answer's reward.
- Invalid rollouts are never judged and get quality reward 0; what separates them from a worst judged answer
  (also 0, the negative ideal) is the format term lambda_fmt * f_i of Eq. 8.
- Fewer than two unique answers: no judge call; each gets 1/2, the closeness when both distances vanish.
- "pointwise" protocol (Sec. 4.2): M_ik = s_ik / 10, s_ik the 0-10 `PointwiseRequest(rubric_index=k)` score (the
  paper says only "independent absolute scores per rollout and rubric").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, fields
from statistics import fmean
from typing import Any

import numpy as np

from ..judging.requests import JudgeFailure, RubricPairwiseRequest, ask_pair, is_failure
from .base import Candidates, Group, GroupResult, GroupRewardMethod, ScoreOutcome, require
from .matrix_math import (
    AGGREGATIONS,
    DISTANCES,
    FUSIONS,
    IDEALS,
    MATRIX_WEIGHTINGS,
    check_reward_options,
    matrix_reward,
    pair_indices,
    win_rate_matrix,
)
from .options import DataNeeds, MethodOptions, option
from .pointwise import judge_points


@dataclass
class MatrixRewardOptions(MethodOptions):
    """MatrixReward's options: the defaults are the paper's method (Sec. 3), the other choices its ablations
    (Sec. 4.2-4.5, App. F). An option the chosen setting would ignore is rejected."""

    lambda_fmt: float = option(
        1.0,
        "Weight of the format reward in r = r_qual + lambda_fmt * f (Eq. 8); 1.0 is the value of the "
        "paper's worked example (App. E).",
    )
    protocol: str = option(
        "explicit",
        "'explicit': one judge request per pair and rubric, K*C(G,2) per group (Sec. 3.1); 'implicit': "
        "all K verdicts in one request per pair, C(G,2) per group; 'pointwise': K*G independent 0-10 scores, "
        "M = score/10 (the 'pointwise + MatrixReward' variant, Sec. 4.2).",
        choices=["explicit", "implicit", "pointwise"],
    )
    both_orders: bool = option(
        False,
        "Judge every pair in both display orders and average the aligned outcomes (doubles the "
        "requests; pairwise protocols only).",
    )
    matrix_weighting: str = option(
        "variation_correlation",
        "How the rubric weights a are read from the win-rate matrix: 'variation_correlation' (a rubric "
        "that separates the rollouts and agrees least with the others weighs most: the CRITIC method, Eq. 3), "
        "'entropy' or 'svd' (Sec. 4.3, App. F).",
        choices=list(MATRIX_WEIGHTINGS),
    )
    fusion: str = option(
        "game",
        "Combining matrix weights a with the rubric prior p: 'game' (Eq. 4-5), 'prior_only' (w = p), "
        "'additive' (w = (1 - mixture_alpha) p + mixture_alpha a) or 'multiplicative' (w ~ a p) (Sec. 4.5).",
        choices=list(FUSIONS),
    )
    mixture_alpha: float = option(
        0.5, "Coefficient of fusion='additive', in [0, 1] (the paper tries 0.1 to 0.5, Table 4)."
    )
    ideals: str = option(
        "observed",
        "TOPSIS ideals: 'observed' column max/min (Sec. 3.3) or 'theoretical' weighted upper bound "
        "and zero (Sec. 4.4).",
        choices=list(IDEALS),
    )
    distance: str = option(
        "euclidean", "TOPSIS distance: 'euclidean' (Eq. 7) or 'mahalanobis' (Sec. 4.4).", choices=list(DISTANCES)
    )
    aggregation: str = option(
        "topsis",
        "'topsis' closeness (Eq. 7) or 'weighted_sum' of the win rates (Sec. 4.4).",
        choices=list(AGGREGATIONS),
    )
    svd_variance: float = option(0.85, "Variance share kept by matrix_weighting='svd', in (0, 1] (App. F: 0.85).")

    def __post_init__(self):
        super().__post_init__()
        check_reward_options(**self.math_options())  # the ranges, as `matrix_reward` checks them
        if self.both_orders and self.protocol == "pointwise":
            raise ValueError(
                "both_orders=True judges pairs in both display orders, but protocol='pointwise' shows one answer per "
                "request; use protocol='explicit' or 'implicit', or set both_orders=False"
            )
        default = {f.name: f.default for f in fields(MatrixRewardOptions)}
        ignored = (
            ("mixture_alpha", "fusion", self.fusion != "additive", "fusion='additive'"),
            ("svd_variance", "matrix_weighting", self.matrix_weighting != "svd", "matrix_weighting='svd'"),
            ("matrix_weighting", "fusion", self.fusion == "prior_only", "a fusion other than 'prior_only' (w = p)"),
            ("ideals", "aggregation", self.aggregation != "topsis", "aggregation='topsis'"),
            ("distance", "aggregation", self.aggregation != "topsis", "aggregation='topsis'"),
        )
        for name, by, unused, needs in ignored:
            value = getattr(self, name)
            if unused and value != default[name]:
                raise ValueError(
                    f"{name}={value!r} has no effect with {by}={getattr(self, by)!r}; it needs {needs}. Set "
                    f"{by} accordingly or leave {name} at its default {default[name]!r}"
                )

    def math_options(self) -> dict[str, Any]:
        """The options `matrix_math.matrix_reward` takes (all but protocol, both_orders and lambda_fmt)."""
        names = ("matrix_weighting", "fusion", "mixture_alpha", "ideals", "distance", "aggregation", "svd_variance")
        return {name: getattr(self, name) for name in names}

    def data_needs(self) -> DataNeeds:
        return DataNeeds(rubrics=True)


class MatrixReward(GroupRewardMethod):
    """MatrixReward (MatrixReward paper, Algorithm 1): r = r^qual in [0, 1] + lambda_fmt * f (Eq. 8).
    Per-group `details`: alpha, beta, fallback, weights w, matrix_weights a, prior p, column_spread."""

    name = "matrix"
    citation = """@misc{shen2026matrixreward,
    title  = {{MatrixReward: Reward from Rubric Matrix for Open-Ended Generation}},
    author = {Zihan Shen and Qi Liu and Zixuan Yang and Yiqun Chen and Chenglong Zhao and Xiaozhao Wang and Lei He},
    year   = 2026,
    eprint = {arXiv:2610.00389},
}"""
    options_class = MatrixRewardOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        if not group.rubrics:
            raise ValueError(f"MatrixReward needs rubrics, but group {group.query_id!r} has none")
        answers, K = candidates.answers, len(group.rubrics)
        details: dict[str, Any] = {"unique_answers": len(answers)}
        if len(answers) < 2:  # nothing to compare: 1/2 each (module docstring); invalid rollouts get 0
            return ScoreOutcome([0.5] * len(answers), 0.0, details)
        if self.options.protocol == "pointwise":  # K * U independent 0-10 scores; M_ik = s_ik / 10
            per_rubric = await asyncio.gather(*(judge_points(self.judge, group, answers, k, step) for k in range(K)))
            M = np.asarray(per_rubric, dtype=float).T / 10.0
        else:  # explicit: one request per (pair, rubric); implicit: one per pair. Pairs i < j, row-major
            rubric_indices: Sequence[int | None] = range(K) if self.options.protocol == "explicit" else [None]
            requests = [
                group.request(RubricPairwiseRequest, step=step, a=answers[i], b=answers[j], rubric_index=k)
                for i, j in zip(*pair_indices(len(answers)), strict=True)
                for k in rubric_indices
            ]
            scores = require(await asyncio.gather(*(self._compare(r) for r in requests)))
            M = win_rate_matrix(np.asarray(scores, dtype=float).reshape(-1, K), len(answers), K)
        result = matrix_reward(M, [r.weight for r in group.rubrics], **self.options.math_options())
        details.update(alpha=result.alpha, beta=result.beta, fallback=result.fallback)
        details.update(
            {k: getattr(result, k).tolist() for k in ("weights", "matrix_weights", "prior", "column_spread")}
        )
        return ScoreOutcome(result.rewards.tolist(), 0.0, details)

    async def _compare(self, request: RubricPairwiseRequest) -> list[float] | JudgeFailure:
        """Scores of `request.a` per judged rubric, or a failure (a malformed verdict is an invalid answer)."""
        try:
            scores = await ask_pair(self.judge, request, both_orders=self.options.both_orders)
        except (TypeError, ValueError) as exc:
            return JudgeFailure("invalid", f"malformed rubric-pairwise verdict: {exc}")
        expected = len(request.judged_rubrics)
        if not is_failure(scores) and (not isinstance(scores, list) or len(scores) != expected):
            return JudgeFailure(
                "invalid", f"rubric-pairwise verdict should hold {expected} winner(s), one per judged rubric"
            )
        return scores

    def step_metrics(self, results: Sequence[GroupResult]) -> dict[str, float]:
        """Adds the `matrix/...` metrics over groups with a matrix. Rubrics vary by query, so weights are
        summarized by their largest, smallest and distance from the prior, never by a per-index mean."""
        metrics = super().step_metrics(results)
        scored = [r.details for r in results if not r.neutral and "weights" in r.details]
        metrics["matrix/fallbacks"] = float(sum(d["fallback"] for d in scored))
        if not scored:
            return metrics
        with_coefficients = [d for d in scored if d["alpha"] is not None]
        if with_coefficients:
            metrics["matrix/alpha"] = fmean(d["alpha"] for d in with_coefficients)
            metrics["matrix/beta"] = fmean(d["beta"] for d in with_coefficients)
        metrics["matrix/weight_max"] = fmean(max(d["weights"]) for d in scored)
        metrics["matrix/weight_min"] = fmean(min(d["weights"]) for d in scored)
        metrics["matrix/weight_prior_shift"] = fmean(
            0.5 * sum(abs(w - p) for w, p in zip(d["weights"], d["prior"], strict=True)) for d in scored
        )
        metrics["matrix/column_spread"] = fmean(fmean(d["column_spread"]) for d in scored)
        return metrics
