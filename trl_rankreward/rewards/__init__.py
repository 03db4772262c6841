"""Group reward methods: pure algorithms over whole groups (no torch, no trl).

Vocabulary, used everywhere in this package:

- *group*: the G completions of one query (`Group`), judged together.
- *rubric*: a query-specific criterion with an importance weight (`Rubric`).
- *order*: completion indices from WORST to BEST (the papers' convention).
- *tie blocks*: an order whose places may hold several indices that share a rank.
- *position*: a coarse insertion index 0..K among K ordered anchors (0 = below all).
- *anchor*: a stored earlier response of the same query, used as a reference point.
- *neutral group*: a group whose required judge calls failed; every reward is 0.

Every method implements `async score(groups, *, epoch, step) -> list[GroupResult]`.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "Rubric": "..judging.requests",
    "Group": ".base",
    "GroupResult": ".base",
    "GroupRewardMethod": ".base",
    "GroupJudgingFailed": ".base",
    "AnswerFormat": ".answers",
    "RankBufferReward": ".rank_buffer",
    "MatrixReward": ".matrix_reward",
    "PointwiseRubricReward": ".pointwise",
    "GDPOReward": ".pointwise",
    "PairwiseWinRateReward": ".pairwise",
    "ReferenceWinRateReward": ".pairwise",
    "PairwiseRankReward": ".pairwise",
    "TournamentReward": ".tournament",
    "ArenaReward": ".arena",
    "GenRMPairwiseReward": ".genrm_reward",
    "make_reward_method": ".registry",
    "REWARD_METHODS": ".registry",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
