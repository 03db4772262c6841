"""`SimulatedJudge`: a judge with a known latent quality, seeded noise and biases.

For tests and the reward-method benchmark: the true ranking is known, so a method's
agreement with it can be measured. A text's perceived quality in one call is (Thurstone
Case V model)

    q(text) + t(query, text) + length_bias * len(text) / 100 + position_bias * b(display position)
        + N(0, (noise * g(request))^2)

where `q` is the latent quality (`quality(query_id, text)`, a `{text: quality}` dict, or
`rubric_quality(query_id, text, rubric_index)` for per-rubric requests), and `b` is 1 for
the first text shown and falls linearly to 0 for the last (pairwise: the displayed-first
response gets the whole bias; listwise: by display position). The display order is the one
`judging.rendering.render` gives an LLM judge for the same request and seed, so a
method's defence against position bias (seeded shuffles, both-order judging) is tested for
real. Coarse, pointwise, meta and buffer-select requests have a fixed display and no
position bias. Two optional terms make the judge less ideal than independent per-call noise:

- `t(query, text) ~ N(0, text_noise^2)` is a perception offset fixed per (query, text): the
  same in every call and every request type, so averaging calls cannot remove it (real
  judges are consistently wrong about some responses). It is drawn from
  `seeded_rng(seed, "text", query_id, text_id(text))`, so it does not depend on call order.
- `g(request) = 1 + listwise_noise_growth * max(0, n - 2)` scales the per-call noise of a
  `ListwiseRequest` or `CoarseRequest` that shows n texts (a coarse request shows K anchors
  and the candidate, n = K + 1): a judge ordering many long texts at once is less exact
  than one comparing two. Linear in the texts beyond a pair, so a pair (and every other
  request type) keeps g = 1, and with growth 0.05 a listwise call over 8 rollouts has
  1.3x the pairwise noise, a coarse call against 8 anchors 1.35x.

Both default to 0, which is the plain Thurstone model above. Verdicts then follow
`judging.quality_judge.QualityJudge`; pointwise scores are the perceived quality clipped
to [0, 10], and a meta-judge answer is `q(rationale) >= meta_threshold`.

Two options change the pointwise answers only, so comparisons stay as they are:
`pointwise_compression` c maps the perceived quality p to `5 + c * (p - 5)` before clipping
(c < 1: a judge whose 0-10 scores cluster around the middle of the scale, as real judges'
scores tend to, while it still tells two texts apart when asked to compare them), and
`integer_scores` rounds the score to an integer, as an LLM asked for a 0-10 score writes
one. Together they give the ties that make pointwise groups lose their advantages.

Deterministic: the noise of a call is drawn from `seeded_rng(seed, request, n)` where the
request enters by the `text_id`s of its texts (`_compact`) and `n` counts earlier identical
requests, so the same sequence of requests gets the same answers in any process, and
repeating a request draws fresh noise. With probability `fail_rate` a
call fails as an invalid answer (`JudgeFailure(kind="invalid")`), to exercise failure policies.

With probability `copy_display_order` a `ListwiseRequest` is not judged at all: the answer is
the IDs in the order they were shown (R0 worst, R1 next, ...), i.e. the display order in
canonical terms, as a lazy LLM judge copies the list it was given. The draw comes from
`seeded_rng(seed, "copy", request, n)` like the noise, so at 0 (the default) nothing changes;
`rewards.rank_buffer`'s display audit detects such a judge.

With `display_shuffle=False` the judge answers as if the renderer had not shuffled: position
bias (and `copy_display_order`) act on the canonical order, the texts in the order the method
put them in the request (a pair whose display the method fixed, "ab" or "ba", keeps it). This
models an LLM judge shown unshuffled prompts, to measure what the seeded shuffles buy; the
prompt is costed as rendered (the same texts, so the same tokens).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from functools import lru_cache

from ..judging.prompt_budget import TokenCounter
from ..judging.quality_judge import QualityJudge
from ..judging.requests import (
    CoarseRequest,
    JudgeFailure,
    ListwiseRequest,
    request_kind,
    seeded_rng,
    stable_seed,
    text_id,
)

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
        out = []
        for i, text in enumerate(texts):
            q = self.latent(request.query_id, text, rubric_index)
            q += self.length_bias * len(text) / 100 + bias[i]
            q += self.text_offset(request.query_id, text)
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

    def latent(self, query_id: str, text: str, rubric_index: int | None = None) -> float:
        """The noise- and bias-free quality of `text` (per rubric when `rubric_quality` is given)."""
        if rubric_index is not None and self.rubric_quality is not None:
            return float(self.rubric_quality(query_id, text, rubric_index))
        return float(self._quality(query_id, text))

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
    """What identifies a request, small: each text becomes its `text_id`; tuples and
    dataclasses (the request, its rubrics) recurse, with the class name. Hashing this instead
    of `repr(request)` (every text in full, on every call) took ~20% of `trl-rankreward bench`."""
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


__all__ = ["SimulatedJudge"]
