"""Tournament-GRPO: repeated, independently shuffled single-elimination brackets.

Tournament-GRPO (Yang et al., 2026, arXiv:2605.26958) as specified in RankBuffer App. E
("three independently shuffled binary tournaments for each group of eight rollouts,
requiring 21 logical comparisons") and MatrixReward App. D ("advances judged winners,
accumulates tournament scores, and normalizes the resulting group rewards").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..judging.seeding import seeded_rng
from .base import Candidates, Group, GroupRewardMethod, ScoreOutcome
from .options import MethodOptions, check_int
from .pair_judging import BOTH_ORDERS_HELP, match_player, requests_per_match, single_elimination


@dataclass
class TournamentOptions(MethodOptions):
    """`TournamentReward`'s options (see its docstring)."""

    brackets: int = field(
        default=3,
        metadata={"help": "Independently shuffled single-elimination brackets per group (RankBuffer App. E uses 3)."},
    )
    both_orders: bool = field(default=False, metadata={"help": BOTH_ORDERS_HELP})

    def __post_init__(self):
        super().__post_init__()
        check_int("TournamentReward brackets", self.brackets, 1)


class TournamentReward(GroupRewardMethod):
    """Rewards from wins accumulated over `brackets` shuffled single-elimination brackets.

    Each bracket shuffles the U unique valid answers with a seeded RNG (`judging.seeding`,
    keyed by the method's seed (the run's), query id, step and bracket number) and plays a knockout. A match scores
    1 for a win, 1/2 each for a tie (the advancing side is then a seeded coin flip), 0 for a
    loss. With U not a power of two, the first P - U shuffled entrants (P the next power of
    two) get a first-round bye: they advance without a match and without a win.
    Accumulated score w over B brackets of R = ceil(log2 U) rounds maps to
        r = 2 w / (B R) - 1  in [-1, 1]     (r = 0 when U = 1),
    so winning every match of every bracket gives 1. Invalid rollouts get -1.

    Judge cost per group: B (U - 1) `PairwiseRequest`s (21 for G = 8 and B = 3; twice that
    with `both_orders`). Brackets run concurrently, rounds within a bracket sequentially:
    R = ceil(log2 U) sequential judge rounds (3 for G = 8).
    """

    name = "tournament"
    options_class = TournamentOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        brackets, both_orders = self.options.brackets, self.options.both_orders
        play = match_player(self.judge, group, candidates.answers, step=step, both_orders=both_orders)
        results = await asyncio.gather(
            *(self._bracket(group, len(candidates.answers), step, b, play) for b in range(brackets))
        )
        rounds = max(r.rounds for r in results)
        matches = sum(r.matches for r in results)
        wins = [sum(r.score[u] for r in results) for u in range(len(candidates.answers))]
        top = brackets * rounds
        values = [2.0 * w / top - 1.0 if top else 0.0 for w in wins]
        details = {
            "requests": matches * requests_per_match(both_orders),
            "matches": matches,
            "rounds": rounds,
            "wins": wins,
        }
        return ScoreOutcome(values, invalid_reward=-1.0, details=details)

    async def _bracket(self, group: Group, n: int, step: int, bracket: int, play):
        rng = seeded_rng(self.seed, self.name, group.query_id, step, bracket)
        entrants = list(range(n))
        rng.shuffle(entrants)
        return await single_elimination(entrants, play, lambda a, b: a if rng.random() < 0.5 else b)
