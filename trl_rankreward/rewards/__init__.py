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

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what IDEs and type checkers see; at runtime `__getattr__` imports on first use
    from ..judging.requests import Rubric as Rubric
    from .answers import AnswerFormat as AnswerFormat
    from .arena import ArenaReward as ArenaReward
    from .base import Group as Group
    from .base import GroupJudgingFailed as GroupJudgingFailed
    from .base import GroupResult as GroupResult
    from .base import GroupRewardMethod as GroupRewardMethod
    from .genrm_reward import GenRMPairwiseReward as GenRMPairwiseReward
    from .listwise_group import ListwiseGroupReward as ListwiseGroupReward
    from .matrix_reward import MatrixReward as MatrixReward
    from .pairwise import PairwiseRankReward as PairwiseRankReward
    from .pairwise import PairwiseWinRateReward as PairwiseWinRateReward
    from .pairwise import ReferenceWinRateReward as ReferenceWinRateReward
    from .pointwise import GDPOReward as GDPOReward
    from .pointwise import PointwiseRubricReward as PointwiseRubricReward
    from .rank_buffer import RankBufferOptions as RankBufferOptions
    from .rank_buffer import RankBufferReward as RankBufferReward
    from .rank_buffer_plus import RankBufferPlusOptions as RankBufferPlusOptions
    from .rank_buffer_plus import RankBufferPlusReward as RankBufferPlusReward
    from .registry import REWARD_METHODS as REWARD_METHODS
    from .registry import make_reward_method as make_reward_method
    from .tournament import TournamentReward as TournamentReward

_EXPORTS = {
    "Rubric": "..judging.requests",
    "Group": ".base",
    "GroupResult": ".base",
    "GroupRewardMethod": ".base",
    "GroupJudgingFailed": ".base",
    "AnswerFormat": ".answers",
    "RankBufferReward": ".rank_buffer",
    "RankBufferOptions": ".rank_buffer",
    "RankBufferPlusReward": ".rank_buffer_plus",
    "RankBufferPlusOptions": ".rank_buffer_plus",
    "ListwiseGroupReward": ".listwise_group",
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
