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

Each valid answer is audited against the order it was displayed in (`display_audit`:
`rank/listwise_display_...`); `reshuffle_check` re-asks a seeded fraction of calls under
another shuffle (`rank/listwise_reshuffle_...`), off by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judging.requests import ListwiseRequest
from .base import Candidates, Group, GroupResult, GroupRewardMethod, RankOutcome, require
from .display_audit import DETAILS_KEY, RESHUFFLE_CHECK_HELP, ask_listwise, check_reshuffle, new_tally, tally_metrics
from .options import MethodOptions
from .verdicts import check_order


@dataclass
class ListwiseGroupOptions(MethodOptions):
    """`ListwiseGroupReward`'s options."""

    reshuffle_check: float = field(default=0.0, metadata={"help": RESHUFFLE_CHECK_HELP})

    def __post_init__(self):
        super().__post_init__()
        self.reshuffle_check = check_reshuffle(self.reshuffle_check)


class ListwiseGroupReward(GroupRewardMethod):
    """One `ListwiseRequest` over the group's unique valid answers; rank rewards (module docstring)."""

    name = "listwise_group"
    options_class = ListwiseGroupOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        answers = candidates.answers
        details: dict[str, Any] = {"requests": int(len(answers) >= 2), "rounds": int(len(answers) >= 2)}
        if len(answers) < 2:  # nothing to compare: no call
            return RankOutcome([[u] for u in range(len(answers))], details)
        request = group.request(ListwiseRequest, step=step, candidates=tuple(answers))
        details[DETAILS_KEY] = new_tally()
        tally, fraction = details[DETAILS_KEY], self.options.reshuffle_check
        (verdict,) = require([await ask_listwise(self.judge, request, tally, fraction)])
        return RankOutcome([[u] for u in check_order(verdict, len(answers))], details)

    def step_metrics(self, results: Sequence[GroupResult]) -> dict[str, float]:
        """Base metrics plus the display audit's `rank/listwise_...` metrics (module docstring)."""
        out = super().step_metrics(results)
        out.update(tally_metrics((r.details.get(DETAILS_KEY) for r in results), self.options.reshuffle_check))
        return out


__all__ = ["ListwiseGroupOptions", "ListwiseGroupReward"]
