"""A simulated GRPO run for the reward-method benchmark: queries, references, rollouts, truth.

Every query has weighted rubrics (3 to 5, or `rubrics_per_query`; weights 1-5 as in the
papers' rubric lists), seven ranked reference responses (Nectar-like, best first; or the best
`references_per_query` of them) and, in every epoch, one group of G rollouts. Latent qualities live on the judges' 0-10 scale:

- query base `mu ~ U(3, 5)`; the references' qualities are evenly spaced from `mu - 2`
  (rank 7) to `mu + 3` (rank 1), so the best Nectar answers start above the policy;
- a rollout of epoch e: per-rubric qualities `q_k = mu + improvement * e + z + d_k`,
  `z ~ N(0, spread)` (the rollout), `d_k ~ N(0, rubric_spread)` (its rubric profile);
  its overall quality is the rubric-weighted mean of the `q_k`. The policy improves
  across epochs, so rollouts climb past the upper anchors and leave the lower ones idle:
  RankBuffer's expansion and pruning happen as in training.

Texts are pseudo-English of realistic length (`response_tokens` for rollouts and
`reference_tokens` for references on average, each 60%-140% of it),
lines drawn from a seeded pool of short paragraphs, each opening with a unique id line so that
every text is distinct and prompts share no accidental prefixes. A text whose target is shorter
than its first paragraph (e.g. a 16-token `max_completion_length`) is the id line and the first
words of that paragraph, so short targets give short texts; longer texts end at the paragraph
that reaches the target (a target of 60-100 tokens overshoots by up to one paragraph, ~40%). All draws are seeded by
`(seed, query, epoch, index)`: the same run is built in any process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..judging.requests import Rubric, seeded_rng, text_id
from ..rewards.base import Group

_WORDS = (
    "the answer should explain how each step follows from the previous one and why this matters for a reader who "
    "wants clear practical advice about building reliable software systems with careful testing of every part "
    "before release while keeping costs low and documentation short but complete so that new team members can "
    "learn quickly from examples data results measurements trade offs design choices risks benefits limits users "
    "customers teachers students writers engineers doctors questions problems solutions methods tools models "
    "reports summaries stories letters plans budgets schedules goals evidence sources claims arguments facts "
    "numbers errors changes improvements first second third finally however therefore because although often "
    "rarely usually simple complex useful accurate detailed concise friendly formal honest safe fair strong weak "
    "good better best small large early late fast slow new old common rare important different similar specific "
    "general"
).split()
_LINE_POOL = 1000  # distinct lines (2-4 sentences each) per run; a text's lines are drawn from them
_REFERENCE_OFFSETS = (3.0, 2.0, 1.25, 0.5, -0.25, -1.0, -2.0)  # rank 1 (best) .. rank 7, relative to mu
_ID_LINE_WORDS = 5  # "Answer 1a2b3c4d:" costs about 6 tokens, the tokens of 5 pseudo-words


@dataclass(frozen=True)
class SimQuery:
    """One query of the simulated dataset (references best first, as in Nectar)."""

    query_id: str
    text: str
    rubrics: tuple[Rubric, ...]
    references: tuple[str, ...]
    mu: float


class SimulatedRun:
    """Queries, rollout groups and latent qualities of one simulated training run.

    The arguments are the `bench_config.RewardBenchConfig` fields of the same names (their helps say
    what each sets; `queries=0`: only the queries `add_query` adds); `seed` seeds everything.
    """

    def __init__(
        self,
        *,
        queries: int = 200,
        group_size: int = 8,
        response_tokens: int = 500,
        reference_tokens: int = 300,
        improvement: float = 0.75,
        spread: float = 1.0,
        rubric_spread: float = 0.5,
        seed: int = 0,
        rubrics_per_query: int | None = None,
        references_per_query: int = len(_REFERENCE_OFFSETS),
    ):
        if queries < 0 or group_size < 2:
            raise ValueError(f"Need queries >= 0 and group_size >= 2, got queries={queries}, group_size={group_size}")
        if min(response_tokens, reference_tokens) < 1:
            raise ValueError(
                f"response_tokens and reference_tokens must be >= 1, got {response_tokens}, {reference_tokens}"
            )
        if rubrics_per_query is not None and rubrics_per_query < 1:
            raise ValueError(f"rubrics_per_query must be >= 1 or None (3 to 5), got {rubrics_per_query}")
        if not 0 <= references_per_query <= len(_REFERENCE_OFFSETS):
            raise ValueError(
                f"references_per_query must be in 0..{len(_REFERENCE_OFFSETS)}, got {references_per_query}"
            )
        self.rubrics_per_query = rubrics_per_query
        self.references_per_query = references_per_query
        self.group_size = group_size
        self.response_tokens = response_tokens
        self.reference_tokens = reference_tokens
        self.improvement = improvement
        self.spread = spread
        self.rubric_spread = rubric_spread
        self.seed = seed
        rng = seeded_rng(seed, "lines")
        self._lines = [_paragraph(rng) for _ in range(_LINE_POOL)]
        self._quality: dict[str, float] = {}
        self._rubric_quality: dict[str, tuple[float, ...]] = {}
        self._groups: dict[tuple[str, int], Group] = {}
        self.queries = [self._query(i) for i in range(queries)]

    # ---- what the judge and the benchmark look up -----------------------------------------

    def quality(self, query_id: str, text: str) -> float:
        """Latent overall quality of a reference or rollout text."""
        try:
            return self._quality[text]
        except KeyError:
            raise LookupError(f"Simulated run has no text {text[:60]!r} (query {query_id!r})") from None

    def rubric_quality(self, query_id: str, text: str, rubric_index: int) -> float:
        """Latent quality of a text under rubric `rubric_index`."""
        self.quality(query_id, text)
        return self._rubric_quality[text][rubric_index]

    def truth(self, group: Group) -> list[float]:
        """Latent quality of each completion of `group`."""
        return [self.quality(group.query_id, c) for c in group.completions]

    def group(self, query: SimQuery, epoch: int) -> Group:
        """The G rollouts of `query` in `epoch` (built once, then cached)."""
        key = (query.query_id, epoch)
        if key not in self._groups:
            rng = seeded_rng(self.seed, "rollouts", query.query_id, epoch)
            mean = query.mu + self.improvement * epoch
            completions = []
            for i in range(self.group_size):
                z = rng.gauss(0.0, self.spread)
                profile = [mean + z + rng.gauss(0.0, self.rubric_spread) for _ in query.rubrics]
                completions.append(
                    self._text(rng, f"{query.query_id}/{epoch}/{i}", query.rubrics, profile, self.response_tokens)
                )
            self._groups[key] = Group(query.query_id, query.text, query.rubrics, completions, query.references)
        return self._groups[key]

    def batches(self, epoch: int, per_step: int) -> list[list[SimQuery]]:
        """This epoch's queries in a seeded order, `per_step` per training step."""
        if per_step < 1:
            raise ValueError(f"queries per step must be >= 1, got {per_step}")
        order = list(self.queries)
        seeded_rng(self.seed, "order", epoch).shuffle(order)
        return [order[i : i + per_step] for i in range(0, len(order), per_step)]

    def add_query(
        self, query_id: str, text: str, rubrics: Sequence[Rubric] = (), references: Sequence[str] = ()
    ) -> SimQuery:
        """A query with given texts (a dataset row's), appended to `queries`: its latent base and its
        references' qualities are drawn as for a simulated query (references best first, evenly spaced
        from `mu + 3` down to `mu - 2`); without rubrics, simulated ones (`rubrics_per_query`) stand in."""
        rng = seeded_rng(self.seed, "given query", query_id)
        rubrics = tuple(rubrics) or self._query(len(self.queries)).rubrics
        mu = rng.uniform(3.0, 5.0)
        top, bottom = _REFERENCE_OFFSETS[0], _REFERENCE_OFFSETS[-1]
        for rank, reference in enumerate(references):
            quality = mu + top - (top - bottom) * rank / max(len(references) - 1, 1)
            self._quality[reference] = quality
            self._rubric_quality[reference] = (quality,) * len(rubrics)
        query = SimQuery(query_id, text, rubrics, tuple(references), mu)
        self.queries.append(query)
        return query

    # ---- generation ------------------------------------------------------------------------

    def _query(self, index: int) -> SimQuery:
        query_id = f"q{index:05d}"
        rng = seeded_rng(self.seed, "query", query_id)
        n_rubrics = rng.randint(3, 5)  # drawn even when fixed, so the rest of the query's draws stay the same
        n_rubrics = self.rubrics_per_query or n_rubrics
        rubrics = tuple(
            Rubric(f"The response {_sentence(rng, 8, 16)[0].lower()}", rng.randint(1, 5)) for _ in range(n_rubrics)
        )
        text = " ".join(_sentence(rng, 12, 24)[0] for _ in range(rng.randint(2, 4))) + " What would you recommend?"
        mu = rng.uniform(3.0, 5.0)
        references = tuple(
            self._text(rng, f"{query_id}/ref{rank}", rubrics, [mu + offset] * n_rubrics, self.reference_tokens)
            for rank, offset in enumerate(_REFERENCE_OFFSETS, 1)
        )[: self.references_per_query]
        return SimQuery(query_id, text, rubrics, references, mu)

    def _text(self, rng, ident: str, rubrics: Sequence[Rubric], profile: Sequence[float], tokens: int) -> str:
        """A response of ~`tokens` tokens with latent qualities `profile` (one per rubric)."""
        words_wanted = tokens / 1.2 * rng.uniform(0.6, 1.4)  # a pseudo-word is about 1.2 tokens
        lines, words = [f"Answer {text_id(f'{self.seed}/{ident}')[:8]}:"], 0
        while words < words_wanted:
            line, n = self._lines[rng.randrange(_LINE_POOL)]
            if not words and n > words_wanted:  # shorter than one paragraph: its first words
                lines.append(" ".join(line.split()[: max(1, round(words_wanted) - _ID_LINE_WORDS)]))
                break
            lines.append(line)
            words += n
        text = "\n".join(lines)
        total = sum(r.weight for r in rubrics)
        self._quality[text] = sum(r.weight * q for r, q in zip(rubrics, profile)) / total
        self._rubric_quality[text] = tuple(profile)
        return text


def _paragraph(rng) -> tuple[str, int]:
    """A line of 2-4 sentences, and its word count."""
    sentences = [_sentence(rng) for _ in range(rng.randint(2, 4))]
    return " ".join(text for text, _ in sentences), sum(n for _, n in sentences)


def _sentence(rng, low: int = 8, high: int = 20) -> tuple[str, int]:
    """A pseudo-English sentence of `low..high` words, and its word count."""
    n = rng.randint(low, high)
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + ".", n


__all__ = ["SimQuery", "SimulatedRun"]
