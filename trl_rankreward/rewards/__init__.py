"""Group reward methods: pure algorithms over whole groups (no torch, no trl).

Vocabulary, used everywhere in this package:

- *group*: the G completions of one query (`Group`); *rubric*: a weighted query-specific criterion.
- *order*: completion indices from WORST to BEST (the papers' convention).
- *tie blocks*: an order whose places may hold several indices that share a rank.
- *position*: a coarse insertion index 0..K among K ordered anchors (0 = below all).
- *anchor*: a stored earlier response of the same query, used as a reference point.
- *neutral group*: a group whose required judge calls failed; its rewards are NaN (`GroupResult.neutral`).
"""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "..judging.requests": ("Rubric",),
        ".base": ("Group", "GroupResult", "GroupRewardMethod", "GroupJudgingFailed", "AnswerFormat"),
        ".rank_buffer": ("RankBufferReward", "RankBufferOptions", "ListwiseGroupReward"),
        ".rank_buffer_plus": ("RankBufferPlusReward", "RankBufferPlusOptions"),
        ".matrix_reward": ("MatrixReward",),
        ".pointwise": ("PointwiseRubricReward", "GDPOReward"),
        ".pairwise": (
            "PairwiseWinRateReward",
            "ReferenceWinRateReward",
            "PairwiseRankReward",
            "TournamentReward",
            "ArenaReward",
        ),
        ".genrm_reward": ("GenRMPairwiseReward",),
        ".registry": ("make_reward_method", "REWARD_METHODS"),
    },
)
