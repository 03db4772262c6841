"""ArenaRL: anchor comparisons with a seed response, then a seeded single-elimination tournament.

ArenaRL (Zhang et al., 2026, arXiv:2601.06487) as implemented in RankBuffer App. E: "uses
the first rollout as a deterministic seed response, compares each sampled rollout against
that seed, and then runs a seeded single-elimination tournament. Each logical match is
judged in both candidate orders. A group of eight therefore requires 14 logical matches
and 28 successful judge requests." (MatrixReward App. D instead runs a both-order round
robin; that variant is `PairwiseRankReward(both_orders=True)` up to its rank mapping.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby

from ..judging.seeding import seeded_rng
from .base import Candidates, Group, GroupRewardMethod, RankOutcome
from .options import MethodOptions
from .pair_judging import BOTH_ORDERS_HELP, judge_pairs, match_player, requests_per_match, single_elimination


@dataclass
class ArenaOptions(MethodOptions):
    """`ArenaReward`'s options (see its docstring)."""

    both_orders: bool = field(default=True, metadata={"help": BOTH_ORDERS_HELP + " On: the paper's setting."})


class ArenaReward(GroupRewardMethod):
    """Rank rewards from a seed-comparison round and a bracket seeded by its results.

    1. Seed round: the first valid rollout's answer is the seed; every other unique answer
       u is judged against it, giving its anchor score a_u in [0, 1] (the seed's own is 1/2).
    2. Tournament: answers are seeded by decreasing a_u (equal scores in a random order from
       the method's seed, the run's), placed in a standard bracket (seed 1 meets seed 2 only in
       the final; the best seeds get the byes when U is not a power of two) and play a knockout.
       A tied match is won by the higher-seeded answer.
    3. Order: by rounds survived in the tournament (champion best), then by anchor score;
       answers equal on both share a place. Rewards are the package's rank rewards over
       that order (RankBuffer Eq. 9, in [-1, 1], tie blocks share their mean position);
       invalid rollouts rank below every valid one.

    Judge cost per group: 2 (U - 1) logical matches for U unique valid answers, each judged
    in both display orders by default: 4 (U - 1) `PairwiseRequest`s (14 matches, 28 requests
    for G = 8). Sequential judge rounds: 1 + ceil(log2 U) (4 for G = 8).
    """

    name = "arena"
    options_class = ArenaOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        both_orders = self.options.both_orders
        answers = candidates.answers
        n = len(answers)
        vs_seed = await judge_pairs(
            self.judge, group, [(answers[u], answers[0]) for u in range(1, n)], step=step, both_orders=both_orders
        )
        anchor = [0.5] + vs_seed if n else []
        rng = seeded_rng(self.seed, self.name, group.query_id, step)
        jitter = [rng.random() for _ in range(n)]
        ranked = sorted(range(n), key=lambda u: (-anchor[u], jitter[u]))
        place = {u: k for k, u in enumerate(ranked)}
        play = match_player(self.judge, group, answers, step=step, both_orders=both_orders)
        bracket = await single_elimination(ranked, play, lambda a, b: a if place[a] < place[b] else b)

        def key(u: int) -> tuple[int, float]:
            return bracket.survived[u], anchor[u]

        blocks = [list(block) for _, block in groupby(sorted(range(n), key=key), key=key)]
        matches = (n - 1 if n else 0) + bracket.matches
        details = {
            "requests": matches * requests_per_match(both_orders),
            "matches": matches,
            "rounds": (1 if n > 1 else 0) + bracket.rounds,
            "anchor_scores": anchor,
        }
        return RankOutcome(blocks, details=details)
