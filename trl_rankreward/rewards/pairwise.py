"""The pairwise baselines: methods whose judge compares two texts at a time.

- Exhaustive pairs, one judge round: RRC-SCR (`PairwiseWinRateReward`), RRC-AGR against the references
  (`ReferenceWinRateReward`) and Pairwise Rank (`PairwiseRankReward`). RRC (Wang et al., 2026, arXiv:2608.06310)
  as specified in RankBuffer App. E and MatrixReward App. D; Pairwise Rank as specified in RankBuffer App. E.
- Knockout brackets: Tournament-GRPO (`TournamentReward`) and ArenaRL (`ArenaReward`).

The judge picks each request's display order (`display="auto"`); with `both_orders` a comparison is two requests,
one per display order (`judging.requests.ask_pair`). RRC-SCR and RRC-AGR reward the win rate itself, in [0, 1]
(MatrixReward App. D); invalid rollouts get 0. Requests count unique valid answers U, not G.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from ..judging.requests import Judge, PairwiseRequest, ask_pair, seeded_rng
from .base import Candidates, Group, GroupRewardMethod, RankOutcome, ScoreOutcome, require
from .options import DataNeeds, MethodOptions, check_int, option

#: the help of the pairwise methods' `both_orders` option
BOTH_ORDERS_HELP = "Judge each comparison in both display orders and average (2 requests per comparison)."
#: a knockout's `play(matches)`: the first entrant's score in [0, 1] for each match, judged concurrently
Play = Callable[[list[tuple[int, int]]], Awaitable[list[float]]]


def all_pairs(n: int) -> list[tuple[int, int]]:
    """Every unordered pair (i, j), i < j, of `range(n)`: C(n, 2) pairs."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


async def judge_pairs(
    judge: Judge, group: Group, pairs: Sequence[tuple[str, str]], *, step: int, both_orders: bool = False
) -> list[float]:
    """Score of `a` against `b` for each text pair, judged concurrently (`GroupJudgingFailed` on a failure)."""
    requests = [group.request(PairwiseRequest, step=step, a=a, b=b) for a, b in pairs]
    outcomes = await asyncio.gather(*(ask_pair(judge, r, both_orders=both_orders) for r in requests))
    return [float(s) for s in require(outcomes)]


def win_rates(pairs: Sequence[tuple[int, int]], scores: Sequence[float], multiplicities: Sequence[int]) -> list[float]:
    """Opponent-averaged win rate of each unique answer; its m_u copies meet each other as ties:
        rate_u = (sum_v m_v s(u, v) + (m_u - 1) / 2) / (n - 1),  n = sum_u m_u,
    1/2 when n = 1."""
    n = sum(multiplicities)
    if n <= 1:
        return [0.5] * len(multiplicities)
    totals = [(m - 1) * 0.5 for m in multiplicities]
    for (u, v), s in zip(pairs, scores, strict=True):
        totals[u] += multiplicities[v] * s
        totals[v] += multiplicities[u] * (1.0 - s)
    return [t / (n - 1) for t in totals]


def shared_ranks(
    values: Sequence[float], multiplicities: Sequence[int] | None = None, *, ties: str = "min"
) -> list[float]:
    """Rank 1 = highest value; equal values share the first place they occupy (`ties="min"`: 1, 1, 3) or
    its mean (`"average"`: 1.5, 1.5, 3). An entry with multiplicity m occupies m places."""
    mult = list(multiplicities or [1] * len(values))
    ranks = []
    for v in values:
        first = 1 + sum(m for w, m in zip(values, mult, strict=True) if w > v)
        tied = sum(m for w, m in zip(values, mult, strict=True) if w == v)
        ranks.append(float(first) if ties == "min" else first + (tied - 1) / 2)
    return ranks


@dataclass
class BracketResult:
    """One knockout bracket: `score[e]` (won match 1, tie 1/2, bye 0), `survived[e]` (rounds got through),
    logical `matches` judged and sequential judge `rounds`."""

    score: dict[int, float] = field(default_factory=dict)
    survived: dict[int, int] = field(default_factory=dict)
    matches: int = 0
    rounds: int = 0


def bracket_slots(ranked: Sequence[int]) -> list[int | None]:
    """Standard seeded bracket (8 slots: seeds 1, 8, 4, 5, 2, 7, 3, 6), `ranked[0]` seed 1; `None` is a bye:
    the P - n best seeds get one (P the next power of two), and no two byes meet."""
    size = 1 << max(len(ranked) - 1, 0).bit_length()
    seeds = [1]
    while len(seeds) < size:
        seeds = [x for s in seeds for x in (s, 2 * len(seeds) + 1 - s)]
    return [ranked[s - 1] if s <= len(ranked) else None for s in seeds]


async def single_elimination(ranked: Sequence[int], play: Play, tie_break: Callable[[int, int], int]) -> BracketResult:
    """One knockout bracket seeded by `ranked`; `play(matches)` scores each round's matches concurrently (the
    first entrant's score in [0, 1]); at exactly 1/2 `tie_break(a, b)` names who advances."""
    result = BracketResult(score={e: 0.0 for e in ranked}, survived={e: 0 for e in ranked})
    alive = bracket_slots(ranked)
    while len(alive) > 1:
        pairs = [(alive[k], alive[k + 1]) for k in range(0, len(alive), 2)]
        matches = [(a, b) for a, b in pairs if a is not None and b is not None]
        scores = dict(zip(matches, await play(matches), strict=True)) if matches else {}
        result.matches += len(matches)
        result.rounds += 1 if matches else 0
        alive = []
        for a, b in pairs:
            if a is None or b is None:
                winner = b if a is None else a
            else:
                s = scores[(a, b)]
                result.score[a] += s
                result.score[b] += 1.0 - s
                winner = a if s > 0.5 else b if s < 0.5 else tie_break(a, b)
            if winner is not None:
                result.survived[winner] += 1
            alive.append(winner)
    return result


def match_player(judge: Judge, group: Group, answers: Sequence[str], *, step: int, both_orders: bool) -> Play:
    """A `play` function for `single_elimination` over answer indices of one group."""

    async def play(matches: list[tuple[int, int]]) -> list[float]:
        texts = [(answers[a], answers[b]) for a, b in matches]
        return await judge_pairs(judge, group, texts, step=step, both_orders=both_orders)

    return play


# -------- all pairs: RRC-SCR, Pairwise Rank; the references: RRC-AGR -----------------------------------------
@dataclass
class PairwiseOptions(MethodOptions):
    """RRC-SCR's and RRC-AGR's options (Pairwise Rank adds `ties`)."""

    both_orders: bool = option(False, BOTH_ORDERS_HELP)


@dataclass
class PairwiseRankOptions(PairwiseOptions):
    ties: str = option(
        "min",
        "Equal win rates share 'min', the first rank they occupy (RankBuffer App. E), or 'average', "
        "their mean rank (MatrixReward App. D).",
        choices=["min", "average"],
    )


@dataclass
class ReferenceWinRateOptions(PairwiseOptions):
    """`ReferenceWinRateReward`'s options; it needs references and scores rollouts one by one."""

    def data_needs(self) -> DataNeeds:
        return DataNeeds(references=1, min_group_size=1)


class PairwiseWinRateReward(GroupRewardMethod):
    """RRC-SCR: every unordered pair judged holistically; reward = opponent-averaged win rate in [0, 1]
    (`win_rates`), invalid rollouts 0. Cost: C(U, 2) `PairwiseRequest`s (28 for G = 8), one round."""

    name = "rrc_scr"
    options_class = PairwiseOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        both_orders = self.options.both_orders
        pairs = all_pairs(len(candidates.answers))
        texts = [(candidates.answers[u], candidates.answers[v]) for u, v in pairs]
        scores = await judge_pairs(self.judge, group, texts, step=step, both_orders=both_orders)
        rates = win_rates(pairs, scores, [len(m) for m in candidates.members])
        details = {"requests": len(pairs) * (2 if both_orders else 1), "rounds": 1 if pairs else 0}
        return ScoreOutcome(rates, invalid_reward=0.0, details=details)


class PairwiseRankReward(PairwiseWinRateReward):
    """Pairwise Rank (RankBuffer App. E): RRC-SCR's exhaustive pairs, ranked by decreasing win rate (equal rates
    share the first rank, 1, 1, 3; `ties="average"`: MatrixReward App. D's mean ranks). Rank s among n valid
    responses gives r = 2(n - s)/(n - 1) - 1 (0 for n = 1); invalid ones lose everything and get -1.
    Cost: C(U, 2) `PairwiseRequest`s (28 for G = 8), one round."""

    name = "pairwise_rank"
    options_class = PairwiseRankOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        rated = await super().score_group(group, candidates, epoch=epoch, step=step)
        multiplicities = [len(m) for m in candidates.members]
        n = sum(multiplicities)
        ranks = shared_ranks(rated.values, multiplicities, ties=self.options.ties)
        values = [2.0 * (n - s) / (n - 1) - 1.0 if n > 1 else 0.0 for s in ranks]
        return ScoreOutcome(values, invalid_reward=-1.0, details={**rated.details, "win_rates": rated.values})


class ReferenceWinRateReward(GroupRewardMethod):
    """RRC-AGR (RankBuffer App. E): each answer against each of the query's R references (their ranks never
    shown); reward = win rate in [0, 1], invalid rollouts 0. Cost: U x R `PairwiseRequest`s, one round."""

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
        requests = len(texts) * (2 if both_orders else 1)
        return ScoreOutcome(rates, invalid_reward=0.0, details={"requests": requests, "rounds": 1 if texts else 0})


# -------- brackets: Tournament-GRPO, ArenaRL -----------------------------------------------------------------
@dataclass
class TournamentOptions(MethodOptions):
    brackets: int = option(
        3, "Independently shuffled single-elimination brackets per group (RankBuffer App. E uses 3)."
    )
    both_orders: bool = option(False, BOTH_ORDERS_HELP)

    def __post_init__(self):
        super().__post_init__()
        check_int("TournamentReward brackets", self.brackets, 1)


class TournamentReward(GroupRewardMethod):
    """Tournament-GRPO (Yang et al., 2026, arXiv:2605.26958; RankBuffer App. E, MatrixReward App. D).

    Each of B brackets shuffles the U unique answers (seeded by seed, query id, step, bracket) and plays a
    knockout: win 1, tie 1/2 each (a seeded coin flip advances), loss 0; the first P - U entrants get a bye.
    Accumulated score w over B brackets of R = ceil(log2 U) rounds gives r = 2 w / (B R) - 1 in [-1, 1]
    (0 when U = 1); invalid rollouts -1. Cost: B (U - 1) requests (21 for G = 8, B = 3), R rounds.
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
        details = {"requests": matches * (2 if both_orders else 1), "matches": matches, "rounds": rounds, "wins": wins}
        return ScoreOutcome(values, invalid_reward=-1.0, details=details)

    async def _bracket(self, group: Group, n: int, step: int, bracket: int, play):
        rng = seeded_rng(self.seed, self.name, group.query_id, step, bracket)
        entrants = list(range(n))
        rng.shuffle(entrants)
        return await single_elimination(entrants, play, lambda a, b: a if rng.random() < 0.5 else b)


@dataclass
class ArenaOptions(MethodOptions):
    both_orders: bool = option(True, BOTH_ORDERS_HELP + " On: the paper's setting.")


class ArenaReward(GroupRewardMethod):
    """ArenaRL (Zhang et al., 2026, arXiv:2601.06487) as in RankBuffer App. E.

    1. Seed round: every unique answer u against the first valid one gives its anchor score a_u (seed: 1/2).
    2. Tournament: answers seeded by decreasing a_u (ties in a seeded random order) play a standard
       bracket; a tied match goes to the higher seed.
    3. Order: by rounds survived, then anchor score (equal on both: one tie block); rank rewards (Eq. 9).

    Cost: 2 (U - 1) matches, each in both display orders by default (28 requests for G = 8);
    1 + ceil(log2 U) rounds.
    """

    name = "arena"
    options_class = ArenaOptions

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> RankOutcome:
        both_orders, answers, n = self.options.both_orders, candidates.answers, len(candidates.answers)
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
        key = [(bracket.survived[u], anchor[u]) for u in range(n)].__getitem__  # rounds survived, then anchor
        blocks = [list(block) for _, block in groupby(sorted(range(n), key=key), key=key)]
        matches = (n - 1 if n else 0) + bracket.matches
        details = {
            "requests": matches * (2 if both_orders else 1),
            "matches": matches,
            "rounds": (1 if n > 1 else 0) + bracket.rounds,
            "anchor_scores": anchor,
        }
        return RankOutcome(blocks, details=details)
