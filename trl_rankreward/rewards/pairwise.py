"""Exhaustive pairwise baselines: RRC-SCR, RRC-AGR and Pairwise Rank.

RRC (Wang et al., 2026, arXiv:2608.06310) as specified in RankBuffer App. E and MatrixReward
App. D; Pairwise Rank as specified in RankBuffer App. E. Every comparison of a group is
independent, so each method makes one sequential judge round per group.

Reward scale of RRC-SCR and RRC-AGR: the win rate itself, in [0, 1] (MatrixReward App. D:
"RRC-SCR uses that rate as the scalar reward"); invalid rollouts get 0, the rate of a
response that loses every comparison. GRPO's group normalization makes the scale matter
only relative to `lambda_fmt` and under `scale_rewards="none"`.

Duplicated answers are judged once: requests count unique valid answers U, not G.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import Candidates, Group, GroupRewardMethod, ScoreOutcome
from .options import DataNeeds, MethodOptions
from .pair_judging import BOTH_ORDERS_HELP, all_pairs, judge_pairs, requests_per_match, shared_ranks, win_rates


@dataclass
class PairwiseOptions(MethodOptions):
    """Options of the pairwise methods: RRC-SCR's and RRC-AGR's (Pairwise Rank adds `ties`)."""

    both_orders: bool = field(default=False, metadata={"help": BOTH_ORDERS_HELP})


@dataclass
class PairwiseRankOptions(PairwiseOptions):
    """`PairwiseRankReward`'s options."""

    ties: str = field(
        default="min",
        metadata={
            "help": "Equal win rates share 'min', the first rank they occupy (RankBuffer App. E), or 'average', "
            "their mean rank (MatrixReward App. D).",
            "choices": ["min", "average"],
        },
    )


@dataclass
class ReferenceWinRateOptions(PairwiseOptions):
    """`ReferenceWinRateReward`'s options; it needs each query's references and scores rollouts one by one."""

    def data_needs(self) -> DataNeeds:
        return DataNeeds(references=1, min_group_size=1)


class _AllPairsMethod(GroupRewardMethod):
    """Judges every unordered pair of unique valid answers once (C(U, 2) logical comparisons); options:
    `PairwiseOptions`."""

    options_class = PairwiseOptions

    async def _group_win_rates(self, group: Group, candidates: Candidates, step: int) -> tuple[list[float], dict]:
        both_orders = self.options.both_orders
        pairs = all_pairs(len(candidates.answers))
        texts = [(candidates.answers[u], candidates.answers[v]) for u, v in pairs]
        scores = await judge_pairs(self.judge, group, texts, step=step, both_orders=both_orders)
        rates = win_rates(pairs, scores, [len(m) for m in candidates.members])
        details = {"requests": len(pairs) * requests_per_match(both_orders), "rounds": 1 if pairs else 0}
        return rates, details


class PairwiseWinRateReward(_AllPairsMethod):
    """RRC-SCR: every unordered pair judged holistically; reward = opponent-averaged win rate.

    A win counts 1, a tie 1/2, a loss 0, averaged over the n - 1 other valid rollouts
    (`pair_judging.win_rates`; duplicates of an answer tie with it). Reward in [0, 1];
    invalid rollouts 0.

    Judge cost per group: C(U, 2) `PairwiseRequest`s for U unique valid answers (28 for
    G = 8; twice that with `both_orders`), one sequential round.
    """

    name = "rrc_scr"

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        rates, details = await self._group_win_rates(group, candidates, step)
        return ScoreOutcome(rates, invalid_reward=0.0, details=details)


class PairwiseRankReward(_AllPairsMethod):
    """Pairwise Rank: exhaustive pairs, ranked by win rate, rank mapped to [-1, 1].

    RankBuffer App. E: every unordered pair of non-empty responses is judged; responses are
    ranked by decreasing win rate; equal rates share the first rank they occupy (1, 1, 3).
    Rank s (1 = best) among n valid responses gives r = 2(n - s)/(n - 1) - 1, and 0 for n = 1.
    Empty or invalid responses lose automatically (that adds the same wins to every valid
    response, so it does not change their ranks) and get -1. `ties="average"` gives the
    averaged ranks of MatrixReward App. D instead.

    Judge cost per group: C(U, 2) `PairwiseRequest`s (28 for G = 8), one sequential round.
    """

    name = "pairwise_rank"
    options_class = PairwiseRankOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        rates, details = await self._group_win_rates(group, candidates, step)
        multiplicities = [len(m) for m in candidates.members]
        n = sum(multiplicities)
        ranks = shared_ranks(rates, multiplicities, ties=self.options.ties)
        values = [2.0 * (n - s) / (n - 1) - 1.0 if n > 1 else 0.0 for s in ranks]
        return ScoreOutcome(values, invalid_reward=-1.0, details={**details, "win_rates": rates})


class ReferenceWinRateReward(GroupRewardMethod):
    """RRC-AGR: each answer against each of the query's reference responses; reward = win rate.

    RankBuffer App. E: each rollout is compared with the query's fixed reference responses
    (the seven Nectar answers), an adaptation of RRC's reference-policy anchors. The
    references' ranks are never shown: each request holds one answer and one reference.
    Reward in [0, 1] (a tie counts 1/2); invalid rollouts 0.

    Judge cost per group: U x R `PairwiseRequest`s for U unique valid answers and R
    references (56 for G = 8 and the seven Nectar answers; twice that with `both_orders`),
    one sequential round.
    """

    name = "rrc_agr"
    options_class = ReferenceWinRateOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        refs = group.references or ()
        if not refs:
            raise ValueError(
                f"RRC-AGR compares rollouts with reference responses, but group {group.query_id!r} has none; "
                "add a 'references' column (e.g. Nectar answers) to the dataset"
            )
        texts = [(a, ref) for a in candidates.answers for ref in refs]
        both_orders = self.options.both_orders
        scores = await judge_pairs(self.judge, group, texts, step=step, both_orders=both_orders)
        rates = [sum(scores[u * len(refs) : (u + 1) * len(refs)]) / len(refs) for u in range(len(candidates.answers))]
        requests = len(texts) * requests_per_match(both_orders)
        return ScoreOutcome(rates, invalid_reward=0.0, details={"requests": requests, "rounds": 1 if texts else 0})
