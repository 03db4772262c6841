"""The pairwise baselines: methods whose judge compares two texts at a time.

- Exhaustive pairs: RRC-SCR (`PairwiseWinRateReward`), RRC-AGR against the references
  (`ReferenceWinRateReward`) and Pairwise Rank (`PairwiseRankReward`). RRC (Wang et al., 2026,
  arXiv:2608.06310) as specified in RankBuffer App. E and MatrixReward App. D; Pairwise Rank as
  specified in RankBuffer App. E. Every comparison of a group is independent: one judge round.
- Knockout brackets: Tournament-GRPO (`TournamentReward`) and ArenaRL (`ArenaReward`).

Their building blocks (also used by `genrm_reward`): `judge_pairs` (holistic `PairwiseRequest`s),
win rates, shared ranks and single-elimination brackets. Presentation order is not chosen here:
requests carry `query_id` and `step`, and the judge picks the display order from the judging
layer's deterministic hash (`display="auto"`). With `both_orders`, each logical comparison is two
requests, one per display order (`judging.requests.ask_pair`). How the judge answers (a bare JSON
verdict, or a rationale first with `JudgeTemplates(pairwise_rationale=True)`) is the judge's
template choice; the verdicts these functions receive are the same.

Reward scale of RRC-SCR and RRC-AGR: the win rate itself, in [0, 1] (MatrixReward App. D:
"RRC-SCR uses that rate as the scalar reward"); invalid rollouts get 0, the rate of a
response that loses every comparison. GRPO's group normalization makes the scale matter
only relative to `lambda_fmt` and under `scale_rewards="none"`.

Duplicated answers are judged once: requests count unique valid answers U, not G.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from ..judging.requests import Judge, PairwiseRequest, ask_pair, seeded_rng
from .base import Candidates, Group, GroupRewardMethod, RankOutcome, ScoreOutcome, require
from .options import DataNeeds, MethodOptions, check_int

#: the help of the pairwise methods' `both_orders` option
BOTH_ORDERS_HELP = "Judge each comparison in both display orders and average (2 requests per comparison)."


def all_pairs(n: int) -> list[tuple[int, int]]:
    """Every unordered pair (i, j), i < j, of `range(n)`: C(n, 2) pairs."""
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def requests_per_match(both_orders: bool) -> int:
    return 2 if both_orders else 1


async def judge_pairs(
    judge: Judge, group: Group, pairs: Sequence[tuple[str, str]], *, step: int, both_orders: bool = False
) -> list[float]:
    """Score of `a` against `b` for each text pair, judged concurrently.

    Raises `GroupJudgingFailed` when any comparison failed after the judge's retries.
    """
    requests = [group.request(PairwiseRequest, step=step, a=a, b=b) for a, b in pairs]
    outcomes = await asyncio.gather(*(ask_pair(judge, r, both_orders=both_orders) for r in requests))
    return [float(s) for s in require(outcomes)]


def win_rates(pairs: Sequence[tuple[int, int]], scores: Sequence[float], multiplicities: Sequence[int]) -> list[float]:
    """Opponent-averaged win rate of each unique answer, duplicates counted with multiplicity.

    `scores[p]` is the outcome of `pairs[p][0]` against `pairs[p][1]`. Answer u with m_u
    copies meets each copy of every other answer and its own m_u - 1 copies (ties, 1/2):
        rate_u = (sum_v m_v s(u, v) + (m_u - 1) / 2) / (n - 1),  n = sum_u m_u,
    which is what judging the undeduplicated group would give with a judge that ties
    identical texts. With no opponent (n = 1) the rate is 1/2.
    """
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
    """Rank 1 = highest value. Equal values share a rank: the first they occupy (`ties="min"`,
    competition ranking, e.g. 1, 1, 3) or the mean of the places they occupy (`ties="average"`,
    e.g. 1.5, 1.5, 3). An entry with multiplicity m occupies m places.
    """
    if ties not in ("min", "average"):
        raise ValueError(f"ties must be 'min' or 'average', got {ties!r}")
    mult = list(multiplicities or [1] * len(values))
    ranks = []
    for v in values:
        first = 1 + sum(m for w, m in zip(values, mult, strict=True) if w > v)
        tied = sum(m for w, m in zip(values, mult, strict=True) if w == v)
        ranks.append(float(first) if ties == "min" else first + (tied - 1) / 2)
    return ranks


@dataclass
class BracketResult:
    """Outcome of one single-elimination bracket over entrant ids.

    `score[e]`: accumulated match scores of entrant e (a won match 1, a tie 1/2, a bye 0);
    `survived[e]`: rounds e got through (the champion: all `rounds`); `matches`: logical
    matches judged (entrants - 1); `rounds`: sequential judge rounds, ceil(log2(entrants)).
    """

    score: dict[int, float] = field(default_factory=dict)
    survived: dict[int, int] = field(default_factory=dict)
    matches: int = 0
    rounds: int = 0


def bracket_slots(ranked: Sequence[int]) -> list[int | None]:
    """Standard seeded bracket: `ranked[0]` is seed 1; `None` marks a bye.

    Slots are filled so seeds 1 and 2 can only meet in the final (size 8 slots: seeds
    1, 8, 4, 5, 2, 7, 3, 6). With n entrants and P = next power of two, the P - n best
    seeds get a first-round bye, and no two byes meet.
    """
    size = 1 << max(len(ranked) - 1, 0).bit_length()
    seeds = [1]
    while len(seeds) < size:
        seeds = [x for s in seeds for x in (s, 2 * len(seeds) + 1 - s)]
    return [ranked[s - 1] if s <= len(ranked) else None for s in seeds]


async def single_elimination(
    ranked: Sequence[int],
    play: Callable[[list[tuple[int, int]]], Awaitable[list[float]]],
    tie_break: Callable[[int, int], int],
) -> BracketResult:
    """Run one knockout bracket; each round's matches are judged concurrently by `play`.

    `ranked` gives the bracket seeding (see `bracket_slots`). `play(matches)` returns the
    score of the first entrant of each match in [0, 1]; above 1/2 the first advances,
    below the second, at exactly 1/2 (a tie) `tie_break(a, b)` names who advances.
    """
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


def match_player(
    judge: Judge, group: Group, answers: Sequence[str], *, step: int, both_orders: bool
) -> Callable[[list[tuple[int, int]]], Awaitable[list[float]]]:
    """A `play` function for `single_elimination` over answer indices of one group."""

    async def play(matches: list[tuple[int, int]]) -> list[float]:
        texts = [(answers[a], answers[b]) for a, b in matches]
        return await judge_pairs(judge, group, texts, step=step, both_orders=both_orders)

    return play


# -------- all pairs: RRC-SCR, Pairwise Rank; the references: RRC-AGR -----------------------------------------
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
    (`win_rates`; duplicates of an answer tie with it). Reward in [0, 1];
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


# -------- brackets: Tournament-GRPO, ArenaRL -----------------------------------------------------------------
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
    """Tournament-GRPO: rewards from wins accumulated over `brackets` shuffled single-elimination brackets.

    Tournament-GRPO (Yang et al., 2026, arXiv:2605.26958) as specified in RankBuffer App. E
    ("three independently shuffled binary tournaments for each group of eight rollouts,
    requiring 21 logical comparisons") and MatrixReward App. D ("advances judged winners,
    accumulates tournament scores, and normalizes the resulting group rewards").

    Each bracket shuffles the U unique valid answers with a seeded RNG (`judging.requests`,
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


@dataclass
class ArenaOptions(MethodOptions):
    """`ArenaReward`'s options (see its docstring)."""

    both_orders: bool = field(default=True, metadata={"help": BOTH_ORDERS_HELP + " On: the paper's setting."})


class ArenaReward(GroupRewardMethod):
    """ArenaRL: rank rewards from a seed-comparison round and a bracket seeded by its results.

    ArenaRL (Zhang et al., 2026, arXiv:2601.06487) as implemented in RankBuffer App. E: "uses
    the first rollout as a deterministic seed response, compares each sampled rollout against
    that seed, and then runs a seeded single-elimination tournament. Each logical match is
    judged in both candidate orders. A group of eight therefore requires 14 logical matches
    and 28 successful judge requests." (MatrixReward App. D instead runs a both-order round
    robin; that variant is `PairwiseRankReward(both_orders=True)` up to its rank mapping.)

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
