"""`ListwiseGroupReward`: one listwise judge call ranks the whole group.

The judge sees all unique valid answers of a group at once, with the RankBuffer fine-ranking
prompt (`ListwiseRequest`, RankBuffer App. B.2, which also ranks the first group of
RankBuffer-Bootstrap), and returns them worst -> best. Rank rewards follow RankBuffer
Eq. 9-10 (base class): place q of G gives r = -1 + 2q / (G - 1), duplicates share a place,
invalid rollouts lie below every valid one. This is the shape of OpenPipe ART's RULER
(one LLM call scores a whole group of trajectories relative to each other); RULER asks for
scores, we ask for an order with the paper's template.

Cost per group: one `ListwiseRequest` over U unique valid answers (none when U < 2), one
sequential round. A failed or invalid call (not a permutation) makes the group neutral,
counted in `reward/neutral_groups` like every other method's failures.
"""

from __future__ import annotations

from typing import Any

from ..judging.protocol import ask
from ..judging.requests import ListwiseRequest
from .base import Candidates, Group, GroupRewardMethod, RankOutcome, require
from .verdicts import check_order


class ListwiseGroupReward(GroupRewardMethod):
    """One `ListwiseRequest` over the group's unique valid answers; rank rewards (RankBuffer Eq. 9).

    Args:
        judge: answers `ListwiseRequest`.
        lambda_fmt, answer_format, format_reward: as in `GroupRewardMethod`.
    """

    name = "listwise_group"

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        answers = candidates.answers
        details: dict[str, Any] = {"requests": int(len(answers) >= 2), "rounds": int(len(answers) >= 2)}
        if len(answers) < 2:  # nothing to compare: no call
            return RankOutcome([[u] for u in range(len(answers))], details)
        request = group.request(ListwiseRequest, step=step, candidates=tuple(answers))
        (verdict,) = require([await ask(self.judge, request)])
        return RankOutcome([[u] for u in check_order(verdict, len(answers))], details)


__all__ = ["ListwiseGroupReward"]
