"""The simulated world of the benchmarks: a GRPO run with known truth, and judges that answer from it.

`SimulatedJudge` answers from a known latent quality, so a method's agreement with the truth can be measured. A
text's perceived quality in one call is (Thurstone Case V)

    q(text) + t(query, text) + length_bias * len(text) / 100 + position_bias * b(display position)
        + N(0, (noise * g(request))^2)

with `q` the latent quality (`quality`, per rubric `rubric_quality`); `b` 1 for the first text shown falling
linearly to 0 for the last, in the display order `judging.rendering.render` gives an LLM judge (so shuffles and
both-order judging are tested for real; `display_shuffle=False`: the method's own order); `t ~ N(0,
text_noise^2)` fixed per (query, text), which averaging cannot remove; `g = 1 + listwise_noise_growth * max(0,
n - 2)` for a listwise or coarse request of n texts, else 1. Verdicts follow `judging.quality_judge.QualityJudge`;
a pointwise score is `5 + pointwise_compression * (p - 5)` clipped to [0, 10] (rounded with `integer_scores`).
`fail_rate` and `copy_display_order` add invalid answers and lazy listwise answers (the display order copied).
Every draw is seeded by the request's `text_id`s and the count of earlier identical requests: the same requests
get the same answers in any process.

`SimulatedRun`: queries with weighted rubrics (3 to 5, weights 1-5), seven ranked references (Nectar-like) and a
group of G rollouts per epoch, on the 0-10 scale: query base `mu ~ U(3, 5)`, references from `mu + 3` (rank 1)
down to `mu - 2` (rank 7), a rollout of epoch e with per-rubric qualities `q_k = mu + improvement * e + z + d_k`
(`z ~ N(0, spread)`, `d_k ~ N(0, rubric_spread)`) and their rubric-weighted mean as its quality. Texts are seeded
pseudo-English of about `response_tokens` / `reference_tokens` (60%-140%), each after a unique id line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from functools import lru_cache

from ..judging.prompt_budget import TokenCounter
from ..judging.quality_judge import QualityJudge
from ..judging.requests import (
    CoarseRequest,
    JudgeFailure,
    ListwiseRequest,
    Rubric,
    request_kind,
    seeded_rng,
    stable_seed,
    text_id,
)
from ..rewards.base import Group

QualityFn = Callable[[str, str], float]
RubricQualityFn = Callable[[str, str, int], float]


class SimulatedJudge(QualityJudge):
    """Answers every request type from a latent quality (module docstring for the model)."""

    def __init__(
        self,
        quality: QualityFn | Mapping[str, float],
        *,
        noise: float = 0.0,
        position_bias: float = 0.0,
        length_bias: float = 0.0,
        seed: int = 0,
        token_counter: TokenCounter | str | None = None,
        templates=None,
        rubric_quality: RubricQualityFn | None = None,
        fail_rate: float = 0.0,
        tie_margin: float = 0.0,
        meta_threshold: float = 5.0,
        text_noise: float = 0.0,
        listwise_noise_growth: float = 0.0,
        copy_display_order: float = 0.0,
        display_shuffle: bool = True,
        pointwise_compression: float = 1.0,
        integer_scores: bool = False,
    ):
        super().__init__(
            token_counter=token_counter,
            templates=templates,
            seed=seed,
            tie_margin=tie_margin,
            pointwise_range=(0.0, 10.0),
            meta_threshold=meta_threshold,
        )
        if noise < 0:
            raise ValueError(f"noise is a standard deviation and must be >= 0, got {noise!r}")
        if text_noise < 0:
            raise ValueError(f"text_noise is a standard deviation and must be >= 0, got {text_noise!r}")
        if listwise_noise_growth < 0:
            raise ValueError(
                f"listwise_noise_growth is the noise added per text beyond two and must be >= 0, "
                f"got {listwise_noise_growth!r}"
            )
        if not 0.0 <= copy_display_order <= 1.0:
            raise ValueError(
                f"copy_display_order is the probability that a listwise answer copies the displayed order "
                f"and must be in [0, 1], got {copy_display_order!r}"
            )
        if pointwise_compression <= 0:
            raise ValueError(
                f"pointwise_compression scales pointwise score differences and must be > 0, got {pointwise_compression!r}"
            )
        if not 0.0 <= fail_rate <= 1.0:
            raise ValueError(f"fail_rate is a probability and must be in [0, 1], got {fail_rate!r}")
        self._quality = _quality_fn(quality)
        self.rubric_quality = rubric_quality
        self.noise = float(noise)
        self.position_bias = float(position_bias)
        self.length_bias = float(length_bias)
        self.fail_rate = float(fail_rate)
        self.text_noise = float(text_noise)
        self.listwise_noise_growth = float(listwise_noise_growth)
        self.copy_display_order = float(copy_display_order)
        self.display_shuffle = bool(display_shuffle)
        self.pointwise_compression = float(pointwise_compression)
        self.integer_scores = bool(integer_scores)
        self._seen: Counter[tuple] = Counter()  # draws per (purpose, request, rubric) so far

    async def judge(self, request):
        if self.fail_rate and self._rng("fail", request, None).random() < self.fail_rate:
            self.ledger.record(
                request_kind=request_kind(request),
                parsed=False,
                prompt_tokens=self.prompt_tokens(request),
                failure="invalid",
            )
            return JudgeFailure("invalid", "SimulatedJudge: simulated invalid answer (fail_rate)")
        return await super().judge(request)

    async def _verdict(self, request, display: tuple[int, ...]):
        if display and not self.display_shuffle and getattr(request, "display", "auto") == "auto":
            display = tuple(range(len(display)))  # what an unshuffled rendering shows (module docstring)
        copying = self.copy_display_order and isinstance(request, ListwiseRequest) and display
        if copying and self._rng("copy", request, None).random() < self.copy_display_order:
            return list(display)  # the IDs as shown, R0 first: display[slot] is the canonical index in slot
        return await super()._verdict(request, display)

    async def qualities(
        self, request, texts: Sequence[str], rubric_index: int | None = None, *, display: tuple[int, ...] = ()
    ) -> list[float]:
        rng = self._rng("noise", request, rubric_index)
        bias = self._position_bonus(display, len(texts))
        sd = self.noise * self.noise_scale(request, len(texts))
        per_rubric, qid = rubric_index is not None and self.rubric_quality is not None, request.query_id
        out = []
        for i, text in enumerate(texts):
            q = float(self.rubric_quality(qid, text, rubric_index) if per_rubric else self._quality(qid, text))
            q += self.length_bias * len(text) / 100 + bias[i]
            q += self.text_offset(qid, text)
            out.append(q + (rng.gauss(0.0, sd) if sd else 0.0))
        return out

    def pointwise_score(self, quality: float) -> float:
        """`5 + pointwise_compression * (quality - 5)` clipped to 0..10, an integer with `integer_scores`."""
        score = super().pointwise_score(5.0 + self.pointwise_compression * (quality - 5.0))
        return float(round(score)) if self.integer_scores else score

    def noise_scale(self, request, n: int) -> float:
        """g(request): `1 + listwise_noise_growth * max(0, n - 2)` for listwise and coarse requests, else 1."""
        if self.listwise_noise_growth and isinstance(request, (ListwiseRequest, CoarseRequest)):
            return 1.0 + self.listwise_noise_growth * max(0, n - 2)
        return 1.0

    def text_offset(self, query_id: str, text: str) -> float:
        """t(query, text): the fixed perception offset of `text` (0 when `text_noise` is 0)."""
        return self.text_noise * _text_offset(self.seed, query_id, text) if self.text_noise else 0.0

    def _rng(self, purpose: str, request, rubric_index: int | None):
        key = (purpose, stable_seed(_compact(request)), rubric_index)
        n = self._seen[key]
        self._seen[key] += 1
        return seeded_rng(self.seed, *key, n)

    def _position_bonus(self, display: tuple[int, ...], n: int) -> list[float]:
        """Bias per canonical text: `position_bias * (n - 1 - d) / (n - 1)` when shown in slot d."""
        bonus = [0.0] * n
        if self.position_bias and display:
            for slot, index in enumerate(display):
                bonus[index] = self.position_bias * (n - 1 - slot) / (n - 1)
        return bonus


# Texts recur across calls (a buffer's anchors in every coarse request): hash each one once.
_text_key = lru_cache(maxsize=1 << 16)(text_id)


@lru_cache(maxsize=1 << 16)
def _text_offset(seed: int, query_id: str, text: str) -> float:
    """A standard normal draw fixed by (seed, query, text): the unit offset behind `text_noise`."""
    return seeded_rng(seed, "text", query_id, _text_key(text)).gauss(0.0, 1.0)


def _compact(value: object) -> object:
    """What identifies a request, small: each text its `text_id`, tuples and dataclasses recursed (with the class
    name). Hashing `repr(request)` instead took ~20% of `trl-rankreward bench`."""
    if isinstance(value, str):
        return _text_key(value)
    if isinstance(value, (tuple, list)):
        return tuple(map(_compact, value))
    if is_dataclass(value):
        return (type(value).__name__, *(_compact(getattr(value, f.name)) for f in fields(value)))
    return value


def _quality_fn(quality: QualityFn | Mapping[str, float]) -> QualityFn:
    if isinstance(quality, Mapping):
        table = dict(quality)

        def lookup(query_id: str, text: str) -> float:
            try:
                return table[text]
            except KeyError:
                raise LookupError(
                    f"SimulatedJudge quality dict has no entry for text {text[:80]!r} (query {query_id!r}); "
                    "add it or pass a quality(query_id, text) function"
                ) from None

        return lookup
    if not callable(quality):
        raise TypeError(f"quality must be a callable (query_id, text) -> float or a dict, got {type(quality).__name__}")
    return quality


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
    """Queries, rollout groups and latent qualities of one simulated run (module docstring); the arguments are the
    `bench_config.RewardBenchConfig` fields of the same names (`queries=0`: only those `add_query` adds)."""

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
        """A query with given texts (a dataset row's), appended to `queries`: latent base drawn as for a simulated
        one, references (best first) evenly spaced from `mu + 3` down to `mu - 2`; without rubrics, simulated ones."""
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
